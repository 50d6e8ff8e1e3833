"""When an article reached a page is when the page went live (issue 31): ``log/listings`` is stamped
after the pointers moved, with the cycle's instant plus the time the cycle took, so the freshness
dashboard measures to the moment readers could see it, not to the start of the rank run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from test_rank_publish_recovery import _output

from tasks.rank.publish import publish_computed
from tasks.settings import RankSettings
from warehouse import layout
from warehouse.schemas import LISTINGS_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import list_segments, read_segment

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_listings_are_stamped_when_the_pages_went_live(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    output = _output(T0, "ab")
    output.listings.extend([{"article_id": "a-a", "story_id": "a", "listed_at": T0},
                            {"article_id": "a-b", "story_id": "b", "listed_at": T0}])
    summary = publish_computed(store, output, T0, RankSettings(), elapsed=lambda: 7.5)
    assert summary["published"] == ["en-US/top"]
    (key,) = list_segments(store, layout.LISTINGS_PREFIX)
    rows = read_segment(store, key, LISTINGS_SCHEMA).to_pylist()
    assert {r["listed_at"] for r in rows} == {T0 + timedelta(seconds=7.5)}


def test_a_cycle_that_publishes_nothing_lists_nothing(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    publish_computed(store, _output(T0, "ab"), T0, RankSettings())
    again = _output(T0 + timedelta(minutes=1), "ab")
    again.listings.append({"article_id": "a-a", "story_id": "a", "listed_at": T0})
    publish_computed(store, again, T0 + timedelta(minutes=1), RankSettings(), elapsed=lambda: 3.0)
    assert not list_segments(store, layout.LISTINGS_PREFIX)  # the story snapshot did not change
