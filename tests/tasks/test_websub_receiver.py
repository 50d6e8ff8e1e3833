"""WebSub intent checks at the receiver, and the topic a not-modified poll reports.

The receiver answers a hub's GET only for a request of ours still pending (WebSub §5.2-5.3); a poll
that learns nothing new (304) keeps the hub and the ``rel=self`` topic last read, so a live lease
is neither dropped nor asked for again under the feed's own URL.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs

import pytest
from loopback import serve

from tasks.http import make_client
from tasks.ingest.plan import FeedJob, load_feed_states
from tasks.ingest.poll import poll_feed
from tasks.settings import IngestSettings, WebSubSettings
from tasks.websub import (
    SubscriptionTarget,
    load_subscription,
    maintain_subscriptions,
    save_subscription,
)
from transforms.records import FeedState
from transforms.websub import Subscription
from warehouse import layout
from warehouse.schemas import FEED_STATE_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import rows_to_table, write_table
from websub.receiver import WebSubReceiver

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TOPIC = "https://pub.example/feed.atom"
HUB = "https://hub.example/"
FEED_ID = "feed0001"


def _ingest() -> IngestSettings:
    return IngestSettings(  # type: ignore[call-arg]
        allow_private_addresses=True, connect_timeout_seconds=2, read_timeout_seconds=2, total_timeout_seconds=5,
        embeddings=False,
    )


def _websub(**overrides: object) -> WebSubSettings:
    return WebSubSettings(enabled=True, callback_base_url="http://127.0.0.1:9/cb",  # type: ignore[arg-type]
                          master_secret="test-master-secret", **overrides)


def _live(topic: str = TOPIC, hub: str = HUB) -> Subscription:
    return Subscription(FEED_ID, topic, hub, "subscribe", "live", NOW - timedelta(days=1), 864000,
                        NOW + timedelta(days=9), NOW - timedelta(days=1))


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


def _receiver(store: LocalStore, **overrides: object) -> WebSubReceiver:
    return WebSubReceiver(store, _websub(**overrides), clock=lambda: NOW)


# --- intent checks ---------------------------------------------------------------------------


def test_a_challenge_for_a_live_subscription_we_did_not_renew_is_refused(store: LocalStore) -> None:
    """§5.3: an unasked GET for a live subscription gets 404 and leaves its lease as granted."""
    save_subscription(store, _live(), None)
    reply = _receiver(store).verify_intent(FEED_ID, {"hub.mode": "subscribe", "hub.topic": TOPIC,
                                                     "hub.challenge": "abc", "hub.lease_seconds": "1"})
    assert reply.status == 404
    assert load_subscription(store, FEED_ID)[0] == _live()


def test_a_renewal_we_sent_is_confirmed_with_the_new_lease(store: LocalStore) -> None:
    renewing = Subscription(FEED_ID, TOPIC, HUB, "subscribe", "pending", NOW - timedelta(minutes=1), 864000,
                            NOW + timedelta(hours=2), NOW - timedelta(days=9))
    save_subscription(store, renewing, None)
    reply = _receiver(store).verify_intent(FEED_ID, {"hub.mode": "subscribe", "hub.topic": TOPIC,
                                                     "hub.challenge": "abc", "hub.lease_seconds": "86400"})
    record, _ = load_subscription(store, FEED_ID)
    assert (reply.status, reply.body) == (200, b"abc")
    assert record is not None and record.status == "live" and record.lease_expires_at == NOW + timedelta(days=1)


def test_a_confirmation_without_a_lease_gets_the_lease_we_asked_for(store: LocalStore) -> None:
    pending = Subscription(FEED_ID, TOPIC, HUB, "subscribe", "pending", NOW - timedelta(seconds=5))
    save_subscription(store, pending, None)
    reply = _receiver(store, lease_seconds=7200).verify_intent(
        FEED_ID, {"hub.mode": "subscribe", "hub.topic": TOPIC, "hub.challenge": "abc"})
    record, _ = load_subscription(store, FEED_ID)
    assert reply.status == 200
    assert record is not None and (record.status, record.lease_seconds, record.lease_expires_at) == (
        "live", 7200, NOW + timedelta(hours=2))


def test_a_denial_of_a_live_subscription_is_refused_and_changes_nothing(store: LocalStore) -> None:
    """§5.2: ``denied`` answers a subscription request; an unauthenticated one for a live lease is refused."""
    save_subscription(store, _live(), None)
    reply = _receiver(store).verify_intent(FEED_ID, {"hub.mode": "denied", "hub.topic": TOPIC,
                                                     "hub.reason": "forged"})
    assert reply.status == 404
    assert load_subscription(store, FEED_ID)[0] == _live()


def test_a_denial_of_our_pending_subscribe_is_recorded(store: LocalStore) -> None:
    pending = Subscription(FEED_ID, TOPIC, HUB, "subscribe", "pending", NOW - timedelta(seconds=5))
    save_subscription(store, pending, None)
    reply = _receiver(store).verify_intent(FEED_ID, {"hub.mode": "denied", "hub.topic": TOPIC,
                                                     "hub.reason": "topic not served"})
    record, _ = load_subscription(store, FEED_ID)
    assert reply.status == 200
    assert record is not None and (record.status, record.last_error) == ("denied", "topic not served")


# --- the topic a 304 reports -----------------------------------------------------------------


class _SiteWithHub(BaseHTTPRequestHandler):
    """/feed: Atom whose rel=self (/canonical.atom) differs from /feed, with rel=hub and an ETag
    (304 when it matches). /hub: records subscription requests, answers 202."""

    hub_requests: ClassVar[list[dict[str, list[str]]]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        base = f"http://{self.headers['Host']}"
        if self.headers.get("If-None-Match") == '"v1"':
            self.send_response(304)
            self.send_header("ETag", '"v1"')
            self.end_headers()
            return
        body = (f'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>'
                f'<link rel="self" href="{base}/canonical.atom"/><link rel="hub" href="{base}/hub"/>'
                f"<updated>2026-12-01T11:00:00Z</updated><id>urn:x</id>"
                f'<entry><id>urn:1</id><title>one</title><link href="{base}/a1"/>'
                f"<updated>2026-12-01T11:00:00Z</updated></entry></feed>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/atom+xml")
        self.send_header("ETag", '"v1"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        _SiteWithHub.hub_requests.append(parse_qs(self.rfile.read(length).decode()))
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def site() -> Iterator[str]:
    _SiteWithHub.hub_requests = []
    with serve(_SiteWithHub) as base:
        yield base


def test_a_304_poll_reports_the_topic_and_hub_last_read(store: LocalStore, site: str) -> None:
    settings = _ingest()
    with make_client(settings) as client:
        job = FeedJob(FEED_ID, f"{site}/feed", "p", "en", "US", "", FeedState(FEED_ID), 2)
        polled = poll_feed(job, client, settings, NOW)
        state, first = polled.state, polled.report
        # The next run reads the state back from the store, as ingest does.
        write_table(store, layout.FEED_STATE_KEY, rows_to_table([state.to_row()], FEED_STATE_SCHEMA), FEED_STATE_SCHEMA)
        state = load_feed_states(store)[0][FEED_ID]
        again = FeedJob(FEED_ID, f"{site}/feed", "p", "en", "US", "", state, 2)
        second = poll_feed(again, client, settings, NOW + timedelta(minutes=15)).report
    assert (first.status, first.topic_url, first.hub_url) == (200, f"{site}/canonical.atom", f"{site}/hub")
    assert (second.status, second.topic_url, second.hub_url) == (304, f"{site}/canonical.atom", f"{site}/hub")


def test_a_304_poll_does_not_resubscribe_a_live_lease_under_another_topic(store: LocalStore, site: str) -> None:
    """A not-modified poll once reported the feed URL as the topic: the live lease looked like a new
    hub or topic, was dropped and asked for again under the wrong topic."""
    settings = _ingest()
    with make_client(settings) as client:
        job = FeedJob(FEED_ID, f"{site}/feed", "p", "en", "US", "", FeedState(FEED_ID), 2)
        polled = poll_feed(job, client, settings, NOW)
        state, first = polled.state, polled.report
        again = FeedJob(FEED_ID, f"{site}/feed", "p", "en", "US", "", state, 2)
        second = poll_feed(again, client, settings, NOW + timedelta(minutes=15)).report
    assert second.status == 304
    live = _live(topic=first.topic_url or "", hub=f"{site}/hub")
    save_subscription(store, live, None)
    target = SubscriptionTarget(FEED_ID, second.topic_url or second.url, second.hub_url)
    counts = maintain_subscriptions(store, [target], settings, _websub(), NOW + timedelta(minutes=15))
    assert counts == {} and _SiteWithHub.hub_requests == []
    assert load_subscription(store, FEED_ID)[0] == live


@pytest.fixture
def served(store: LocalStore) -> Iterator[tuple[WebSubReceiver, str]]:
    """The receiver as it runs in ``newsroom websub``: the ASGI app under uvicorn on loopback."""
    receiver = _receiver(store, max_body_bytes=1000)
    url = receiver.start("127.0.0.1", 0)
    try:
        yield receiver, url
    finally:
        receiver.stop()


def _raw(url: str, request: bytes) -> bytes:
    """Send ``request`` as is on one connection; the answer up to the server's close (or 5 s)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as conn:
        conn.sendall(request)
        answer = b""
        try:
            while chunk := conn.recv(65536):
                answer += chunk
        except TimeoutError:
            pass
    return answer


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b"200"),
        (b"GET /elsewhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b"404"),
        (b"GET /websub/..%2Fetc HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b"404"),
        (b"POST /websub/feed0001 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n",
         b"411"),
        (b"POST /ping/p HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n", b"413"),
        (b"GET /websub/feed0001?hub.mode=subscribe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b"400"),
    ],
    ids=["healthz", "unknown-path", "unsafe-feed-id", "no-content-length", "body-over-cap", "no-challenge"],
)
def test_the_receiver_over_http(served: tuple[WebSubReceiver, str], request_bytes: bytes, status: bytes) -> None:
    """The HTTP edge of the ASGI receiver: routes, the declared-length rule and the body cap. A body
    over the cap is answered before it is sent and the connection is closed, so the unread body is
    never parsed as a next request."""
    answer = _raw(served[1], request_bytes)
    assert answer.split(b" ", 2)[1] == status, answer[:200]
    if status in (b"411", b"413"):
        assert b"connection: close" in answer.lower()


def test_a_challenge_is_echoed_over_http(served: tuple[WebSubReceiver, str], store: LocalStore) -> None:
    receiver, url = served
    pending = Subscription(feed_id=FEED_ID, topic_url=TOPIC, hub_url=HUB, mode="subscribe", status="pending",
                           requested_at=NOW)
    save_subscription(store, pending, None)
    import httpx

    with httpx.Client(base_url=url, trust_env=False, timeout=10) as http:
        answer = http.get(f"/websub/{FEED_ID}", params=[("hub.mode", "subscribe"), ("hub.topic", TOPIC),
                                                        ("hub.challenge", "first"), ("hub.challenge", "second"),
                                                        ("hub.lease_seconds", "3600")])
    assert (answer.status_code, answer.text) == (200, "first")
    assert receiver.stats["intent_subscribe"] == 1
