"""The transform of a rank cycle (``transforms.rank_pages.rank_pages``) computes the pages from its
inputs alone: with the store gone, it gives the bytes the store-backed cycle gives.
Real LocalStore over a synthetic world (tests/rank_world.py), no mocks."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from rank_world import quiet_world

from tasks.aggregates.cycle import aggregates_from_logs
from tasks.rank.compute import compute_pages
from tasks.rank.params import rank_params
from tasks.settings import RankSettings
from transforms.page_json import StoryEntry
from transforms.rank_pages import PageInputs, RankOutput, rank_pages
from warehouse.snapshots import dump_snapshot
from warehouse.store import LocalStore

SETTINGS = RankSettings()


class _NothingPublished:
    """Earlier story snapshots: none (the first cycle)."""

    def story_entries_before(self, story_ids: Iterable[str], at: datetime) -> dict[str, StoryEntry]:
        return {}


def _bytes(output: RankOutput) -> dict[str, bytes]:
    out = {f"{e}/{s}": dump_snapshot(page.to_json()) for (e, s), page in sorted(output.pages.items())}
    out["stories"] = dump_snapshot(dict(output.stories))
    return out


def test_the_pages_come_from_the_inputs_alone(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    _, _, now = quiet_world(store)
    expected = compute_pages(store, now, SETTINGS, view=aggregates_from_logs(store, now, SETTINGS))
    view = aggregates_from_logs(store, now, SETTINGS)  # members held in memory, not read on demand
    shutil.rmtree(tmp_path / "store")
    inputs = PageInputs(stories=view.stories, publishers=view.registry.publishers, aliases=view.aliases,
                        members=view.members, live_pages={}, past=_NothingPublished())
    output = rank_pages(inputs, now, rank_params(SETTINGS))
    assert len(output.pages) > 2 and output.stories["stories"]
    assert _bytes(output) == _bytes(expected)
    assert output.breaking == expected.breaking and output.listings == expected.listings
