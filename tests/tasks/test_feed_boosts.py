"""A Breaking story's publishers are polled faster: their feeds are due once a minute until the boost ends."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tasks.ingest.plan import plan_due_feeds
from tasks.registry import import_publishers
from transforms.records import FeedState
from warehouse import layout
from warehouse.schemas import FEED_STATE_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import rows_to_table, write_table

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _store(tmp_path: Path, last_polled: timedelta, **state_fields: object) -> LocalStore:
    store = LocalStore(tmp_path / "store")
    csv = tmp_path / "p.csv"
    csv.write_text("publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section\n"
                   "herald,Herald,herald.test,US,en,2,0.5,false,false,https://herald.test/rss,world\n")
    registry = import_publishers(store, csv).registry
    feed_id = registry.feeds[0]["feed_id"]
    fields: dict[str, object] = {"next_poll_at": NOW + timedelta(minutes=20), "last_polled_at": NOW - last_polled}
    state = FeedState(feed_id, **{**fields, **state_fields})  # type: ignore[arg-type]
    write_table(store, layout.FEED_STATE_KEY, rows_to_table([state.to_row()], FEED_STATE_SCHEMA), FEED_STATE_SCHEMA)
    return store


def _due(store: LocalStore) -> int:
    return sum(len(shard) for shard in plan_due_feeds(store, NOW, 2))


def test_boosted_publishers_are_polled_every_minute(tmp_path: Path) -> None:
    store = _store(tmp_path, last_polled=timedelta(minutes=2))
    assert _due(store) == 0  # not due by its own interval
    store.put(layout.FEED_BOOSTS_KEY, json.dumps({"herald": "2026-12-01T12:45:00Z"}).encode())
    assert _due(store) == 1
    store.put(layout.FEED_BOOSTS_KEY, json.dumps({"herald": "2026-12-01T11:59:00Z"}).encode())  # expired
    assert _due(store) == 0


def test_a_boost_still_waits_a_minute_between_polls(tmp_path: Path) -> None:
    store = _store(tmp_path, last_polled=timedelta(seconds=20))
    store.put(layout.FEED_BOOSTS_KEY, json.dumps({"herald": "2026-12-01T12:45:00Z"}).encode())
    assert _due(store) == 0


@pytest.mark.parametrize(("reason", "status", "streak", "parked"), [("retry_after", 429, 1, False),
                                                                    ("gone", 410, 1, True)])
def test_a_boost_never_overrides_retry_after_or_parking(tmp_path: Path, reason: str, status: int, streak: int,
                                                        parked: bool) -> None:
    """A Breaking boost polls faster, but never sooner than a 429's Retry-After asked, nor a parked feed."""
    store = _store(tmp_path, last_polled=timedelta(minutes=2), next_poll_at=NOW + timedelta(minutes=58),
                   poll_reason=reason, last_status=status, error_streak=streak, is_parked=parked,
                   interval_seconds=3600)
    store.put(layout.FEED_BOOSTS_KEY, json.dumps({"herald": "2026-12-01T12:45:00Z"}).encode())
    assert sum(len(shard) for shard in plan_due_feeds(store, NOW, 2)) == 0
