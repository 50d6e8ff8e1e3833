"""``poll.json`` as ingest writes it for a pending source: the bytes serving reads, one shape per status."""

from __future__ import annotations

import pytest

from tasks.ingest.pending import PendingPoll, PendingRequest, PollItem
from warehouse.snapshots import dump_snapshot

ITEM = PollItem(title="A", link="https://example.com/a", published_at="2026-12-01T05:00:00Z")


@pytest.mark.parametrize(("poll", "written"), [
    (PendingPoll("ok", "2026-12-01T06:00:00Z", [ITEM], feed_url="https://example.com/feed", title="Example"),
     {"polled_at": "2026-12-01T06:00:00Z", "feed_url": "https://example.com/feed", "status": "ok",
      "title": "Example", "items": [dict(ITEM)], "error": None}),
    (PendingPoll("failing", "2026-12-01T06:00:00Z", feed_url="https://example.com/feed", error="HTTP 500"),
     {"polled_at": "2026-12-01T06:00:00Z", "feed_url": "https://example.com/feed", "status": "failing",
      "error": "HTTP 500", "items": []}),
    (PendingPoll("accepted", "2026-12-01T06:00:00Z", [ITEM], publisher_id="example"),
     {"status": "accepted", "publisher_id": "example", "polled_at": "2026-12-01T06:00:00Z", "items": [dict(ITEM)]}),
], ids=["ok", "failing", "accepted"])
def test_a_poll_is_written_with_the_fields_of_its_status_only(poll: PendingPoll, written: dict[str, object]) -> None:
    assert dump_snapshot(poll.to_json()) == dump_snapshot(written)


def test_a_poll_read_back_keeps_its_items_for_the_accepted_rewrite() -> None:
    read = PendingPoll.from_json({"status": "ok", "polled_at": "2026-12-01T06:00:00Z", "items": [dict(ITEM)]})
    assert (read.status, read.polled_at, list(read.items)) == ("ok", "2026-12-01T06:00:00Z", [dict(ITEM)])
    assert PendingPoll.from_json({"polled_at": 5}).polled_at is None


def test_a_request_without_a_feed_id_and_url_is_skipped() -> None:
    assert PendingRequest.from_json({"feed_id": "f1", "feed_url": "https://example.com/feed"}) == PendingRequest(
        "f1", "https://example.com/feed")
    assert PendingRequest.from_json({"feed_id": "f1"}) is None
