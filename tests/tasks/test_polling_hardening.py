"""Polling edge cases: every HTTP-date form, odd Retry-After values, and Breaking boosts that
never override what a publisher asked for."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from loopback import serve

from tasks.http import make_client
from tasks.ingest import FeedJob, empty_state, plan_due_feeds
from tasks.registry import import_publishers
from tasks.settings import IngestSettings
from transforms.polling import PollResponse, PollState, decide_next_poll
from warehouse import layout
from warehouse.schemas import FEED_STATE_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import rows_to_table, write_table

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _settings() -> IngestSettings:
    return IngestSettings(  # type: ignore[call-arg]
        allow_private_addresses=True, connect_timeout_seconds=2, read_timeout_seconds=2, total_timeout_seconds=5,
        embeddings=False,
    )


def test_retry_after_in_asctime_http_date_is_honoured() -> None:
    """RFC 9110 §5.6.7: all three HTTP-date forms are accepted, asctime (no zone written) too."""
    now = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
    for value in ("Mon, 07 Dec 2026 12:00:00 GMT", "Mon Dec  7 12:00:00 2026"):
        decision = decide_next_poll(PollState(), PollResponse(status=503, is_error=True, retry_after=value), now,
                                    floor_seconds=300)
        assert decision.reason == "retry_after", value
        assert decision.next_poll_at == datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


class _FeedWithOddRetryAfter(BaseHTTPRequestHandler):
    BODY = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>T</title>'
            b"<item><guid>a</guid><title>A</title><link>http://127.0.0.1/a</link></item></channel></rss>")

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "application/rss+xml")
        self.send_header("Retry-After", "\u00b2")  # '²' (latin-1 byte 0xB2): str.isdigit() is True, int() fails
        self.send_header("Content-Length", str(len(self.BODY)))
        self.end_headers()
        self.wfile.write(self.BODY)


def test_a_strange_retry_after_on_a_200_does_not_fail_the_poll() -> None:
    """A Retry-After on a 200 is not read, and one that only looks numeric never raises: such a
    header made every poll an 'internal' failure (items never ingested, the feed parked)."""
    from tasks.ingest import _poll_feed_safely

    settings = _settings()
    with serve(_FeedWithOddRetryAfter) as base, make_client(settings) as client:
        job = FeedJob("f", f"{base}/feed", "p", "en", "US", "", empty_state("f"), 2)
        state, items, report = _poll_feed_safely(job, client, settings, NOW)
    assert report.error_kind is None, report.error
    assert len(items) == 1


def _store_with_feed(tmp_path: Path, **state_fields: object) -> LocalStore:
    store = LocalStore(tmp_path / "store")
    csv = tmp_path / "p.csv"
    csv.write_text("publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section\n"
                   "herald,Herald,herald.test,US,en,2,0.5,false,false,https://herald.test/rss,world\n")
    registry = import_publishers(store, csv)
    feed_id = registry.feeds[0]["feed_id"]
    state = dict(empty_state(feed_id), **state_fields)
    write_table(store, layout.FEED_STATE_KEY, rows_to_table([state], FEED_STATE_SCHEMA), FEED_STATE_SCHEMA)
    return store


@pytest.mark.parametrize("reason,status,streak,parked", [
    ("retry_after", 429, 1, False),
    ("gone", 410, 1, True),
])
def test_breaking_boost_does_not_override_retry_after_or_parking(tmp_path: Path, reason: str, status: int,
                                                                  streak: int, parked: bool) -> None:
    """A Breaking boost polls faster, but never sooner than a 429's Retry-After asked, nor a parked feed."""
    store = _store_with_feed(tmp_path, next_poll_at=NOW + timedelta(minutes=58), last_polled_at=NOW - timedelta(minutes=2),
                             poll_reason=reason, last_status=status, error_streak=streak, is_parked=parked,
                             interval_seconds=3600)
    store.put(layout.FEED_BOOSTS_KEY, json.dumps({"herald": "2026-12-01T12:45:00Z"}).encode())
    due = sum(len(shard) for shard in plan_due_feeds(store, NOW, 2))
    assert due == 0
