"""When the long-running ingest wakes for a feed (issue 31): the same due rules as the plan, so a
feed is polled when it falls due and never before."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tasks.ingest.plan import next_due_at, plan_due_feeds
from tasks.registry import import_publishers
from tasks.websub import write_push_marker
from transforms.records import FeedState
from warehouse import layout
from warehouse.schemas import FEED_STATE_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import rows_to_table, write_table

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _store(tmp_path: Path, *states: tuple[timedelta, timedelta]) -> tuple[LocalStore, list[str]]:
    """A feed per (next poll in, last polled ago)."""
    store = LocalStore(tmp_path / "store")
    csv = tmp_path / "p.csv"
    csv.write_text("publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section\n"
                   + "".join(f"p{i},P{i},p{i}.test,US,en,1,0.9,false,false,https://p{i}.test/rss,world\n"
                             for i in range(len(states))))
    by_publisher = {f["publisher_id"]: f["feed_id"] for f in import_publishers(store, csv).registry.feeds}
    rows = [FeedState(by_publisher[f"p{i}"], next_poll_at=NOW + due, last_polled_at=NOW - ago).to_row()
            for i, (due, ago) in enumerate(states)]
    write_table(store, layout.FEED_STATE_KEY, rows_to_table(rows, FEED_STATE_SCHEMA), FEED_STATE_SCHEMA)
    return store, [by_publisher[f"p{i}"] for i in range(len(states))]


def _planned(store: LocalStore, at: datetime) -> int:
    return sum(len(shard) for shard in plan_due_feeds(store, at, 2))


def test_it_wakes_when_the_first_feed_falls_due_and_the_plan_then_takes_it(tmp_path: Path) -> None:
    store, _ = _store(tmp_path, (timedelta(seconds=90), timedelta(seconds=30)),
                      (timedelta(seconds=40), timedelta(seconds=80)))
    due = next_due_at(store, NOW)
    assert due == NOW + timedelta(seconds=40)
    assert _planned(store, due - timedelta(seconds=1)) == 0 and _planned(store, due) == 1


def test_a_push_wakes_it_now_or_when_the_feed_may_be_polled_again(tmp_path: Path) -> None:
    store, feeds = _store(tmp_path, (timedelta(minutes=15), timedelta(seconds=10)),
                          (timedelta(minutes=15), timedelta(minutes=5)))
    assert next_due_at(store, NOW) == NOW + timedelta(minutes=15)
    write_push_marker(store, feeds[0], "websub", NOW)  # polled 10 s ago: at most one poll per 30 s
    assert next_due_at(store, NOW, push_min_interval_seconds=30) == NOW + timedelta(seconds=20)
    write_push_marker(store, feeds[1], "ping", NOW)
    assert next_due_at(store, NOW, push_min_interval_seconds=30) == NOW


def test_a_breaking_boost_wakes_it_a_minute_after_the_last_poll(tmp_path: Path) -> None:
    store, _ = _store(tmp_path, (timedelta(minutes=20), timedelta(seconds=20)))
    store.put(layout.FEED_BOOSTS_KEY, json.dumps({"p0": "2026-12-01T12:45:00Z"}).encode())
    assert next_due_at(store, NOW) == NOW + timedelta(seconds=40)
    assert _planned(store, NOW + timedelta(seconds=40)) == 1


def test_no_feed_no_wake(tmp_path: Path) -> None:
    assert next_due_at(LocalStore(tmp_path / "store"), NOW) is None
