"""WebSub subscriber decisions (W3C WebSub, issue 3): signatures, secrets, leases, intent checks.

Everything here is pure: no clock, no network, no settings. Times arrive as ``now``; secrets and
bodies as bytes. The subscriber I/O lives in ``tasks/websub.py``.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal, TypedDict

from newsroom.times import parse_iso_datetime

SIGNATURE_ALGORITHMS: frozenset[str] = frozenset({"sha1", "sha256", "sha384", "sha512"})
"""WebSub §8: ``X-Hub-Signature: method=signature``, method one of sha1, sha256, sha384, sha512;
sha1 is kept for older hubs."""
DEFAULT_SIGNATURE_ALGORITHM = "sha256"
RENEW_FRACTION = 0.25
"""Renew once less than this share of the granted lease remains ..."""
RENEW_MIN_SECONDS = 3600
"""... or less than this long, whichever comes first."""
PENDING_TIMEOUT_SECONDS = 600
"""A request the hub never verified is sent again after this long (WebSub §5.1: verification is async)."""
RETRY_SECONDS = 3600
"""A hub that answered with an error, or denied us, is asked again after this long."""
PUSH_MIN_INTERVAL_SECONDS = 30
"""A push (hub delivery or publisher ping) triggers at most one poll of a feed per this long."""
DEFAULT_LEASE_SECONDS = 10 * 86400
"""The lease a confirmation without ``hub.lease_seconds`` is taken to grant when the caller does not
say what it asked for (``WebSubSettings.lease_seconds`` has the same default)."""
MAX_SECRET_BYTES = 199
"""WebSub §5.1: hub.secret MUST be less than 200 bytes."""

SignatureReason = Literal["ok", "unsigned_allowed", "missing", "malformed", "unsupported_algorithm", "mismatch"]
SubscriptionMode = Literal["subscribe", "unsubscribe"]
SubscriptionStatus = Literal["pending", "live", "denied", "failed", "unsubscribed"]
SubscriptionAction = Literal["none", "wait", "subscribe", "renew"]


@dataclass(frozen=True, slots=True)
class SignatureVerdict:
    """Whether a delivery's body is authentic; ``reason`` says why not (recorded, never the body)."""

    is_valid: bool
    reason: SignatureReason
    algorithm: str | None = None


@dataclass(frozen=True, slots=True)
class Subscription:
    """Our side of one feed's subscription, as stored at ``state/websub/{feed_id}.json``.

    ``mode``/``status`` describe the last request we sent and where it stands; ``lease_expires_at``
    is the live lease, kept while a renewal is pending so the feed stays on the push backstop.
    """

    feed_id: str
    topic_url: str
    hub_url: str
    mode: SubscriptionMode
    status: SubscriptionStatus
    requested_at: datetime
    lease_seconds: int | None = None
    lease_expires_at: datetime | None = None
    verified_at: datetime | None = None
    last_error: str | None = None
    rejected_count: int = 0
    last_rejected_reason: str | None = None
    last_rejected_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class SubscriptionDecision:
    action: SubscriptionAction
    reason: str


def derive_secret(master: bytes, context: str) -> str:
    """A per-feed (or per-publisher) secret: hex HMAC-SHA256 of ``context`` under the master secret.

    64 hex characters, under the 200-byte limit of WebSub §5.1. Feed ids are hex, so the ``ping:``
    context of publisher tokens never collides with a feed's.

    >>> derive_secret(b"k", "feed1")[:16]
    'b817a251bee377e7'
    >>> derive_secret(b"k", "feed1") == derive_secret(b"k", "feed2")
    False
    """
    if not master:
        raise ValueError("the master secret must not be empty")
    return hmac.new(master, context.encode("utf-8"), hashlib.sha256).hexdigest()


def ping_context(publisher_id: str) -> str:
    """The context a publisher's ping token derives from.

    >>> ping_context("p1")
    'ping:p1'
    """
    return f"ping:{publisher_id}"


def sign_body(secret: str | bytes, body: bytes, algorithm: str = DEFAULT_SIGNATURE_ALGORITHM) -> str:
    """The ``X-Hub-Signature`` value a hub sends for ``body``.

    >>> sign_body("s", b"x", "sha1")
    'sha1=efb4d1cc1bd7c7b83b73c49dacb2f4583257fca7'

    Raises:
        ValueError: an algorithm other than sha1, sha256, sha384 or sha512.
    """
    if algorithm not in SIGNATURE_ALGORITHMS:
        raise ValueError(f"unsupported signature algorithm {algorithm!r}; use one of {sorted(SIGNATURE_ALGORITHMS)}")
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    return f"{algorithm}={hmac.new(key, body, algorithm).hexdigest()}"


def verify_signature(secret: str | bytes | None, body: bytes, header: str | None) -> SignatureVerdict:
    """Check ``X-Hub-Signature`` (``method=hexdigest``) against ``body`` in constant time.

    With no secret there is nothing to check (``unsigned_allowed``); with a secret a missing,
    malformed or unknown-method header is a rejection, like a wrong digest (WebSub §8).

    >>> verify_signature("s", b"x", sign_body("s", b"x", "sha512")).is_valid
    True
    >>> verify_signature("s", b"x", sign_body("s", b"x", "sha384")).algorithm
    'sha384'
    >>> verify_signature("s", b"x", "sha256=00").reason
    'mismatch'
    >>> verify_signature("s", b"x", None).reason, verify_signature(None, b"x", None).reason
    ('missing', 'unsigned_allowed')
    """
    if not secret:
        return SignatureVerdict(True, "unsigned_allowed")
    if header is None or not header.strip():
        return SignatureVerdict(False, "missing")
    method, sep, given = header.strip().partition("=")
    method = method.strip().lower()
    given = given.strip().lower()
    if not sep or not method or not given or any(c not in "0123456789abcdef" for c in given):
        return SignatureVerdict(False, "malformed")
    if method not in SIGNATURE_ALGORITHMS:
        return SignatureVerdict(False, "unsupported_algorithm", method)
    expected = sign_body(secret, body, method).partition("=")[2]
    # compare_digest takes time independent of where the strings differ (a length mismatch leaks
    # only the length, which is public: it is fixed by the method).
    if not hmac.compare_digest(expected.encode("ascii"), given.encode("ascii")):
        return SignatureVerdict(False, "mismatch", method)
    return SignatureVerdict(True, "ok", method)


def parse_lease_seconds(value: str | None) -> int | None:
    """``hub.lease_seconds`` as a positive int, else None.

    >>> parse_lease_seconds("86400"), parse_lease_seconds("-1"), parse_lease_seconds("soon"), parse_lease_seconds(None)
    (86400, None, None, None)
    """
    if value is None or not value.strip().isdigit():
        return None
    seconds = int(value.strip())
    return seconds if seconds > 0 else None


def is_lease_live(lease_expires_at: datetime | None, now: datetime) -> bool:
    """True while a granted lease has not expired."""
    return lease_expires_at is not None and lease_expires_at > now


def should_renew_lease(lease_expires_at: datetime, lease_seconds: int | None, now: datetime, *,
                       fraction: float = RENEW_FRACTION, min_seconds: int = RENEW_MIN_SECONDS) -> bool:
    """True when less than ``fraction`` of the lease, or less than ``min_seconds``, remains.

    Renewing well before expiry leaves room for a slow or failing hub (WebSub §5.1: the subscriber
    re-subscribes before the lease runs out).

    Raises:
        ValueError: ``fraction`` outside [0, 1] or a negative ``min_seconds``.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    if min_seconds < 0:
        raise ValueError(f"min_seconds must be >= 0, got {min_seconds}")
    remaining = (lease_expires_at - now).total_seconds()
    threshold = max(float(min_seconds), fraction * float(lease_seconds or 0))
    return remaining < threshold


def decide_subscription(
    subscription: Subscription | None,
    *,
    hub_url: str | None,
    topic_url: str,
    now: datetime,
    renew_fraction: float = RENEW_FRACTION,
    renew_min_seconds: int = RENEW_MIN_SECONDS,
    pending_timeout_seconds: int = PENDING_TIMEOUT_SECONDS,
    retry_seconds: int = RETRY_SECONDS,
) -> SubscriptionDecision:
    """What to do about one feed's subscription after a poll.

    * no hub advertised: nothing (a live lease simply runs out).
    * no subscription, a new hub or topic, or an unsubscribed one: subscribe.
    * a request in flight: wait, unless the hub never verified it within ``pending_timeout_seconds``.
    * denied or failed: ask again after ``retry_seconds``.
    * live: renew when ``should_renew_lease``; an expired lease subscribes afresh.
    """
    if hub_url is None:
        return SubscriptionDecision("none", "no_hub")
    if subscription is None:
        return SubscriptionDecision("subscribe", "new")
    if subscription.hub_url != hub_url or subscription.topic_url != topic_url:
        return SubscriptionDecision("subscribe", "hub_changed")
    if subscription.mode == "unsubscribe" or subscription.status == "unsubscribed":
        return SubscriptionDecision("subscribe", "was_unsubscribed")
    age = (now - subscription.requested_at).total_seconds()
    if subscription.status in ("denied", "failed"):
        if age >= retry_seconds:
            return SubscriptionDecision("subscribe", f"retry_{subscription.status}")
        return SubscriptionDecision("wait", subscription.status)
    live = is_lease_live(subscription.lease_expires_at, now)
    if subscription.status == "pending":
        if age < pending_timeout_seconds:
            return SubscriptionDecision("wait", "pending")
        return SubscriptionDecision("renew" if live else "subscribe", "pending_timeout")
    if not live or subscription.lease_expires_at is None:
        return SubscriptionDecision("subscribe", "lease_expired")
    if should_renew_lease(subscription.lease_expires_at, subscription.lease_seconds, now,
                          fraction=renew_fraction, min_seconds=renew_min_seconds):
        return SubscriptionDecision("renew", "lease_ending")
    return SubscriptionDecision("none", "live")


def should_unsubscribe(subscription: Subscription, *, now: datetime,
                       pending_timeout_seconds: int = PENDING_TIMEOUT_SECONDS) -> bool:
    """Whether to ask the hub to stop pushing a feed we no longer read (its publisher opted out, or
    the feed left the registry): a subscribe that is live or in flight, or an unsubscribe the hub
    never verified within ``pending_timeout_seconds`` (asked again). A denied, failed, expired or
    finished subscription needs nothing: the hub pushes nothing for it.

    >>> from datetime import UTC
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> live = Subscription("f", "https://p/feed", "https://hub", "subscribe", "live", t, 3600,
    ...                     t + timedelta(hours=1), t)
    >>> should_unsubscribe(live, now=t), should_unsubscribe(live, now=t + timedelta(hours=2))
    (True, False)
    """
    if subscription.mode == "unsubscribe":
        return (subscription.status == "pending"
                and (now - subscription.requested_at).total_seconds() >= pending_timeout_seconds)
    if subscription.status == "pending":
        return True
    return subscription.status == "live" and is_lease_live(subscription.lease_expires_at, now)


def should_answer_challenge(subscription: Subscription | None, mode: str | None, topic_url: str | None) -> bool:
    """Echo a hub's challenge only for a request of ours still in flight (WebSub §5.3): same topic,
    same mode, status ``pending``.

    A renewal is a subscribe we sent, so it is pending too (with the live lease kept) and the hub's
    re-verification of it is answered; a GET for a live subscription we did not just ask for is
    not, so nobody can reset our lease, or unsubscribe us, by asking the hub in our name.
    """
    if subscription is None or topic_url is None or topic_url != subscription.topic_url:
        return False
    if mode not in ("subscribe", "unsubscribe"):
        return False
    return subscription.mode == mode and subscription.status == "pending"


def should_accept_denial(subscription: Subscription | None, topic_url: str | None) -> bool:
    """Take a ``hub.mode=denied`` GET only for a subscribe of ours still in flight, on the same topic.

    WebSub §5.2: a hub sends ``denied`` in answer to a subscription request; the GET carries no
    secret, so one for a live, failed or unasked subscription is refused and changes nothing.
    """
    return (subscription is not None and topic_url is not None and topic_url == subscription.topic_url
            and subscription.mode == "subscribe" and subscription.status == "pending")


def confirm_subscription(subscription: Subscription, mode: str, lease_seconds: int | None, now: datetime, *,
                         requested_lease_seconds: int = DEFAULT_LEASE_SECONDS) -> Subscription:
    """The subscription after the hub verified ``mode``: a live lease from ``now``, or unsubscribed.

    A subscribe check without ``hub.lease_seconds`` (required by WebSub §5.3, yet some hubs omit it)
    gets the lease we asked for, ``requested_lease_seconds``, so the lease still ends and is renewed.
    """
    if mode == "unsubscribe":
        return replace(subscription, status="unsubscribed", lease_expires_at=None, verified_at=now, last_error=None)
    granted = lease_seconds or requested_lease_seconds
    return replace(subscription, status="live", lease_seconds=granted, lease_expires_at=now + timedelta(seconds=granted),
                   verified_at=now, last_error=None)


def is_push_due(last_polled_at: datetime | None, now: datetime,
                min_interval_seconds: int = PUSH_MIN_INTERVAL_SECONDS) -> bool:
    """True when a pushed feed may be polled now: not polled within ``min_interval_seconds``.

    >>> from datetime import UTC
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> is_push_due(None, t), is_push_due(t - timedelta(seconds=10), t), is_push_due(t - timedelta(seconds=30), t)
    (True, False, True)
    """
    return last_polled_at is None or (now - last_polled_at).total_seconds() >= min_interval_seconds


class SubscriptionJson(TypedDict, total=False):
    """A subscription record as stored (JSON, instants as ISO 8601 strings). A record read back is
    checked by :func:`subscription_from_dict`, so every key may be missing until then."""

    feed_id: str
    topic_url: str
    hub_url: str
    mode: SubscriptionMode
    status: SubscriptionStatus
    requested_at: str
    lease_seconds: int | None
    lease_expires_at: str | None
    verified_at: str | None
    last_error: str | None
    rejected_count: int
    last_rejected_reason: str | None
    last_rejected_at: str | None


def subscription_to_dict(subscription: Subscription) -> SubscriptionJson:
    """A JSON-ready dict (ISO instants) of a subscription."""
    s = subscription
    return SubscriptionJson(
        feed_id=s.feed_id, topic_url=s.topic_url, hub_url=s.hub_url, mode=s.mode, status=s.status,
        requested_at=s.requested_at.isoformat(), lease_seconds=s.lease_seconds,
        lease_expires_at=_iso(s.lease_expires_at), verified_at=_iso(s.verified_at), last_error=s.last_error,
        rejected_count=s.rejected_count, last_rejected_reason=s.last_rejected_reason,
        last_rejected_at=_iso(s.last_rejected_at),
    )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


_TIME_FIELDS = ("requested_at", "lease_expires_at", "verified_at", "last_rejected_at")


def subscription_from_dict(data: SubscriptionJson) -> Subscription:
    """The inverse of ``subscription_to_dict``; unknown keys are ignored.

    Raises:
        ValueError: a required key is missing, or a mode, status or instant is invalid.
    """
    missing = [k for k in ("feed_id", "topic_url", "hub_url", "mode", "status", "requested_at") if not data.get(k)]
    if missing:
        raise ValueError(f"subscription record lacks {missing}")
    times = {name: _instant(data.get(name), name) for name in _TIME_FIELDS}
    mode, status = data["mode"], data["status"]
    if mode not in ("subscribe", "unsubscribe"):
        raise ValueError(f"bad mode {mode!r}")
    if status not in ("pending", "live", "denied", "failed", "unsubscribed"):
        raise ValueError(f"bad status {status!r}")
    requested_at = times["requested_at"]
    assert requested_at is not None  # checked as required above
    lease = data.get("lease_seconds")
    return Subscription(
        feed_id=str(data["feed_id"]), topic_url=str(data["topic_url"]), hub_url=str(data["hub_url"]), mode=mode,
        status=status, requested_at=requested_at, lease_seconds=int(lease) if lease is not None else None,
        lease_expires_at=times["lease_expires_at"], verified_at=times["verified_at"],
        last_error=data.get("last_error"), rejected_count=int(data.get("rejected_count") or 0),
        last_rejected_reason=data.get("last_rejected_reason"), last_rejected_at=times["last_rejected_at"],
    )


def _instant(value: object, name: str) -> datetime | None:
    if value is None:
        return None
    when = parse_iso_datetime(value if isinstance(value, str) else str(value))
    if when is None:
        raise ValueError(f"{name} must be an ISO 8601 instant with a UTC offset: {value!r}")
    return when
