"""The callback receiver: hubs' intent checks, signed deliveries and publisher pings (issue 3).

``WebSubReceiver`` answers an intent check only for a request of ours still pending, verifies
every delivery's ``X-Hub-Signature``, and turns an authentic delivery, or an authenticated
publisher ping, into push markers under ``state/push/``. It never keeps pushed content: the
ingest takes pushed feeds first and fetches the feed and pages itself. It is an ASGI app served
by uvicorn, like the API: CPython's documentation does not recommend ``http.server`` for
production (issue 17).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool

from tasks.registry import load_registry
from tasks.settings import WebSubSettings
from tasks.websub import announce_push, load_subscription, update_subscription, write_push_marker
from transforms.websub import (
    Subscription,
    confirm_subscription,
    derive_secret,
    parse_lease_seconds,
    ping_context,
    should_accept_denial,
    should_answer_challenge,
    verify_signature,
)
from warehouse import layout
from warehouse.errors import PreconditionFailedError
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
_PUBLISHER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_LINK = re.compile(r"<([^>]*)>\s*;\s*rel\s*=\s*\"?([^\";,]+)\"?")


def _utcnow() -> datetime:
    return datetime.now(UTC)


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
