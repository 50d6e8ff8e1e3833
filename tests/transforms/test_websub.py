"""WebSub decisions: signatures (sha1/sha256/sha384/sha512), secrets, leases, intent checks, the poll backstop."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime, timedelta

import pytest

from transforms.polling import PollResponse, PollState, decide_next_poll
from transforms.websub import (
    DEFAULT_LEASE_SECONDS,
    Subscription,
    confirm_subscription,
    decide_subscription,
    derive_secret,
    is_lease_live,
    is_push_due,
    parse_lease_seconds,
    should_accept_denial,
    should_answer_challenge,
    should_renew_lease,
    sign_body,
    subscription_from_dict,
    subscription_to_dict,
    verify_signature,
)

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
SECRET = derive_secret(b"master", "feed0001")
BODY = b'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title></feed>'
TOPIC = "http://127.0.1.1:8900/feeds/rss.xml"
HUB = "http://127.0.0.1:8900/hub"


def _hex(algorithm: str, secret: str = SECRET, body: bytes = BODY) -> str:
    return hmac.new(secret.encode(), body, getattr(hashlib, algorithm)).hexdigest()


# --- signatures ----------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["sha1", "sha256", "sha384", "sha512"])  # WebSub §8
def test_a_hub_signature_verifies_with_each_algorithm(algorithm: str) -> None:
    header = f"{algorithm}={_hex(algorithm)}"
    assert sign_body(SECRET, BODY, algorithm) == header
    verdict = verify_signature(SECRET, BODY, header)
    assert verdict.is_valid and verdict.reason == "ok" and verdict.algorithm == algorithm
    # Method and digest are case-insensitive; surrounding whitespace is tolerated.
    assert verify_signature(SECRET, BODY, f"  {algorithm.upper()}={_hex(algorithm).upper()} ").is_valid


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "missing"),
        ("", "missing"),
        ("   ", "missing"),
        ("sha256", "malformed"),
        ("sha256=", "malformed"),
        ("=" + "ab" * 32, "malformed"),
        ("sha256=not-hex-at-all", "malformed"),
        ("sha256 " + "ab" * 32, "malformed"),
        ("md5=" + hashlib.md5(BODY).hexdigest(), "unsupported_algorithm"),  # noqa: S324 - the point of the test
        ("sha256=" + "0" * 64, "mismatch"),
        ("sha256=" + _hex("sha256")[:-2], "mismatch"),  # truncated
        ("sha256=" + _hex("sha256", secret="another feed's secret"), "mismatch"),
        ("sha256=" + _hex("sha256", body=BODY + b" "), "mismatch"),  # body changed after signing
        ("sha256=" + _hex("sha512"), "mismatch"),  # digest of another method under this label
        ("sha1=" + _hex("sha256"), "mismatch"),
    ],
    ids=["none", "empty", "blank", "no-equals", "no-digest", "no-method", "not-hex", "space", "md5",
         "zeros", "truncated", "wrong-secret", "tampered-body", "sha512-as-sha256", "sha256-as-sha1"],
)
def test_forged_missing_and_malformed_signatures_are_rejected(header: str | None, reason: str) -> None:
    verdict = verify_signature(SECRET, BODY, header)
    assert not verdict.is_valid and verdict.reason == reason


def test_without_a_secret_nothing_is_checked() -> None:
    assert verify_signature(None, BODY, None).reason == "unsigned_allowed"
    assert verify_signature("", BODY, "sha256=00").is_valid


def test_sign_body_refuses_unknown_algorithms() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        sign_body(SECRET, BODY, "md5")


# --- secrets -------------------------------------------------------------------------------


def test_per_feed_secrets_are_hmac_of_the_feed_id_under_the_master() -> None:
    assert derive_secret(b"master", "feed0001") == hmac.new(b"master", b"feed0001", hashlib.sha256).hexdigest()
    assert derive_secret(b"master", "feed0001") != derive_secret(b"master", "feed0002")
    assert derive_secret(b"master", "feed0001") != derive_secret(b"other", "feed0001")
    assert len(derive_secret(b"master", "feed0001").encode()) < 200  # WebSub §5.1
    with pytest.raises(ValueError):
        derive_secret(b"", "feed0001")


# --- leases --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lease_seconds", "remaining", "renew"),
    [
        (10 * 86400, timedelta(days=3), False),
        (10 * 86400, timedelta(days=2), True),  # under 25 % of ten days
        (86400, timedelta(hours=7), False),
        (86400, timedelta(hours=5), True),  # under 25 % of a day
        (7200, timedelta(minutes=90), False),  # 25 % is 30 min; an hour is the larger bound
        (7200, timedelta(minutes=50), True),  # under an hour
        (None, timedelta(minutes=61), False),
        (None, timedelta(minutes=59), True),
        (86400, timedelta(seconds=-1), True),  # already expired
    ],
    ids=["10d-3d-left", "10d-2d-left", "1d-7h-left", "1d-5h-left", "2h-90m-left", "2h-50m-left",
         "unknown-61m", "unknown-59m", "expired"],
)
def test_a_lease_is_renewed_when_a_quarter_or_an_hour_remains(lease_seconds: int | None, remaining: timedelta,
                                                               renew: bool) -> None:
    assert should_renew_lease(NOW + remaining, lease_seconds, NOW) is renew


def test_renewal_arguments_are_checked() -> None:
    with pytest.raises(ValueError):
        should_renew_lease(NOW, 100, NOW, fraction=1.5)
    with pytest.raises(ValueError):
        should_renew_lease(NOW, 100, NOW, min_seconds=-1)


def test_lease_liveness_and_lease_seconds() -> None:
    assert is_lease_live(NOW + timedelta(seconds=1), NOW)
    assert not is_lease_live(NOW, NOW) and not is_lease_live(None, NOW)
    assert parse_lease_seconds("864000") == 864000 and parse_lease_seconds("0") is None


def _sub(**changes: object) -> Subscription:
    base = Subscription(feed_id="feed0001", topic_url=TOPIC, hub_url=HUB, mode="subscribe", status="live",
                        requested_at=NOW - timedelta(days=1), lease_seconds=10 * 86400,
                        lease_expires_at=NOW + timedelta(days=9), verified_at=NOW - timedelta(days=1))
    fields = {name: getattr(base, name) for name in Subscription.__slots__}
    fields.update(changes)
    return Subscription(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("subscription", "hub_url", "action", "reason"),
    [
        (None, None, "none", "no_hub"),
        (None, HUB, "subscribe", "new"),
        (_sub(), "http://other.example/hub", "subscribe", "hub_changed"),
        (_sub(), HUB, "none", "live"),
        (_sub(lease_expires_at=NOW + timedelta(days=1)), HUB, "renew", "lease_ending"),
        (_sub(lease_expires_at=NOW - timedelta(seconds=1)), HUB, "subscribe", "lease_expired"),
        (_sub(status="pending", requested_at=NOW - timedelta(minutes=1), lease_expires_at=None), HUB, "wait",
         "pending"),
        (_sub(status="pending", requested_at=NOW - timedelta(hours=1), lease_expires_at=None), HUB, "subscribe",
         "pending_timeout"),
        (_sub(status="pending", requested_at=NOW - timedelta(hours=1)), HUB, "renew", "pending_timeout"),
        (_sub(status="failed", requested_at=NOW - timedelta(minutes=5)), HUB, "wait", "failed"),
        (_sub(status="failed", requested_at=NOW - timedelta(hours=2)), HUB, "subscribe", "retry_failed"),
        (_sub(status="denied", requested_at=NOW - timedelta(hours=2)), HUB, "subscribe", "retry_denied"),
        (_sub(mode="unsubscribe", status="unsubscribed"), HUB, "subscribe", "was_unsubscribed"),
    ],
    ids=["no-hub", "new", "hub-changed", "live", "lease-ending", "lease-expired", "pending", "pending-timeout",
         "pending-renewal-timeout", "failed-recently", "failed-long-ago", "denied-long-ago", "unsubscribed"],
)
def test_decide_subscription(subscription: Subscription | None, hub_url: str | None, action: str,
                             reason: str) -> None:
    decision = decide_subscription(subscription, hub_url=hub_url, topic_url=TOPIC, now=NOW)
    assert (decision.action, decision.reason) == (action, reason)


@pytest.mark.parametrize(
    ("subscription", "mode", "topic", "answer"),
    [
        (_sub(status="pending"), "subscribe", TOPIC, True),
        (_sub(status="pending", requested_at=NOW - timedelta(minutes=1)), "subscribe", TOPIC, True),  # a renewal
        (_sub(), "subscribe", TOPIC, False),  # live, nothing asked: nobody resets our lease
        (_sub(status="pending"), "subscribe", TOPIC + "?x", False),
        (_sub(), "unsubscribe", TOPIC, False),  # nobody unsubscribes us in our name
        (_sub(mode="unsubscribe", status="pending"), "unsubscribe", TOPIC, True),
        (_sub(mode="unsubscribe", status="pending"), "subscribe", TOPIC, False),
        (_sub(status="failed"), "subscribe", TOPIC, False),
        (_sub(status="denied"), "subscribe", TOPIC, False),
        (None, "subscribe", TOPIC, False),
        (_sub(status="pending"), None, TOPIC, False),
        (_sub(status="pending"), "subscribe", None, False),
    ],
    ids=["pending", "pending-renewal", "live", "other-topic", "unasked-unsubscribe", "asked-unsubscribe",
         "mode-mismatch", "failed", "denied", "unknown", "no-mode", "no-topic"],
)
def test_a_challenge_is_echoed_only_for_our_own_requests(subscription: Subscription | None, mode: str | None,
                                                         topic: str | None, answer: bool) -> None:
    """WebSub §5.3: confirm only a request we sent and still wait on (status ``pending``, same mode and topic).

    This used to echo for a live subscription too, so that a hub could re-verify it. A hub re-verifies
    when we renew, and a renewal is a subscribe we sent, left ``pending`` (with the live lease kept)
    until the hub checks it, so it is still answered; an unasked GET for a live one is not, since it
    would reset our lease to whatever the caller says.
    """
    assert should_answer_challenge(subscription, mode, topic) is answer


@pytest.mark.parametrize(
    ("subscription", "topic", "accepted"),
    [
        (_sub(status="pending"), TOPIC, True),
        (_sub(), TOPIC, False),
        (_sub(status="failed"), TOPIC, False),
        (_sub(mode="unsubscribe", status="pending"), TOPIC, False),
        (_sub(status="pending"), TOPIC + "?x", False),
        (_sub(status="pending"), None, False),
        (None, TOPIC, False),
    ],
    ids=["pending", "live", "failed", "pending-unsubscribe", "other-topic", "no-topic", "unknown"],
)
def test_a_denial_is_taken_only_for_a_pending_subscribe(subscription: Subscription | None, topic: str | None,
                                                        accepted: bool) -> None:
    """WebSub §5.2: the hub sends ``denied`` in answer to a subscription request of ours."""
    assert should_accept_denial(subscription, topic) is accepted


def test_confirming_sets_the_lease_from_now() -> None:
    live = confirm_subscription(_sub(status="pending", lease_expires_at=None), "subscribe", 3600, NOW)
    assert live.status == "live" and live.lease_expires_at == NOW + timedelta(hours=1) and live.verified_at == NOW
    gone = confirm_subscription(_sub(mode="unsubscribe", status="pending"), "unsubscribe", None, NOW)
    assert gone.status == "unsubscribed" and gone.lease_expires_at is None


def test_a_confirmation_without_a_lease_gets_the_lease_we_asked_for() -> None:
    pending = _sub(status="pending", lease_seconds=None, lease_expires_at=None)
    asked = confirm_subscription(pending, "subscribe", None, NOW, requested_lease_seconds=7200)
    assert (asked.lease_seconds, asked.lease_expires_at) == (7200, NOW + timedelta(hours=2))
    default = confirm_subscription(pending, "subscribe", None, NOW)
    assert default.lease_expires_at == NOW + timedelta(seconds=DEFAULT_LEASE_SECONDS)
    assert decide_subscription(asked, hub_url=HUB, topic_url=TOPIC, now=NOW + timedelta(minutes=90)).action == "renew"


def test_subscription_records_round_trip_and_bad_ones_fail_loudly() -> None:
    sub = _sub(rejected_count=2, last_rejected_reason="mismatch", last_rejected_at=NOW)
    assert subscription_from_dict(subscription_to_dict(sub)) == sub
    with pytest.raises(ValueError, match="lacks"):
        subscription_from_dict({"feed_id": "f"})
    with pytest.raises(ValueError, match="bad status"):
        subscription_from_dict({**subscription_to_dict(sub), "status": "maybe"})
    with pytest.raises(ValueError, match="UTC offset"):
        subscription_from_dict({**subscription_to_dict(sub), "requested_at": "2026-12-02T12:00:00"})


def test_a_push_polls_a_feed_at_most_once_per_interval() -> None:
    assert is_push_due(None, NOW)
    assert not is_push_due(NOW - timedelta(seconds=29), NOW, 30)
    assert is_push_due(NOW - timedelta(seconds=30), NOW, 30)


# --- the poll backstop while a lease is live -------------------------------------------------


def test_a_live_lease_relaxes_a_busy_feed_to_the_backstop() -> None:
    state = PollState(interval_seconds=60, last_polled_at=NOW - timedelta(minutes=1))
    response = PollResponse(status=200, is_error=False, new_item_times=(NOW,))
    plain = decide_next_poll(state, response, NOW, floor_seconds=60)
    relaxed = decide_next_poll(state, response, NOW, floor_seconds=60, backstop_seconds=900)
    assert plain.interval_seconds < 900
    assert relaxed.interval_seconds == 900 and relaxed.reason == "websub_backstop"
    assert relaxed.next_poll_at == NOW + timedelta(minutes=15)


def test_the_backstop_never_shortens_an_interval_and_stays_under_the_ceiling() -> None:
    quiet = PollState(interval_seconds=3600, last_polled_at=NOW - timedelta(days=7), rate_observed_seconds=7 * 86400,
                      rate_counts=(0.0,) * 168)
    response = PollResponse(status=304, is_error=False)
    assert decide_next_poll(quiet, response, NOW, floor_seconds=300, backstop_seconds=900).interval_seconds == 3600
    busy = PollState(interval_seconds=60)
    capped = decide_next_poll(busy, PollResponse(status=200, is_error=False, new_item_times=(NOW,)), NOW,
                              floor_seconds=60, ceiling_seconds=600, backstop_seconds=900)
    assert capped.interval_seconds == 600


def test_failures_keep_their_backoff_under_a_lease() -> None:
    failed = decide_next_poll(PollState(), PollResponse(status=500, is_error=True), NOW, floor_seconds=60,
                              backstop_seconds=900)
    assert failed.reason == "backoff" and failed.interval_seconds == 120
    with pytest.raises(ValueError):
        decide_next_poll(PollState(), PollResponse(status=200, is_error=False), NOW, floor_seconds=60,
                         backstop_seconds=0)
