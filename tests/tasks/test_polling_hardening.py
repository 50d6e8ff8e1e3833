"""Polling edge cases: every HTTP-date form, and odd Retry-After values."""

from __future__ import annotations

from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler

from loopback import serve

from tasks.http import make_client
from tasks.ingest.plan import FeedJob
from tasks.settings import IngestSettings
from transforms.polling import PollResponse, PollState, decide_next_poll
from transforms.records import FeedState

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
    from tasks.ingest.poll import poll_feed_safely

    settings = _settings()
    with serve(_FeedWithOddRetryAfter) as base, make_client(settings) as client:
        job = FeedJob("f", f"{base}/feed", "p", "en", "US", "", FeedState("f"), 2)
        outcome = poll_feed_safely(job, client, settings, NOW)
    items, report = outcome.new_items, outcome.report
    assert report.error_kind is None, report.error
    assert len(items) == 1

