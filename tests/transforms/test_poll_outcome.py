"""The poll outcome as a pure function: guid bookkeeping, validator rules, errors and warnings (#17)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from transforms.feeds import FeedItem, ParsedFeed
from transforms.poll_outcome import (
    PollExchange,
    conditional_headers,
    forget_items,
    settle_failed_poll,
    settle_poll,
)
from transforms.records import FeedState

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
URL = "https://x.example/feed"


def _item(guid: str, published_at: datetime | None = NOW - timedelta(hours=1)) -> FeedItem:
    return FeedItem(guid, f"https://x.example/{guid}", guid, "", published_at, None, (), None, None, None)


def _feed(*items: FeedItem, malformed: bool = False, hub: str | None = None) -> ParsedFeed:
    return ParsedFeed(title="T", link=None, language=None, items=items, ttl_minutes=None, skip_hours=frozenset(),
                      skip_days=frozenset(), hub_url=hub, self_url=None, is_malformed=malformed,
                      error="not well-formed" if malformed else None)


def _settle(state: FeedState, exchange: PollExchange, max_items: int = 10):
    return settle_poll(state, exchange, NOW, feed_url=URL, max_items=max_items, floor_seconds=60,
                       ceiling_seconds=3600)


def test_new_items_are_those_not_seen_and_only_those_taken_are_marked() -> None:
    state = FeedState("f", recent_guids=("b",), etag='"old"', last_polled_at=NOW - timedelta(minutes=5))
    outcome = _settle(state, PollExchange(200, {"etag": '"new"'}, _feed(_item("a"), _item("b"), _item("c"))),
                      max_items=1)
    assert [i.guid for i in outcome.new_items] == ["a"]
    assert outcome.state.recent_guids == ("a", "b")  # "c" is left for the next poll ...
    assert outcome.state.etag == '"old"'  # ... so no 304 may hide it
    assert outcome.report.new_items == 1 and outcome.report.error_kind is None


def test_a_304_keeps_validators_guids_and_the_hub_last_read() -> None:
    state = FeedState("f", recent_guids=("a",), etag='"v"', hub_url="https://hub.example/",
                      topic_url="https://x.example/self", last_polled_at=NOW - timedelta(minutes=5))
    outcome = _settle(state, PollExchange(304, {"etag": '"v"'}))
    assert (outcome.state.etag, outcome.state.recent_guids, outcome.state.hub_url) == ('"v"', ("a",), "https://hub.example/")
    assert outcome.report.topic_url == "https://x.example/self" and outcome.report.status == 304
    assert outcome.new_items == () and outcome.report.error_kind is None


@pytest.mark.parametrize(
    ("exchange", "error_kind", "warning_kind"),
    [
        (PollExchange(200, {}, _feed(malformed=True)), "parse", None),
        (PollExchange(200, {}, _feed(_item("a"), malformed=True)), None, "malformed"),
        (PollExchange(200, {}, _feed(_item("a", published_at=None))), None, "bad_dates"),
        (PollExchange(429, {"retry-after": "600"}), "http_status", None),
        (PollExchange(None, {}, None, "timeout", "timeout: read"), "timeout", None),
    ],
    ids=["malformed-without-items", "malformed-with-items", "no-dates", "http-429", "no-response"],
)
def test_errors_and_warnings_are_named(exchange: PollExchange, error_kind: str | None, warning_kind: str | None) -> None:
    outcome = _settle(FeedState("f"), exchange)
    assert (outcome.report.error_kind, outcome.report.warning_kind) == (error_kind, warning_kind)
    assert outcome.state.last_error_kind == (error_kind or warning_kind)
    assert outcome.state.error_streak == (1 if error_kind else 0)
    if exchange.status == 429:
        assert outcome.report.error == "HTTP 429 (Retry-After: 600)" and outcome.state.interval_seconds == 600


def test_an_unsendable_stored_validator_is_neither_sent_nor_kept() -> None:
    state = FeedState("f", etag='"caf\u00e9"', last_modified="Tue, 01 Dec 2026 06:00:00 GMT")
    assert conditional_headers(state) == {"If-Modified-Since": "Tue, 01 Dec 2026 06:00:00 GMT"}
    outcome = _settle(state, PollExchange(None, {}, None, "connect", "refused"))
    assert outcome.state.etag is None and outcome.state.last_modified == state.last_modified


def test_a_failure_without_a_response_backs_off_and_forgetting_items_drops_validators() -> None:
    failed = settle_failed_poll(FeedState("f", error_streak=2), "internal", "x" * 900, NOW, feed_url=URL,
                                floor_seconds=60, ceiling_seconds=3600)
    assert failed.state.error_streak == 3 and failed.state.interval_seconds == 480 and len(failed.state.last_error or "") == 500
    again = forget_items(FeedState("f", recent_guids=("a", "b"), etag='"v"', last_modified="x"), {"a"})
    assert (again.recent_guids, again.etag, again.last_modified) == (("b",), None, None)
