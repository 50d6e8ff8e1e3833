"""Polling a feed (tasks/ingest/poll.py) over a real loopback server.

Stored validators (ETag, Last-Modified) must always be sendable back.

A non-ASCII ETag used to be stored, then sent as ``If-None-Match``; httpx refused to encode it, the
poll was recorded as "internal" and the old state (with the same ETag) was kept, so the feed failed
the same way on every poll, even after the server was fixed.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import ClassVar

import pytest
from loopback import serve

from tasks.http import make_client
from tasks.ingest.plan import FeedJob
from tasks.ingest.poll import poll_feed, poll_shard
from tasks.settings import IngestSettings
from transforms.poll_outcome import VALIDATOR_MAX_CHARS, FeedReport, clean_validator
from transforms.records import FeedState

pytestmark = pytest.mark.integration

NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
GOOD_ETAG = '"v1"'
GOOD_LAST_MODIFIED = "Tue, 01 Dec 2026 06:00:00 GMT"


def _wire(text: str) -> str:
    """``text`` as UTF-8 on the wire: ``send_header`` writes latin-1, so this sends the UTF-8 bytes."""
    return text.encode("utf-8").decode("latin-1")


class _Feed(BaseHTTPRequestHandler):
    """One feed; ``validators`` says which ETag/Last-Modified it sends; 304 when the ETag matches."""

    validators: ClassVar[dict[str, str]] = {}
    requests: ClassVar[list[dict[str, str]]] = []
    BODY = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>T</title>'
            b"<item><guid>a</guid><title>A</title><link>http://127.0.0.1/a</link></item></channel></rss>")

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        _Feed.requests.append({k.lower(): v for k, v in self.headers.items()})
        etag = _Feed.validators.get("ETag")
        if etag is not None and self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        self.send_response(200)
        for name, value in _Feed.validators.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/rss+xml")
        self.send_header("Content-Length", str(len(self.BODY)))
        self.end_headers()
        self.wfile.write(self.BODY)


@pytest.fixture
def feed_url() -> Iterator[str]:
    _Feed.validators, _Feed.requests = {}, []
    with serve(_Feed) as base:
        yield f"{base}/feed"


def _settings() -> IngestSettings:
    return IngestSettings(  # type: ignore[call-arg]
        allow_private_addresses=True, connect_timeout_seconds=2, read_timeout_seconds=2, total_timeout_seconds=3,
        embeddings=False,
    )


def _poll(url: str, state: FeedState, now: datetime) -> tuple[FeedState, FeedReport]:
    settings = _settings()
    with make_client(settings) as client:
        outcome = poll_feed(FeedJob("f", url, "p", "en", "US", "", state, 1), client, settings, now)
    return outcome.state, outcome.report


@pytest.mark.parametrize(
    "validators",
    [
        {"ETag": _wire('"caf\u00e9"')},
        {"ETag": '"caf\u00e9"'},  # latin-1 on the wire
        {"Last-Modified": _wire("Tue, 01 D\u00e9c 2026 06:00:00 GMT")},
        {"ETag": '"' + "x" * VALIDATOR_MAX_CHARS + '"'},
    ],
    ids=["etag-utf8", "etag-latin1", "last-modified-utf8", "etag-too-long"],
)
def test_unusable_validator_is_not_stored_and_the_feed_recovers(feed_url: str, validators: dict[str, str]) -> None:
    _Feed.validators = validators
    state, report = _poll(feed_url, FeedState("f"), NOW)
    assert report.status == 200 and report.error_kind is None
    assert state.etag is None and state.last_modified is None

    state, report = _poll(feed_url, state, NOW + timedelta(minutes=10))
    assert report.error_kind is None, report.error
    assert "if-none-match" not in _Feed.requests[-1] and "if-modified-since" not in _Feed.requests[-1]

    # The server is fixed: its validators are stored, sent back, and answered with 304.
    _Feed.validators = {"ETag": GOOD_ETAG, "Last-Modified": GOOD_LAST_MODIFIED}
    state, report = _poll(feed_url, state, NOW + timedelta(minutes=20))
    assert (state.etag, state.last_modified) == (GOOD_ETAG, GOOD_LAST_MODIFIED)
    state, report = _poll(feed_url, state, NOW + timedelta(minutes=30))
    assert _Feed.requests[-1]["if-none-match"] == GOOD_ETAG
    assert report.status == 304 and report.error_kind is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("etag", '"caf\u00e9"'),
        ("etag", '"a\r\nX-Injected: 1"'),
        ("last_modified", "Tue, 01 D\u00e9c 2026 06:00:00 GMT"),
        ("last_modified", "x" * (VALIDATOR_MAX_CHARS + 1)),
    ],
    ids=["etag-non-ascii", "etag-crlf", "last-modified-non-ascii", "last-modified-too-long"],
)
def test_a_stored_bad_validator_is_dropped_on_the_next_poll(feed_url: str, field: str, value: str) -> None:
    # A state written before validators were checked: polling it must neither crash nor keep it.
    _Feed.validators = {"ETag": GOOD_ETAG}
    state = replace(FeedState("f"), **{field: value}, last_polled_at=NOW - timedelta(hours=1))
    state, report = _poll(feed_url, state, NOW)
    assert report.status == 200 and report.error_kind is None, report.error
    assert "if-none-match" not in _Feed.requests[-1] and "if-modified-since" not in _Feed.requests[-1]
    assert getattr(state, field) != value
    assert state.etag == GOOD_ETAG


def test_a_stored_bad_validator_is_dropped_even_when_the_poll_fails() -> None:
    # Nothing listens on this port: the poll fails, but the unsendable validator must not survive it.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/feed"
    settings = _settings()
    state = FeedState("f", etag='"caf\u00e9"', last_modified=GOOD_LAST_MODIFIED)
    with make_client(settings) as client:
        outcome = poll_feed(FeedJob("f", url, "p", "en", "US", "", state, 1), client, settings, NOW)
    state, report = outcome.state, outcome.report
    assert report.error_kind == "connect"
    assert state.etag is None and state.last_modified == GOOD_LAST_MODIFIED


def test_a_new_unusable_etag_replaces_the_old_one(feed_url: str) -> None:
    # The old ETag names an older representation; keeping it would only cost a full 200 later, but
    # the state should say what the server said: no usable validator now.
    _Feed.validators = {"ETag": _wire('"caf\u00e9"')}
    state = FeedState("f", etag='"old"')
    state, report = _poll(feed_url, state, NOW)
    assert report.status == 200 and state.etag is None


def test_shard_with_a_wedged_state_is_not_an_internal_error(feed_url: str) -> None:
    _Feed.validators = {"ETag": GOOD_ETAG}
    state = FeedState("f", etag='"caf\u00e9"')
    result = poll_shard([FeedJob("f", feed_url, "p", "en", "US", "", state, 1)], _settings(), NOW)
    (report,) = result.reports
    assert report.error_kind != "internal", report.error
    assert result.states[0].etag == GOOD_ETAG


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"v1"', '"v1"'),
        ('W/"abc def"', 'W/"abc def"'),
        (GOOD_LAST_MODIFIED, GOOD_LAST_MODIFIED),
        ("x" * VALIDATOR_MAX_CHARS, "x" * VALIDATOR_MAX_CHARS),
        ("x" * (VALIDATOR_MAX_CHARS + 1), None),
        ('"caf\u00e9"', None),
        ('"a\tb"', None),
        ('"a\x00b"', None),
        ('"a\x7fb"', None),
        ("", None),
        ("   ", None),
        (None, None),
        (42, None),
    ],
    ids=["strong", "weak-with-space", "http-date", "at-limit", "over-limit", "non-ascii", "tab", "nul", "del",
         "empty", "blank", "none", "not-a-string"],
)
def test_clean_validator(value: object, expected: str | None) -> None:
    assert clean_validator(value) == expected


# --------------------------------------------------------------------------------------------------
# A Retry-After that only looks numeric on a 200.
# --------------------------------------------------------------------------------------------------

ODD_RETRY_NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _odd_retry_settings() -> IngestSettings:
    return IngestSettings(  # type: ignore[call-arg]
        allow_private_addresses=True, connect_timeout_seconds=2, read_timeout_seconds=2, total_timeout_seconds=5,
        embeddings=False,
    )


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

    settings = _odd_retry_settings()
    with serve(_FeedWithOddRetryAfter) as base, make_client(settings) as client:
        job = FeedJob("f", f"{base}/feed", "p", "en", "US", "", FeedState("f"), 2)
        outcome = poll_feed_safely(job, client, settings, ODD_RETRY_NOW)
    items, report = outcome.new_items, outcome.report
    assert report.error_kind is None, report.error
    assert len(items) == 1
