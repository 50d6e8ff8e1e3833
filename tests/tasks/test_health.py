"""Health checks, each made to fire on a store built with the warehouse's own writers."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from tasks.health import check_health
from warehouse import layout
from warehouse.schemas import ARTICLES_SCHEMA, PUBLISHERS_SCHEMA
from warehouse.snapshots import publish_page
from warehouse.store import LocalStore
from warehouse.tables import rows_to_table, write_segment, write_table

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _article(i: int, publisher: str, seen: datetime, lag: timedelta) -> dict[str, object]:
    row: dict[str, object] = {name: None for name in ARTICLES_SCHEMA.names}
    row.update(article_id=f"a{i:04d}", version=1, content_hash=f"h{i}", publisher_id=publisher, language="en",
               title=f"t{i}", first_seen_at=seen, published_at=seen - lag)
    return row


def _store(tmp_path, *, lag: timedelta = timedelta(seconds=40), silent_for: timedelta = timedelta(0)) -> LocalStore:
    store = LocalStore(tmp_path / "store")
    publishers = [{"publisher_id": p, "name": p, "domain": p, "region": "US", "language": "en", "tier": t,
                   "authority": 0.5, "is_paywalled": False, "is_opted_out": False} for p, t in [("wire", 1), ("blog", 2)]]
    write_table(store, layout.PUBLISHERS_KEY, pa.Table.from_pylist(publishers, PUBLISHERS_SCHEMA), PUBLISHERS_SCHEMA)
    end = NOW - silent_for
    rows = [_article(i, "wire", end - timedelta(minutes=5 * i), lag) for i in range(12)]
    write_segment(store, layout.article_segment_key(NOW, "s1"), rows_to_table(rows, ARTICLES_SCHEMA), ARTICLES_SCHEMA)
    store.put(layout.story_checkpoint_key("en"), json.dumps({
        "offset": 12, "state_key": None, "consumed": [layout.article_segment_key(NOW, "s1")],
        "updated_at": NOW.isoformat()}).encode())
    return store


def _page(store: LocalStore, published: datetime, stories: list[dict[str, object]]) -> None:
    publish_page(store, "en-US", "top", {"schema": "newsroom.page/1", "edition": "en-US", "section": "top",
                                         "stories": stories}, now=published, validate=lambda new, prev: None)


def _story(story_id: str, *article_ids: str) -> dict[str, object]:
    return {"story_id": story_id, "sources": [{"article_id": a} for a in article_ids]}


def test_a_healthy_store_raises_no_flag(tmp_path) -> None:
    store = _store(tmp_path)
    _page(store, NOW - timedelta(seconds=30), [_story("s1", "a0001"), _story("s2", "a0002")])
    assert check_health(store, NOW) == []


def test_each_check_fires(tmp_path) -> None:
    store = _store(tmp_path, lag=timedelta(minutes=9), silent_for=timedelta(minutes=40))
    _page(store, NOW - timedelta(minutes=10), [_story("s1", "a0001"), _story("s2", "a0001", "a0003")])
    store.put(layout.article_segment_key(NOW, "s2"), store.get(layout.article_segment_key(NOW, "s1")).data)
    checkpoint = json.loads(store.get(layout.story_checkpoint_key("en")).data)
    checkpoint["updated_at"] = (NOW - timedelta(minutes=10)).isoformat()
    store.put(layout.story_checkpoint_key("en"), json.dumps(checkpoint).encode())

    flags = {(f.check, f.subject) for f in check_health(store, NOW)}
    assert flags == {
        ("freshness_lag", "all feeds"),
        ("silent_tier1_feed", "wire"),
        ("stale_snapshot", "pages"),
        ("duplicate_in_top10", "en-US/top"),
        ("writer_stalled", "en"),
    }


def test_articles_without_any_page_are_a_stale_snapshot(tmp_path) -> None:
    store = _store(tmp_path)  # articles seen over the last hour, and no page ever published
    assert ("stale_snapshot", "pages") in {(f.check, f.subject) for f in check_health(store, NOW)}
    # A store whose first articles arrived within the last cycles is not stale yet.
    assert check_health(store, NOW - timedelta(minutes=54)) == []  # first article a minute before
