"""A WebSub hub for the replay site (W3C WebSub; issue 3), stdlib only.

Served on the control host at ``/hub``; every publisher feed advertises it with ``rel="hub"``.
It does what a real hub does, over real HTTP on loopback:

* subscription requests (``POST /hub``, form-encoded ``hub.mode``, ``hub.topic``, ``hub.callback``,
  ``hub.secret``, ``hub.lease_seconds``) answered 202, then verified asynchronously by a GET to
  the callback that must echo ``hub.challenge`` (§5.3); an unverified request changes nothing;
* content distribution (§7): when the simulated clock releases new articles on a topic, the hub
  POSTs the feed document to every live subscriber, signed ``X-Hub-Signature: sha256=...`` (§8)
  with that subscriber's secret; a 410 answer drops the subscription;
* lease expiry: a subscription whose lease has run out (on the simulated clock) is dropped and
  gets no more deliveries.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from urllib.parse import urlencode, urlsplit

logger = logging.getLogger(__name__)

DEFAULT_LEASE_SECONDS = 86400
MAX_LEASE_SECONDS = 10 * 86400
MAX_SECRET_BYTES = 199
REQUEST_TIMEOUT_SECONDS = 5.0
SIGNATURE_ALGORITHMS = {"sha1": hashlib.sha1, "sha256": hashlib.sha256, "sha512": hashlib.sha512}

Clock = Callable[[], datetime]
Content = Callable[[str], "tuple[bytes, str, int] | None"]
"""topic -> (document, content type, version) or None for a topic this site does not serve."""


@dataclass(frozen=True, slots=True)
class HubSubscription:
    topic: str
    callback: str
    secret: str | None
    lease_seconds: int
    expires_at: datetime
    delivered_version: int


class Hub:
    """Subscriptions by (topic, callback); verification and delivery over HTTP."""

    def __init__(self, hub_url: str, clock: Clock, content: Content, *, algorithm: str = "sha256",
                 default_lease_seconds: int = DEFAULT_LEASE_SECONDS,
                 max_lease_seconds: int = MAX_LEASE_SECONDS) -> None:
        if algorithm not in SIGNATURE_ALGORITHMS:
            raise ValueError(f"unknown signature algorithm {algorithm!r}")
        self.hub_url = hub_url
        self.algorithm = algorithm
        self._clock = clock
        self._content = content
        self._default_lease = default_lease_seconds
        self._max_lease = max_lease_seconds
        self._subs: dict[tuple[str, str], HubSubscription] = {}
        self._lock = threading.Lock()
        self._distribute_lock = threading.Lock()
        self._pending: set[threading.Thread] = set()
        self._idle = threading.Condition(self._lock)
        self._verifying = threading.Event()  # cleared: verifications wait (see hold_verifications)
        self._verifying.set()
        self.counts: Counter[str] = Counter()
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    # --- subscription requests (§5.1) ------------------------------------------------------

    def handle_request(self, form: Mapping[str, str]) -> tuple[int, str]:
        """Validate a subscription request; 202 and a verification in the background, or 400."""
        mode = form.get("hub.mode", "")
        topic = form.get("hub.topic", "")
        callback = form.get("hub.callback", "")
        secret = form.get("hub.secret") or None
        if mode not in ("subscribe", "unsubscribe"):
            return 400, "hub.mode must be subscribe or unsubscribe"
        if self._content(topic) is None:
            return 400, "hub.topic is not served by this hub"
        if urlsplit(callback).scheme not in ("http", "https") or not urlsplit(callback).hostname:
            return 400, "hub.callback must be an absolute http(s) URL"
        if secret is not None and len(secret.encode("utf-8")) > MAX_SECRET_BYTES:
            return 400, "hub.secret must be less than 200 bytes"
        requested = form.get("hub.lease_seconds", "")
        lease = int(requested) if requested.isdigit() and int(requested) > 0 else self._default_lease
        lease = min(lease, self._max_lease)
        with self._lock:
            self.counts[f"request_{mode}"] += 1
        thread = threading.Thread(target=self._verify, args=(mode, topic, callback, secret, lease),
                                  name="replay-hub-verify", daemon=True)
        with self._lock:
            self._pending.add(thread)
        thread.start()
        return 202, "verification pending"

    def hold_verifications(self) -> None:
        """Make verifications of new requests wait until :meth:`release_verifications`, so a
        subscriber's state between its request and the hub's callback can be observed."""
        self._verifying.clear()

    def release_verifications(self) -> None:
        """Let held and future verifications go ahead."""
        self._verifying.set()

    def _verify(self, mode: str, topic: str, callback: str, secret: str | None, lease: int) -> None:
        try:
            self._verifying.wait(REQUEST_TIMEOUT_SECONDS * 6)
            challenge = secrets.token_urlsafe(24)
            params = {"hub.mode": mode, "hub.topic": topic, "hub.challenge": challenge}
            if mode == "subscribe":
                params["hub.lease_seconds"] = str(lease)
            url = callback + ("&" if "?" in callback else "?") + urlencode(params)
            status, body = self._call("GET", url)
            confirmed = 200 <= status < 300 and body == challenge.encode()
            with self._lock:
                self.counts["verified" if confirmed else "verify_failed"] += 1
                if not confirmed:
                    return  # §5.3: an unconfirmed request leaves any existing subscription as it is
                if mode == "unsubscribe":
                    self._subs.pop((topic, callback), None)
                    return
                content = self._content(topic)
                version = content[2] if content else 0
                old = self._subs.get((topic, callback))
                self._subs[(topic, callback)] = HubSubscription(
                    topic, callback, secret, lease, self._clock() + timedelta(seconds=lease),
                    old.delivered_version if old else version)
            logger.debug("hub_verified mode=%s topic=%s callback=%s", mode, topic, callback)
        finally:
            with self._lock:
                self._pending.discard(threading.current_thread())
                self._idle.notify_all()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until no verification is in flight; True if none is left."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._pending, timeout)

    # --- content distribution (§7, §8) and leases -------------------------------------------

    def distribute(self) -> int:
        """Drop expired leases, then deliver every topic that has new content; returns deliveries made."""
        with self._distribute_lock:
            now = self._clock()
            with self._lock:
                subs = list(self._subs.values())
            delivered = 0
            for sub in subs:
                if sub.expires_at <= now:
                    with self._lock:
                        if self._subs.get((sub.topic, sub.callback)) == sub:
                            del self._subs[(sub.topic, sub.callback)]
                            self.counts["expired"] += 1
                    continue
                content = self._content(sub.topic)
                if content is None or content[2] <= sub.delivered_version:
                    continue
                body, content_type, version = content
                if self._deliver(sub, body, content_type, version):
                    delivered += 1
            return delivered

    def _deliver(self, sub: HubSubscription, body: bytes, content_type: str, version: int) -> bool:
        headers = {"Content-Type": content_type,
                   "Link": f'<{self.hub_url}>; rel="hub", <{sub.topic}>; rel="self"'}
        if sub.secret:
            digest = hmac.new(sub.secret.encode("utf-8"), body, SIGNATURE_ALGORITHMS[self.algorithm]).hexdigest()
            headers["X-Hub-Signature"] = f"{self.algorithm}={digest}"
        status, _ = self._call("POST", sub.callback, body, headers)
        key = (sub.topic, sub.callback)
        with self._lock:
            current = self._subs.get(key)
            if status == 410:
                self._subs.pop(key, None)
                self.counts["gone"] += 1
                return False
            if not 200 <= status < 300:
                self.counts["delivery_failed"] += 1
                return False  # kept: the next tick tries again
            self.counts["delivered"] += 1
            if current is not None:
                self._subs[key] = replace(current, delivered_version=max(current.delivered_version, version))
        return True

    def _call(self, method: str, url: str, body: bytes | None = None,
              headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
        try:
            with self._opener.open(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:
                return int(response.status), response.read(4096)
        except urllib.error.HTTPError as e:
            return int(e.code), b""
        except (urllib.error.URLError, OSError) as e:
            logger.debug("hub_call_failed method=%s url=%s error=%s", method, url, e)
            return 0, b""

    def subscriptions(self) -> list[dict[str, object]]:
        """Live subscriptions (secrets left out), for the control host and tests."""
        with self._lock:
            subs = sorted(self._subs.values(), key=lambda s: (s.topic, s.callback))
        return [{"topic": s.topic, "callback": s.callback, "lease_seconds": s.lease_seconds,
                 "expires_at": s.expires_at.isoformat(), "delivered_version": s.delivered_version,
                 "is_signed": s.secret is not None} for s in subs]
