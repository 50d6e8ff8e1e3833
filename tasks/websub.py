"""WebSub subscriber (issue 3): subscription requests, the callback receiver, publisher pings.

Two halves share the store and nothing else:

* the ingest side (``maintain_subscriptions``, called from ``commit_ingest``) writes a pending
  record at ``state/websub/{feed_id}.json`` and then asks the hub, with a per-feed secret
  ``HMAC(master, feed_id)``;
* the receiver (``WebSubReceiver``, run by ``newsroom websub``) answers the hub's intent checks
  only for a request of ours still pending, verifies every delivery's ``X-Hub-Signature``, and turns an authentic
  delivery, or an authenticated publisher ping, into push markers under ``state/push/``. It never
  keeps pushed content: the ingest takes pushed feeds first and fetches the feed and pages itself.
  It is an ASGI app served by uvicorn, like the API: CPython's documentation does not
  recommend ``http.server`` for production (issue 17).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import httpx
import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool

from tasks import events
from tasks.errors import FetchError
from tasks.http import FetchResult, make_client, post_form
from tasks.registry import load_registry
from tasks.settings import IngestSettings, WebSubSettings
from transforms.websub import (
    Subscription,
    SubscriptionMode,
    confirm_subscription,
    decide_subscription,
    derive_secret,
    parse_lease_seconds,
    ping_context,
    should_accept_denial,
    should_answer_challenge,
    should_unsubscribe,
    subscription_from_dict,
    subscription_to_dict,
    verify_signature,
)
from warehouse import layout
from warehouse.errors import ObjectNotFoundError, PreconditionFailedError
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
_CAS_ATTEMPTS = 5
_PUBLISHER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_LINK = re.compile(r"<([^>]*)>\s*;\s*rel\s*=\s*\"?([^\";,]+)\"?")
HUB_ANSWER_MAX_BYTES = 1024
"""Raw bytes read of a hub's answer: it only goes into an error message."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


# --- records ---------------------------------------------------------------------------------


def load_subscription(store: ObjectStore, feed_id: str) -> tuple[Subscription | None, str | None]:
    """A feed's subscription record and its ETag; (None, None) when there is none or it is unreadable."""
    try:
        obj = store.get(layout.subscription_key(feed_id))
    except ObjectNotFoundError:
        return None, None
    try:
        return subscription_from_dict(json.loads(obj.data)), obj.etag
    except (ValueError, TypeError) as e:
        log.warning("websub_record_unreadable feed_id=%s error=%s", feed_id, e)
        return None, obj.etag


def save_subscription(store: ObjectStore, subscription: Subscription, etag: str | None) -> str:
    """Replace the record only if it is still the one read (If-Match), or create it (If-None-Match).

    Raises:
        PreconditionFailedError: someone else wrote it since.
    """
    data = json.dumps(subscription_to_dict(subscription), sort_keys=True).encode("utf-8")
    return store.put(layout.subscription_key(subscription.feed_id), data, if_match=etag,
                     if_none_match=etag is None, content_type="application/json")


def update_subscription(store: ObjectStore, feed_id: str,
                        change: Callable[[Subscription | None], Subscription | None]) -> Subscription | None:
    """Read-modify-write a record with a conditional put, retrying a lost race a few times.

    ``change`` returns the new record, or None to leave it as it is.

    Raises:
        PreconditionFailedError: the race was lost every time.
    """
    for attempt in range(_CAS_ATTEMPTS):
        current, etag = load_subscription(store, feed_id)
        updated = change(current)
        if updated is None:
            return current
        try:
            save_subscription(store, updated, etag)
            return updated
        except PreconditionFailedError:
            if attempt == _CAS_ATTEMPTS - 1:
                raise
            time.sleep(0.01 * (attempt + 1))
    return None  # pragma: no cover - the loop returns or raises


def write_push_marker(store: ObjectStore, feed_id: str, source: str, received_at: datetime,
                      detail: Mapping[str, object] | None = None) -> str:
    """Ask the ingest to poll ``feed_id`` now; returns the marker's key. Never holds pushed content."""
    marker_id = f"{received_at:%Y%m%dT%H%M%S%f}-{secrets.token_hex(4)}"
    key = layout.push_marker_key(feed_id, marker_id)
    payload = {"feed_id": feed_id, "source": source, "received_at": received_at.isoformat(), **(detail or {})}
    store.put(key, json.dumps(payload, sort_keys=True).encode("utf-8"), if_none_match=True,
              content_type="application/json")
    return key


def announce_push(feed_id: str, source: str, marker: str) -> None:
    """Tell Prefect a push was recorded, so the long-running ingest polls the feed now (issue 31);
    without the event the marker still puts the feed first in the next ingest pass."""
    events.emit(events.FEED_PUSHED, events.resource_id("feed", feed_id),
                {"feed_id": feed_id, "source": source, "marker": marker})


def list_push_markers(store: ObjectStore) -> dict[str, list[str]]:
    """Push marker keys by feed id (one LIST over ``state/push/``)."""
    markers: dict[str, list[str]] = {}
    for key in store.list(layout.PUSH_PREFIX):
        try:
            markers.setdefault(layout.feed_id_of_push_marker(key), []).append(key)
        except ValueError:
            continue
    return markers


def delete_push_markers(store: ObjectStore, keys: Iterable[str]) -> int:
    """Delete exactly the markers a run acted on; pushes that landed since stay for the next run."""
    count = 0
    for key in keys:
        store.delete(key)
        count += 1
    return count


# --- the subscriber's requests ---------------------------------------------------------------


def _answer_text(answer: FetchResult) -> str:
    """The start of a hub's answer for the record; an encoded body is not decoded."""
    encoding = answer.headers.get("content-encoding", "identity").strip().lower()
    if encoding != "identity":
        return f"({encoding}-encoded answer not read)"
    return answer.body.decode("utf-8", "replace")[:200]


def callback_url(websub: WebSubSettings, feed_id: str) -> str:
    """Where the hub calls us back for one feed."""
    layout.subscription_key(feed_id)  # checks the id is safe in a path
    return f"{(websub.callback_base_url or '').rstrip('/')}/websub/{feed_id}"


def request_subscription(
    store: ObjectStore,
    client: httpx.Client,
    websub: WebSubSettings,
    *,
    feed_id: str,
    topic_url: str,
    hub_url: str,
    mode: SubscriptionMode,
    now: datetime,
) -> Subscription:
    """Record a pending request, then send it to the hub (WebSub §5.1); returns the record as left.

    The record is written first: the hub may verify before it even answers, and the receiver
    echoes a challenge only for a request it finds. A live lease is kept while a renewal is
    pending. The hub URL came from a feed, so it goes through the same address-checked client as
    any fetch, under ``hub_timeout_seconds`` as a wall-clock cap, and at most
    ``HUB_ANSWER_MAX_BYTES`` of its answer are read (never decompressed).

    Raises:
        TypeError: ``client`` is not from ``tasks.http.make_client``.
    """
    previous, etag = load_subscription(store, feed_id)
    keep_lease = previous is not None and previous.hub_url == hub_url and previous.topic_url == topic_url
    pending = Subscription(
        feed_id=feed_id, topic_url=topic_url, hub_url=hub_url, mode=mode, status="pending", requested_at=now,
        lease_seconds=previous.lease_seconds if keep_lease and previous else None,
        lease_expires_at=previous.lease_expires_at if keep_lease and previous and mode == "subscribe" else None,
        verified_at=previous.verified_at if keep_lease and previous else None,
        rejected_count=previous.rejected_count if previous else 0,
        last_rejected_reason=previous.last_rejected_reason if previous else None,
        last_rejected_at=previous.last_rejected_at if previous else None,
    )
    written = save_subscription(store, pending, etag)
    form = {"hub.mode": mode, "hub.topic": topic_url, "hub.callback": callback_url(websub, feed_id)}
    if mode == "subscribe":
        form["hub.secret"] = derive_secret(websub.master_key(), feed_id)
        form["hub.lease_seconds"] = str(websub.lease_seconds)
    error: str | None = None
    try:
        answer = post_form(client, hub_url, form, timeout_seconds=websub.hub_timeout_seconds,
                           max_bytes=HUB_ANSWER_MAX_BYTES)
        if not 200 <= answer.status < 300:
            error = f"hub answered HTTP {answer.status}: {_answer_text(answer)}"
    except FetchError as e:
        error = f"{e.kind}: {e}"
    log.info("websub_request feed_id=%s mode=%s hub=%s ok=%s", feed_id, mode, hub_url, error is None)
    if error is None:
        return pending
    failed = replace(pending, status="failed", last_error=error[:500])
    try:
        save_subscription(store, failed, written)
    except PreconditionFailedError:
        return load_subscription(store, feed_id)[0] or pending  # the receiver moved it on meanwhile
    return failed


@dataclass(frozen=True, slots=True)
class SubscriptionTarget:
    """One polled feed that advertises a hub."""

    feed_id: str
    topic_url: str
    hub_url: str | None


def maintain_subscriptions(
    store: ObjectStore,
    targets: Iterable[SubscriptionTarget],
    ingest: IngestSettings,
    websub: WebSubSettings,
    now: datetime,
) -> dict[str, int]:
    """Subscribe or renew where ``decide_subscription`` says so; returns counts by action and errors."""
    counts: Counter[str] = Counter()
    work: list[tuple[SubscriptionTarget, str]] = []
    for target in targets:
        current, _ = load_subscription(store, target.feed_id)
        decision = decide_subscription(
            current, hub_url=target.hub_url, topic_url=target.topic_url, now=now,
            renew_fraction=websub.renew_fraction, renew_min_seconds=websub.renew_min_seconds,
            pending_timeout_seconds=websub.pending_timeout_seconds, retry_seconds=websub.retry_seconds)
        if decision.action in ("subscribe", "renew") and target.hub_url:
            work.append((target, decision.action))
    if not work:
        return {}
    with make_client(ingest) as client:
        for target, action in work:
            assert target.hub_url is not None
            try:
                record = request_subscription(store, client, websub, feed_id=target.feed_id,
                                              topic_url=target.topic_url, hub_url=target.hub_url,
                                              mode="subscribe", now=now)
            except PreconditionFailedError:
                counts["conflict"] += 1  # the receiver wrote the record meanwhile: next poll decides again
                continue
            counts[action] += 1
            if record.status == "failed":
                counts["failed"] += 1
    return dict(sorted(counts.items()))


def retire_subscriptions(
    store: ObjectStore,
    read_feed_ids: set[str],
    ingest: IngestSettings,
    websub: WebSubSettings,
    now: datetime,
) -> dict[str, int]:
    """Unsubscribe the feeds we no longer read: their publisher opted out or they left the registry.

    Each subscription record not in ``read_feed_ids`` that ``should_unsubscribe`` names gets an
    unsubscribe request (the hub verifies it with us like a subscribe, WebSub §5.3), and push
    markers left for those feeds are deleted, since no poll will ever consume them.

    Returns:
        Counts: ``unsubscribe`` requests sent, ``failed`` ones, ``conflict`` (the receiver wrote
        the record meanwhile; the next run decides again), ``markers_dropped``.
    """
    counts: Counter[str] = Counter()
    unwanted = sorted(subscribed_feed_ids(store) - read_feed_ids)
    work: list[Subscription] = []
    for feed_id in unwanted:
        record, _ = load_subscription(store, feed_id)
        if record is not None and should_unsubscribe(record, now=now,
                                                     pending_timeout_seconds=websub.pending_timeout_seconds):
            work.append(record)
    if work:
        with make_client(ingest) as client:
            for record in work:
                try:
                    sent = request_subscription(store, client, websub, feed_id=record.feed_id,
                                                topic_url=record.topic_url, hub_url=record.hub_url,
                                                mode="unsubscribe", now=now)
                except PreconditionFailedError:
                    counts["conflict"] += 1
                    continue
                counts["unsubscribe"] += 1
                if sent.status == "failed":
                    counts["failed"] += 1
    if unwanted:
        markers = list_push_markers(store)
        stale = [key for feed_id in unwanted for key in markers.get(feed_id, ())]
        if stale:
            counts["markers_dropped"] += delete_push_markers(store, stale)
    return dict(sorted(counts.items()))


def subscribed_feed_ids(store: ObjectStore) -> set[str]:
    """Feeds that have a subscription record (one LIST over ``state/websub/``)."""
    return {key[len(layout.WEBSUB_PREFIX):].removesuffix(".json") for key in store.list(layout.WEBSUB_PREFIX)
            if key.endswith(".json")}


def lease_of(store: ObjectStore, feed_id: str, hub_url: str | None) -> datetime | None:
    """The lease expiry recorded for a feed's subscription to ``hub_url`` (None without one)."""
    record, _ = load_subscription(store, feed_id)
    if record is None or record.mode != "subscribe" or record.hub_url != hub_url:
        return None
    return record.lease_expires_at


# --- the receiver ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


def _self_links(link_header: str | None) -> list[str]:
    return [url for url, rel in _LINK.findall(link_header or "") if "self" in rel.lower().split()]


class WebSubReceiver:
    """The callback endpoint: intent checks, signed deliveries and publisher pings, an ASGI app
    served by uvicorn like the API (:meth:`app`, :meth:`start`).

    ``clock`` gives "now" for leases and rate limits (tests pass the replay site's simulated clock).
    Counters of what was accepted and rejected are kept in ``stats`` and logged; a rejected
    delivery's reason is also recorded on the feed's subscription record.
    """

    def __init__(self, store: ObjectStore, settings: WebSubSettings, *, clock: Clock = _utcnow) -> None:
        self._store = store
        self._settings = settings
        self._master = settings.master_key()
        self._clock = clock
        self._lock = threading.Lock()
        self._last_ping: dict[str, datetime] = {}
        self.stats: Counter[str] = Counter()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve :meth:`app` with uvicorn in a background thread; returns the base URL once listening."""
        config = uvicorn.Config(self.app(), host=host, port=port, log_level="warning", lifespan="off",
                                access_log=False, timeout_keep_alive=15, server_header=False)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="websub-receiver", daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the WebSub receiver did not start on {host}:{port}")
            time.sleep(0.01)
        self._server, self._thread = server, thread
        return self.url

    @property
    def url(self) -> str:
        if self._server is None or not self._server.servers:
            raise RuntimeError("receiver not started")
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def app(self) -> FastAPI:
        """The receiver as an ASGI app: ``GET``/``POST /websub/{feed_id}``, ``POST /ping/{publisher_id}``,
        ``GET /healthz``. Store work runs in the thread pool, off the event loop."""
        app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None,
                      exception_handlers={404: _not_found, 405: _not_found})
        app.add_route("/healthz", self._healthz, methods=["GET"])
        app.add_route("/websub/{feed_id}", self._websub_get, methods=["GET"])
        app.add_route("/websub/{feed_id}", self._websub_post, methods=["POST"])
        app.add_route("/ping/{publisher_id}", self._ping_post, methods=["POST"])
        return app

    async def _healthz(self, request: Request) -> Response:
        return _response(Reply(200, b"ok\n"))

    async def _websub_get(self, request: Request) -> Response:
        feed_id = _feed_id(request.path_params["feed_id"])
        if feed_id is None:
            return _response(_NOT_FOUND)
        query: dict[str, str] = {}
        for name, value in request.query_params.multi_items():
            query.setdefault(name, value)  # the first value of each name
        return _response(await run_in_threadpool(self.verify_intent, feed_id, query))

    async def _websub_post(self, request: Request) -> Response:
        refusal, body = await self._read_body(request)
        if refusal is not None:
            return refusal
        feed_id = _feed_id(request.path_params["feed_id"])
        if feed_id is None:
            return _response(_NOT_FOUND)
        headers = {k.lower(): v for k, v in request.headers.items()}
        return _response(await run_in_threadpool(self.receive_delivery, feed_id, headers, body))

    async def _ping_post(self, request: Request) -> Response:
        refusal, _ = await self._read_body(request)
        if refusal is not None:
            return refusal
        headers = {k.lower(): v for k, v in request.headers.items()}
        return _response(await run_in_threadpool(self.receive_ping, request.path_params["publisher_id"], headers))

    async def _read_body(self, request: Request) -> tuple[Response | None, bytes]:
        """The body, or the 411/413 answer: a declared length is required and capped, and an
        oversized body is never read (the connection is closed after the answer)."""
        cap = self._settings.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is None or not declared.strip().isdigit():
            return _response(Reply(411, b"Content-Length required\n"), close=True), b""
        if int(declared) > cap:
            self._count("body_too_large")
            return _response(Reply(413, f"body over {cap} bytes\n".encode()), close=True), b""
        return None, await request.body()

    def _count(self, name: str) -> None:
        with self._lock:
            self.stats[name] += 1

    # --- handlers -----------------------------------------------------------------------

    def verify_intent(self, feed_id: str, query: Mapping[str, str]) -> Reply:
        """GET from a hub (WebSub §5.2-5.3): answer only for a request of ours still pending, else 404.

        A challenge is echoed, and the lease set, only for a pending subscribe (a renewal included)
        or unsubscribe on the same topic; a ``denied`` is taken only for a pending subscribe. Anything
        else leaves the record as it is. A confirmation without ``hub.lease_seconds`` gets the lease
        we asked for (``lease_seconds``), so it still ends and is renewed.
        """
        mode, topic, challenge = query.get("hub.mode"), query.get("hub.topic"), query.get("hub.challenge")
        if mode == "denied":
            return self._take_denial(feed_id, topic, query.get("hub.reason", "")[:200])
        if not challenge:
            self._count("intent_malformed")
            return Reply(400, b"hub.challenge missing\n")
        lease = parse_lease_seconds(query.get("hub.lease_seconds"))
        now = self._clock()
        answered = False

        def confirm(current: Subscription | None) -> Subscription | None:
            nonlocal answered
            answered = should_answer_challenge(current, mode, topic)
            if not answered or current is None or mode is None:
                return None
            return confirm_subscription(current, mode, lease if mode == "subscribe" else None, now,
                                        requested_lease_seconds=self._settings.lease_seconds)

        update_subscription(self._store, feed_id, confirm)
        if not answered:
            self._count("intent_refused")
            log.info("websub_intent_refused feed_id=%s mode=%s", feed_id, mode)
            return Reply(404, b"no such subscription\n")
        self._count(f"intent_{mode}")
        if mode == "subscribe" and lease is None:
            self._count("intent_without_lease")
        log.info("websub_intent_confirmed feed_id=%s mode=%s lease_seconds=%s", feed_id, mode, lease)
        return Reply(200, challenge.encode("utf-8"))

    def _take_denial(self, feed_id: str, topic: str | None, reason: str) -> Reply:
        """§5.2: the hub refused a subscribe of ours; remember why. Unasked, it is refused (404)."""
        taken = False

        def deny(current: Subscription | None) -> Subscription | None:
            nonlocal taken
            taken = should_accept_denial(current, topic)
            return replace(current, status="denied", last_error=reason) if taken and current is not None else None

        update_subscription(self._store, feed_id, deny)
        if not taken:
            self._count("denied_refused")
            log.info("websub_denial_refused feed_id=%s", feed_id)
            return Reply(404, b"no such subscription\n")
        self._count("denied")
        log.info("websub_denied feed_id=%s reason=%s", feed_id, reason)
        return Reply(200)

    def receive_delivery(self, feed_id: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """POST from a hub (WebSub §7-8): an authentic delivery becomes a push marker, nothing more."""
        record, _ = load_subscription(self._store, feed_id)
        if record is None or record.mode != "subscribe" or record.status == "unsubscribed":
            self._count("delivery_unknown")
            return Reply(410, b"not subscribed\n")  # tells the hub to drop the subscription
        secret = derive_secret(self._master, feed_id)
        verdict = verify_signature(secret, body, headers.get("x-hub-signature"))
        reason: str | None = None if verdict.is_valid else verdict.reason
        self_links = _self_links(headers.get("link"))
        if reason is None and self_links and record.topic_url not in self_links:
            reason = "topic_mismatch"
        now = self._clock()
        if reason is not None:
            self._reject(feed_id, reason, now)
            # §8: a subscriber MAY acknowledge an invalid delivery with 2xx, so a forger learns
            # nothing from the answer; the delivery is ignored and the reason recorded.
            return Reply(202, b"accepted\n")
        marker = write_push_marker(self._store, feed_id, "websub", now,
                                   {"algorithm": verdict.algorithm, "body_bytes": len(body)})
        announce_push(feed_id, "websub", marker)
        self._count("delivery_accepted")
        log.info("websub_delivery_accepted feed_id=%s algorithm=%s bytes=%d", feed_id, verdict.algorithm, len(body))
        return Reply(202, b"accepted\n")

    def _reject(self, feed_id: str, reason: str, now: datetime) -> None:
        self._count(f"delivery_rejected_{reason}")
        log.warning("websub_delivery_rejected feed_id=%s reason=%s", feed_id, reason)

        def record(current: Subscription | None) -> Subscription | None:
            if current is None:
                return None
            return replace(current, rejected_count=current.rejected_count + 1, last_rejected_reason=reason,
                           last_rejected_at=now)

        try:
            update_subscription(self._store, feed_id, record)
        except PreconditionFailedError:
            log.warning("websub_rejection_not_recorded feed_id=%s reason=%s", feed_id, reason)

    def receive_ping(self, publisher_id: str, headers: Mapping[str, str]) -> Reply:
        """POST /ping/{publisher_id} with ``Authorization: Bearer <token>``: poll that publisher's feeds.

        The token is HMAC(master, "ping:" + publisher_id), handed to the publisher out of band
        (``newsroom websub --print-ping-token ID``). At most one accepted ping per publisher per
        ``ping_min_interval_seconds``; the ingest also never polls a pushed feed more often.
        """
        if not _PUBLISHER_ID.match(publisher_id):
            return Reply(404, b"unknown publisher\n")
        auth = headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        expected = derive_secret(self._master, ping_context(publisher_id))
        if scheme.lower() != "bearer" or not hmac.compare_digest(expected.encode(), token.strip().encode()):
            self._count("ping_unauthorized")
            log.warning("websub_ping_unauthorized publisher_id=%s", publisher_id)
            return Reply(401, b"bad or missing token\n", headers=(("WWW-Authenticate", "Bearer"),))
        now = self._clock()
        interval = self._settings.ping_min_interval_seconds
        with self._lock:
            last = self._last_ping.get(publisher_id)
            wait = interval - (now - last).total_seconds() if last is not None else 0.0
            if wait > 0:
                self.stats["ping_rate_limited"] += 1
                return Reply(429, b"one ping per publisher per interval\n",
                             headers=(("Retry-After", str(max(1, int(wait + 0.999)))),))
            self._last_ping[publisher_id] = now
        registry = load_registry(self._store)
        feeds = [f["feed_id"] for f in registry.read_feeds() if f["publisher_id"] == publisher_id]
        if not feeds:  # unknown, opted out, or without feeds
            self._count("ping_unknown")
            return Reply(404, b"unknown publisher\n")
        for feed_id in sorted(feeds):
            marker = write_push_marker(self._store, feed_id, "ping", now, {"publisher_id": publisher_id})
            announce_push(feed_id, "ping", marker)
        self._count("ping_accepted")
        log.info("websub_ping_accepted publisher_id=%s feeds=%d", publisher_id, len(feeds))
        return Reply(202, json.dumps({"feeds": len(feeds)}).encode(), "application/json")


_NOT_FOUND = Reply(404, b"not found\n")


def _feed_id(value: str) -> str | None:
    """``value`` if it is a feed id safe in a store key, else None (answered 404)."""
    try:
        layout.subscription_key(value)
    except ValueError:
        return None
    return value


def _response(reply: Reply, *, close: bool = False) -> Response:
    headers = dict(reply.headers)
    if close:
        headers["Connection"] = "close"  # an unread body must not be parsed as the next request
    return Response(reply.body, status_code=reply.status, headers=headers, media_type=reply.content_type)


async def _not_found(request: Request, exc: Exception) -> Response:
    return _response(_NOT_FOUND)


def ping_token(websub: WebSubSettings, publisher_id: str) -> str:
    """The bearer token a publisher sends with its pings."""
    return derive_secret(websub.master_key(), ping_context(publisher_id))


def run_receiver(store: ObjectStore, settings: WebSubSettings, host: str, port: int,
                 stop: threading.Event, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve until ``stop`` is set (the ``newsroom websub`` process)."""
    receiver = WebSubReceiver(store, settings)
    url = receiver.start(host, port)
    log.info("websub_listening url=%s", url)
    if on_ready is not None:
        on_ready(url)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        receiver.stop()
