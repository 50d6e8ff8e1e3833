"""Rank & publish over a synthetic world written by the warehouse code: Breaking, stability,
validation, rollback and time travel. Real LocalStore, real DuckDB, the real rank functions."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from rank_world import World, quiet_world

from flows.cli import main
from serving.app import create_app
from serving.settings import ServingSettings
from tasks.rank.compute import compute_pages
from tasks.rank.publish import publish_all, publish_computed
from tasks.rank.rebuild import rebuild_as_of, rollback_pointer
from tasks.settings import RankSettings
from tasks.storage import reset_configured_store
from transforms.records import EditionPage
from warehouse import layout
from warehouse.snapshots import list_live_pages, publish_stories, read_live_page, read_pointer
from warehouse.store import LocalStore, ObjectStore

pytestmark = pytest.mark.slow

SETTINGS = RankSettings()


def _top(store: LocalStore, edition: str = "en-US") -> list[dict[str, object]]:
    return json.loads(read_live_page(store, edition, "top").data)["stories"]


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


@pytest.fixture
def cli_store(tmp_path: Path) -> Iterator[LocalStore]:
    root = tmp_path / "store"
    saved = os.environ.get("NEWSROOM_WAREHOUSE_ROOT")
    os.environ["NEWSROOM_WAREHOUSE_ROOT"] = str(root)
    reset_configured_store()
    yield LocalStore(root)
    if saved is None:
        os.environ.pop("NEWSROOM_WAREHOUSE_ROOT", None)
    else:
        os.environ["NEWSROOM_WAREHOUSE_ROOT"] = saved
    reset_configured_store()


def _burst(world: World, at, publishers: list[str]) -> None:  # noqa: ANN001
    world.add([("burst", p, at - timedelta(seconds=55 - 4 * k)) for k, p in enumerate(publishers)], topic="world")


def test_a_burst_is_breaking_at_the_top_within_two_cycles(store: LocalStore) -> None:
    world, ids, now = quiet_world(store)
    pubs = world.publisher_ids()
    seen_burst = 0
    reached_at: int | None = None
    ten_at: int | None = None
    for cycle in range(10):
        at = now + timedelta(minutes=cycle)
        world.add(world.quiet_minute(at, ids, 0.08))
        if 3 <= cycle < 7:  # 12 originals from 12 publishers within 4 minutes
            _burst(world, at, pubs[(cycle - 3) * 3:(cycle - 2) * 3])
            seen_burst += 3
            if seen_burst >= 10 and ten_at is None:
                ten_at = cycle
        publish_all(store, at, SETTINGS)
        first = _top(store)[0]
        if first["story_id"] == "burst" and first["is_breaking"] and reached_at is None:
            reached_at = cycle
            assert first["breaking_since"] is not None and first["score_parts"]["velocity"] > 0
    assert ten_at is not None and reached_at is not None
    assert reached_at - ten_at < 2, (ten_at, reached_at)
    assert not any(s["is_breaking"] for s in _top(store)[1:])
    event = json.loads(store.get(layout.event_key("story.breaking", "burst")).data)
    assert event["story_id"] == "burst" and "en-US" in event["editions"]
    boosts = json.loads(store.get(layout.FEED_BOOSTS_KEY).data)
    assert set(pubs[:12]) <= set(boosts) and min(boosts.values()) > event["breaking_since"]


def test_quiet_cycles_move_no_top_story_more_than_one_place(store: LocalStore) -> None:
    world, ids, now = quiet_world(store)
    previous: list[str] | None = None
    moves = []
    for cycle in range(11):
        at = now + timedelta(minutes=cycle)
        world.add(world.quiet_minute(at, ids, 0.08))
        publish_all(store, at, SETTINGS)
        top = [s["story_id"] for s in _top(store)[:10]]
        if previous is not None and set(top) <= set(previous):
            moves += [abs(top.index(s) - previous.index(s)) for s in top]
        previous = top
    assert moves and max(moves) <= 1


def test_a_bad_cycle_keeps_the_live_version_and_rollback_moves_the_pointer(cli_store: LocalStore) -> None:
    store = cli_store
    world, ids, now = quiet_world(store)
    publish_all(store, now, SETTINGS)
    live = read_pointer(store, "en-US", "top")
    assert live is not None
    later = now + timedelta(minutes=1)
    world.add(world.quiet_minute(later, ids, 0.5))
    output = compute_pages(store, later, SETTINGS)
    good = output.pages[("en-US", "top")]
    gb = output.pages[("en-GB", "top")]
    assert isinstance(good, EditionPage) and isinstance(gb, EditionPage)
    output.pages[("en-US", "top")] = replace(good, stories=())
    output.pages[("en-GB", "top")] = replace(gb, stories=gb.stories[:10])
    summary = publish_computed(store, output, later, SETTINGS)
    assert set(summary["refused"]) == {"en-US/top", "en-GB/top"}
    assert "fewer than" in summary["refused"]["en-US/top"] and "lost" in summary["refused"]["en-GB/top"]
    assert read_pointer(store, "en-US", "top") == live
    assert store.list("log/events/page.refused/")
    # A good cycle publishes v2; rollback puts v1 back; the next version is v3, never v2 again.
    output.pages[("en-US", "top")] = good
    publish_computed(store, output, later, SETTINGS)
    assert read_pointer(store, "en-US", "top").version == 2
    assert main(["pages", "rollback", "en-US", "top", "1"]) == 0
    assert read_pointer(store, "en-US", "top").version == 1
    assert rollback_pointer(store, "en-US", "top", 1, later).published is False  # already live
    # A rollback is an event in the log, so --as-of sees the pointer as readers did.
    assert read_pointer(store, "en-SG", "top").version == 2
    assert rollback_pointer(store, "en-SG", "top", 1, later + timedelta(seconds=30)).published
    rows = {r["key"]: r for r in rebuild_as_of(store, later + timedelta(seconds=40), SETTINGS)}
    assert rows["pages/en-SG/top/v1.json"]["identical"] and "pages/en-SG/top/v2.json" not in rows
    world.add(world.quiet_minute(later + timedelta(minutes=1), ids, 0.5))
    publish_all(store, later + timedelta(minutes=1), SETTINGS)
    assert read_pointer(store, "en-US", "top").version == 3


def test_as_of_rebuilds_published_pages_byte_for_byte(cli_store: LocalStore, tmp_path: Path) -> None:
    store = cli_store
    world, ids, now = quiet_world(store)
    pubs = world.publisher_ids()
    for cycle in range(6):
        at = now + timedelta(minutes=cycle)
        world.add(world.quiet_minute(at, ids, 0.1))
        if cycle in (2, 3, 4):
            _burst(world, at, pubs[(cycle - 2) * 4:(cycle - 1) * 4])
        publish_all(store, at, SETTINGS)
    assert ("en-US", "pool") not in list_live_pages(store)
    pool = json.loads(read_live_page(store, "en-US", "pool").data)
    top = _top(store)
    assert pool["stories"][0]["story_id"] == top[0]["story_id"] == "burst"  # pinned in both
    assert pool["representatives"] == [s["sources"][0]["publisher_id"] for s in top]
    assert sum(pool["impressions"]["counts"].values()) > 0
    assert set(top[0]["score_parts"]) == {"coverage", "velocity", "freshness", "regional_share"}
    before = {k: store.get(k).data for k in store.list("")}
    for minute in (1, 3, 5):
        report = rebuild_as_of(store, now + timedelta(minutes=minute, seconds=30), SETTINGS)
        assert len(report) >= 10
        assert all(r["identical"] for r in report), [r for r in report if not r["identical"]][:3]
    assert {r["version"] for r in report if r["key"].startswith("pages/en-US/top/")} == {6}
    assert any(r["key"].startswith("pages/stories/") for r in report)  # Full Coverage too
    out = tmp_path / "asof"
    assert main(["rank", "--as-of", (now + timedelta(minutes=4)).isoformat(), "--output", str(out)]) == 0
    rebuilt = out / "pages/en-US/top/v5.json"
    assert rebuilt.read_bytes() == store.get("pages/en-US/top/v5.json").data
    assert {k: store.get(k).data for k in store.list("")} == before  # nothing written to the store


class _PageWritesFail(LocalStore):
    """The same folder, but every write under one page fails (an error in the middle of a publish)."""

    def __init__(self, root: Path, edition: str, section: str) -> None:
        super().__init__(root)
        self._prefix = f"{layout.PAGES_PREFIX}{edition}/{section}/"

    def put(self, key: str, data: bytes, **kwargs: object) -> str:
        if key.startswith(self._prefix):
            raise OSError(f"injected write failure: {key}")
        return super().put(key, data, **kwargs)  # type: ignore[arg-type]


def _unanswered_stories(store: ObjectStore, tmp_path: Path) -> dict[str, int]:
    """Every story id listed on a live page whose Full Coverage is neither 200 nor a 301 to a
    survivor, with the status it got, read through the serving app like a reader clicking it."""
    settings = ServingSettings(refresh_seconds=3600, profiles_path=str(tmp_path / "profiles.sqlite3"),
                               hmac_key="test-signing-key-0123456789abcdef-not-a-secret")  # type: ignore[arg-type]
    bad: dict[str, int] = {}
    with TestClient(create_app(store, settings)) as client:
        for listing in client.get("/v1/editions").json():
            for section in listing["sections"]:
                page = client.get(f"/v1/editions/{listing['edition']}/{section}")
                assert page.status_code == 200
                for story in page.json()["stories"]:
                    got = client.get(f"/v1/stories/{story['story_id']}", follow_redirects=False)
                    if got.status_code == 301:
                        got = client.get(got.headers["location"], follow_redirects=False)
                    if got.status_code != 200:
                        bad[story["story_id"]] = got.status_code
    return bad


@pytest.mark.parametrize("how", ["refused", "failed"])
def test_every_story_on_a_live_page_opens_when_a_page_is_not_published(
        store: LocalStore, tmp_path: Path, how: str) -> None:
    world, _, now = quiet_world(store)
    publish_all(store, now, SETTINGS)
    old_top = {s["story_id"] for s in _top(store)}
    # Two days on, the old stories have left every page (active_hours) and new ones lead.
    later = now + timedelta(hours=49)
    pubs = world.publisher_ids()
    world.add([(f"fresh{i:03d}", pubs[(i + j) % len(pubs)], later - timedelta(minutes=50 - 9 * j))
               for i in range(30) for j in range(2 + i % 4)])
    output = compute_pages(store, later, SETTINGS)
    top = output.pages[("en-US", "top")]
    assert isinstance(top, EditionPage)
    assert not old_top & {s.story_id for s in top.stories}
    if how == "refused":
        output.pages[("en-US", "top")] = replace(top, stories=())
        summary = publish_computed(store, output, later, SETTINGS)
        assert "en-US/top" in summary["refused"] and "en-GB/top" in summary["published"]
    else:
        with pytest.raises(OSError, match="injected"):
            publish_computed(_PageWritesFail(store.root, "en-US", "top"), output, later, SETTINGS)
        assert read_pointer(store, "en-GB", "top").version == 2  # type: ignore[union-attr]
    assert read_pointer(store, "en-US", "top").version == 1  # type: ignore[union-attr]
    assert {s["story_id"] for s in _top(store)} == old_top
    assert _unanswered_stories(store, tmp_path) == {}
    # The next cycle publishes the page; the old stories may then leave the story snapshot.
    publish_all(store, later + timedelta(minutes=1), SETTINGS)
    assert read_pointer(store, "en-US", "top").version == 2  # type: ignore[union-attr]
    assert _unanswered_stories(store, tmp_path) == {}


def test_pages_wait_while_a_newer_story_snapshot_is_live(store: LocalStore, tmp_path: Path) -> None:
    world, _, now = quiet_world(store)
    publish_all(store, now, SETTINGS)
    later = now + timedelta(hours=49)
    pubs = world.publisher_ids()
    world.add([(f"fresh{i:03d}", pubs[(i + j) % len(pubs)], later - timedelta(minutes=50 - 9 * j))
               for i in range(30) for j in range(2 + i % 4)])
    late = compute_pages(store, later, SETTINGS)
    # A newer run put its story snapshot live first (and has not published its pages yet).
    newer = later + timedelta(minutes=1)
    first = json.loads(store.get("pages/stories/v1.json").data)
    newer_stories = dict(first, as_of=newer.strftime("%Y-%m-%dT%H:%M:%SZ"),
                         aliases={**first["aliases"], "merged000": min(first["stories"])})
    assert publish_stories(store, newer_stories, now=newer, validate=lambda new, prev: None).published
    summary = publish_computed(store, late, later, SETTINGS)
    assert summary["published"] == []
    assert summary["not_published"]["stories"].startswith("stale:")
    assert summary["not_published"]["en-US/top"].endswith("(story snapshot)")
    assert read_pointer(store, "en-US", "top").version == 1  # type: ignore[union-attr]
    assert _unanswered_stories(store, tmp_path) == {}
