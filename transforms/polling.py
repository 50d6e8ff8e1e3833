"""When to poll a feed next: a pure function of its state, the poll's response and ``now``.

The interval aims at about half the expected gap between a feed's items, read from a decayed count
of items per hour of the week, so a feed is polled more often at the hours it publishes. Server hints
(``Retry-After``, ``Cache-Control: max-age``, ``Expires``, RSS ``ttl``, ``skipHours``/``skipDays``)
are honoured; failures back off exponentially and a feed that keeps failing is parked and re-probed
slowly. Nothing here reads a clock: ``now`` is an argument (STYLE §1).

What a poll means for the feed (new items, validators, errors and warnings) is
:mod:`transforms.poll_outcome`, which asks :func:`decide_next_poll` for the next poll.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Literal

HOURS_OF_WEEK = 168
DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
TIER1_FLOOR_SECONDS = 60
DEFAULT_FLOOR_SECONDS = 300
CEILING_SECONDS = 3600
RATE_HALF_LIFE_SECONDS = 14 * 86400
"""Items and observed time lose half their weight in two weeks: old habits fade, a season stays."""
RATE_PRIOR_HOURS = 2.0
"""Pseudo-hours of the feed's overall rate mixed into each hour-of-week bucket (smoothing)."""
UNKNOWN_FEED_PER_HOUR = 1.0
UNKNOWN_FEED_WEIGHT_HOURS = 0.25
"""A feed with no history is assumed to publish about once an hour, worth a quarter hour of observation:
a new, empty feed is polled every half hour at first and backs off to the ceiling as hours pass quietly."""
BOOTSTRAP_MAX_SECONDS = 7 * 86400
"""On a first poll, the feed's own history counts as observed time, up to this long."""
BACKOFF_CAP_SECONDS = 2 * 3600
PARK_AFTER_FAILURES = 8
PARK_REPROBE_SECONDS = 6 * 3600
RETRY_AFTER_CAP_SECONDS = 24 * 3600
USELESS_VALIDATOR_POLLS = 3
"""Consecutive 200s with changed validators and no new guid before validators are dropped."""
Reason = Literal["rate", "new_items", "max_age", "expires", "ttl", "skip_hours",
                 "retry_after", "backoff", "parked", "gone", "websub_backstop"]


@dataclass(frozen=True, slots=True)
class PollState:
    """What the decision needs from a feed's stored state."""

    interval_seconds: int | None = None
    last_polled_at: datetime | None = None
    rate_counts: tuple[float, ...] = ()  # HOURS_OF_WEEK decayed item counts, or empty when unknown
    rate_observed_seconds: float = 0.0
    error_streak: int = 0
    validator_miss_streak: int = 0
    is_validators_useless: bool = False


@dataclass(frozen=True, slots=True)
class PollResponse:
    """What one poll saw. ``status`` is None when no HTTP response came (timeout, DNS, refused)."""

    status: int | None
    is_error: bool
    new_item_times: tuple[datetime | None, ...] = ()  # publisher dates of the new items (None: unknown)
    oldest_item_at: datetime | None = None  # oldest date in the document (first-poll bootstrap)
    retry_after: str | None = None
    cache_control: str | None = None
    expires: str | None = None
    ttl_minutes: int | None = None
    skip_hours: frozenset[int] = frozenset()
    skip_days: frozenset[str] = frozenset()
    sent_validators: bool = False
    validators_changed: bool = False


@dataclass(frozen=True, slots=True)
class PollDecision:
    """The next poll and the state fields it updates; ``reason`` names the rule that set the time."""

    interval_seconds: int
    next_poll_at: datetime
    reason: Reason
    rate_counts: tuple[float, ...]
    rate_observed_seconds: float
    error_streak: int
    is_parked: bool
    parked_reason: str | None
    validator_miss_streak: int
    is_validators_useless: bool


def floor_for_tier(tier: int | None, *, tier1_floor_seconds: int = TIER1_FLOOR_SECONDS,
                   default_floor_seconds: int = DEFAULT_FLOOR_SECONDS) -> int:
    """The shortest interval a feed of this publisher tier may get.

    >>> floor_for_tier(1), floor_for_tier(2), floor_for_tier(None)
    (60, 300, 300)
    """
    return tier1_floor_seconds if tier == 1 else default_floor_seconds


def hour_of_week(when: datetime) -> int:
    """0 for Monday 00:00-00:59 UTC, up to 167 for Sunday 23:00.

    >>> hour_of_week(datetime(2026, 12, 7, 0, 30, tzinfo=UTC)), hour_of_week(datetime(2026, 12, 13, 23, tzinfo=UTC))
    (0, 167)
    """
    utc = when.astimezone(UTC)
    return utc.weekday() * 24 + utc.hour


def parse_retry_after(value: str | None, now: datetime) -> int | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date), RFC 9110 §10.2.3.

    >>> parse_retry_after("120", datetime(2026, 1, 1, tzinfo=UTC))
    120
    >>> parse_retry_after("Thu, 01 Jan 2026 00:05:00 GMT", datetime(2026, 1, 1, tzinfo=UTC))
    300
    >>> parse_retry_after("soon", datetime(2026, 1, 1, tzinfo=UTC)) is None
    True
    """
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # "²" is a digit to str.isdigit, not to int()
        return int(value)
    when = _http_date(value)
    return None if when is None else max(0, int((when - now).total_seconds()))


def parse_max_age(cache_control: str | None) -> int | None:
    """``max-age`` from Cache-Control, ignored when ``no-cache``/``no-store`` is present (RFC 9111 §5.2.2).

    >>> parse_max_age("public, max-age=600"), parse_max_age("no-cache, max-age=600"), parse_max_age(None)
    (600, None, None)
    """
    if not cache_control:
        return None
    directives = [d.strip().lower() for d in cache_control.split(",")]
    if "no-cache" in directives or "no-store" in directives:
        return None
    for d in directives:
        if d.startswith("max-age="):
            value = d.split("=", 1)[1].strip('"')
            if value.isdigit():
                return int(value)
    return None


def parse_expires(value: str | None, now: datetime) -> int | None:
    """Seconds until an ``Expires`` date (RFC 9111 §5.3); an invalid date means "already expired"."""
    if not value:
        return None
    when = _http_date(value)
    return 0 if when is None else max(0, int((when - now).total_seconds()))


def _freshness_hint(cache_control: str | None, expires: str | None, now: datetime
                    ) -> list[tuple[int | None, Reason]]:
    """``max-age`` wins over ``Expires``; ``no-cache``/``no-store`` void both (RFC 9111 §5.3)."""
    directives = [d.strip().lower() for d in (cache_control or "").split(",")]
    if "no-cache" in directives or "no-store" in directives:
        return []
    max_age = parse_max_age(cache_control)
    if max_age is not None:
        return [(max_age, "max_age")]
    return [(parse_expires(expires, now), "expires")]


def _http_date(value: str) -> datetime | None:
    """An HTTP-date in any of its three forms (RFC 9110 §5.6.7), all of them GMT.

    >>> _http_date("Mon Dec  7 12:00:00 2026")  # asctime: no zone written, GMT all the same
    datetime.datetime(2026, 12, 7, 12, 0, tzinfo=datetime.timezone.utc)
    """
    try:
        when = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def decay_rate(counts: Sequence[float], observed_seconds: float, elapsed_seconds: float,
               *, half_life_seconds: float = RATE_HALF_LIFE_SECONDS) -> tuple[tuple[float, ...], float]:
    """Age the counts and the observed time by ``elapsed_seconds``, then add that time as observed.

    >>> decay_rate([2.0] * HOURS_OF_WEEK, 100.0, 14 * 86400)[0][0], decay_rate([], 0.0, 60.0)[1]
    (1.0, 60.0)
    """
    if elapsed_seconds < 0:
        raise ValueError("elapsed_seconds must be >= 0")
    factor = 0.5 ** (elapsed_seconds / half_life_seconds)
    base = tuple(counts) if len(counts) == HOURS_OF_WEEK else (0.0,) * HOURS_OF_WEEK
    return tuple(c * factor for c in base), observed_seconds * factor + elapsed_seconds


def add_items(counts: Sequence[float], item_times: Sequence[datetime]) -> tuple[float, ...]:
    """Count one item in the hour-of-week bucket of each time."""
    out = list(counts) if len(counts) == HOURS_OF_WEEK else [0.0] * HOURS_OF_WEEK
    for when in item_times:
        out[hour_of_week(when)] += 1.0
    return tuple(out)


def expected_rate_per_hour(counts: Sequence[float], observed_seconds: float, when: datetime,
                           *, prior_hours: float = RATE_PRIOR_HOURS) -> float:
    """Items per hour expected at ``when``: the hour-of-week bucket, smoothed toward the overall rate.

    Each bucket has seen ``observed_seconds / 168`` of the time, so a young history leans on the
    feed's overall rate and an old one on its own hour; the overall rate itself starts from
    UNKNOWN_FEED_PER_HOUR, worth UNKNOWN_FEED_WEIGHT_HOURS of observation.

    >>> counts = [0.0] * HOURS_OF_WEEK
    >>> counts[0] = 12.0
    >>> round(expected_rate_per_hour(counts, 7 * 86400, datetime(2026, 12, 7, 0, 30, tzinfo=UTC)), 2)
    4.05
    >>> expected_rate_per_hour([], 0.0, datetime(2026, 12, 7, tzinfo=UTC))
    1.0
    """
    if len(counts) != HOURS_OF_WEEK:
        counts = (0.0,) * HOURS_OF_WEEK
    observed_hours = max(0.0, observed_seconds) / 3600
    overall = (sum(counts) + UNKNOWN_FEED_PER_HOUR * UNKNOWN_FEED_WEIGHT_HOURS) / (
        observed_hours + UNKNOWN_FEED_WEIGHT_HOURS)
    bucket_hours = observed_hours / HOURS_OF_WEEK
    return (counts[hour_of_week(when)] + prior_hours * overall) / (bucket_hours + prior_hours)


def next_allowed_time(when: datetime, skip_hours: frozenset[int], skip_days: frozenset[str]) -> datetime:
    """The first instant at or after ``when`` outside RSS ``skipHours`` (GMT) and ``skipDays``.

    A feed that skips every hour of the week is ignored rather than never polled.

    >>> t = datetime(2026, 12, 7, 1, 30, tzinfo=UTC)
    >>> next_allowed_time(t, frozenset({1, 2}), frozenset()).isoformat()
    '2026-12-07T03:00:00+00:00'
    >>> next_allowed_time(t, frozenset(), frozenset({"Monday"})).isoformat()
    '2026-12-08T00:00:00+00:00'
    """
    current = when.astimezone(UTC)
    for _ in range(HOURS_OF_WEEK + 1):
        if current.hour not in skip_hours and DAY_NAMES[current.weekday()] not in skip_days:
            return current
        current = current.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return when


def decide_next_poll(
    state: PollState,
    response: PollResponse,
    now: datetime,
    *,
    floor_seconds: int,
    ceiling_seconds: int = CEILING_SECONDS,
    backstop_seconds: int | None = None,
) -> PollDecision:
    """The next poll time and the updated rate, error and validator fields for one feed.

    Rules, in order:

    * success: half the expected gap between items (from the hour-of-week rate at ``now`` and an
      hour later, whichever is busier), clamped to [floor, ceiling]; when the poll found new items
      the interval is at most half the previous one. ``max-age`` (or ``Expires``) and ``ttl`` are
      lower bounds, capped by the ceiling. ``skipHours``/``skipDays`` push the time past the skip.
    * failure: ``floor * 2**streak`` up to BACKOFF_CAP_SECONDS; from PARK_AFTER_FAILURES failures in
      a row (or at once on 410 Gone), the feed is parked and re-probed every PARK_REPROBE_SECONDS.
    * ``Retry-After`` on 429/503 (RFC 9110 §10.2.3) is a lower bound on either, capped at a day.
    * validators: a 200 with changed validators and no new guid after we sent them, three times in a
      row, marks them useless, and the caller stops sending them.
    * ``backstop_seconds`` (given while a WebSub lease is live, issue 3): the hub pushes new items,
      so a healthy feed's poll is only a backstop and is relaxed to at least this long (capped by
      the ceiling). Failures keep their backoff.

    Raises:
        ValueError: the floor is not positive or the ceiling is below it, the backstop is not
            positive, or ``now`` is naive.
    """
    if floor_seconds <= 0 or ceiling_seconds < floor_seconds:
        raise ValueError("need 0 < floor_seconds <= ceiling_seconds")
    if backstop_seconds is not None and backstop_seconds <= 0:
        raise ValueError("backstop_seconds must be positive")
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    counts, observed = _updated_rate(state, response, now)
    streak = state.error_streak + 1 if response.is_error else 0
    miss_streak, useless = _validator_verdict(state, response)
    parked_reason: str | None = None
    reason: Reason
    if response.is_error:
        interval, reason, parked_reason = _failure_interval(response, streak, floor_seconds)
    else:
        interval, reason = _success_interval(state, response, counts, observed, now, floor_seconds=floor_seconds,
                                             ceiling_seconds=ceiling_seconds, backstop_seconds=backstop_seconds)
    retry_after = parse_retry_after(response.retry_after, now) if response.status in (429, 503) else None
    if retry_after is not None:
        capped = min(retry_after, RETRY_AFTER_CAP_SECONDS)
        if capped > interval:
            interval, reason = capped, "retry_after"
    interval = max(floor_seconds, interval)
    at = now + timedelta(seconds=interval)
    if not response.is_error:
        allowed = next_allowed_time(at, response.skip_hours, response.skip_days)
        if allowed > at:
            at, reason = allowed, "skip_hours"
            interval = int((at - now).total_seconds())
    return PollDecision(
        interval_seconds=interval, next_poll_at=at, reason=reason, rate_counts=counts,
        rate_observed_seconds=observed, error_streak=streak, is_parked=parked_reason is not None,
        parked_reason=parked_reason, validator_miss_streak=miss_streak, is_validators_useless=useless,
    )


def _failure_interval(response: PollResponse, streak: int, floor_seconds: int) -> tuple[int, Reason, str | None]:
    """A failed poll's interval, reason and why the feed is parked (None: it is not): 410 Gone parks
    it at once, PARK_AFTER_FAILURES failures in a row park it, anything less backs off exponentially."""
    if response.status == 410:
        return PARK_REPROBE_SECONDS, "gone", "HTTP 410 Gone"
    if streak >= PARK_AFTER_FAILURES:
        return PARK_REPROBE_SECONDS, "parked", f"{streak} failures in a row"
    return min(BACKOFF_CAP_SECONDS, floor_seconds * 2 ** min(streak, 20)), "backoff", None


def _success_interval(state: PollState, response: PollResponse, counts: Sequence[float], observed: float,
                      now: datetime, *, floor_seconds: int, ceiling_seconds: int,
                      backstop_seconds: int | None) -> tuple[int, Reason]:
    """A successful poll's interval and reason: half the expected gap between items, at most half the
    last interval when items were new, clamped to [floor, ceiling]; then the WebSub backstop and the
    server's freshness hints and ``ttl`` as lower bounds, each capped by the ceiling."""
    previous = state.interval_seconds or ceiling_seconds
    rate = max(expected_rate_per_hour(counts, observed, now),
               expected_rate_per_hour(counts, observed, now + timedelta(hours=1)))
    interval: int = int(3600 / rate / 2)
    reason: Reason = "rate"
    if response.new_item_times and interval > previous // 2:
        interval, reason = previous // 2, "new_items"
    interval = min(ceiling_seconds, max(floor_seconds, interval))
    if backstop_seconds is not None and min(backstop_seconds, ceiling_seconds) > interval:
        interval, reason = min(backstop_seconds, ceiling_seconds), "websub_backstop"
    hints: list[tuple[int | None, Reason]] = [
        *_freshness_hint(response.cache_control, response.expires, now),
        (response.ttl_minutes * 60 if response.ttl_minutes else None, "ttl"),
    ]
    for hint, hint_reason in hints:
        if hint is not None and min(hint, ceiling_seconds) > interval:
            interval, reason = min(hint, ceiling_seconds), hint_reason
    return interval, reason


def _updated_rate(state: PollState, response: PollResponse, now: datetime) -> tuple[tuple[float, ...], float]:
    """Decay by the time since the last poll, then count the new items (unless the poll failed)."""
    if state.last_polled_at is None:
        # First poll: the document's own history is the observation window (bounded).
        if response.is_error or response.oldest_item_at is None:
            elapsed = 0.0
        else:
            elapsed = min(BOOTSTRAP_MAX_SECONDS, max(0.0, (now - response.oldest_item_at).total_seconds()))
        since = now - timedelta(seconds=elapsed)
    else:
        elapsed = max(0.0, (now - state.last_polled_at).total_seconds())
        since = state.last_polled_at
    if response.is_error:
        return tuple(state.rate_counts), state.rate_observed_seconds
    counts, observed = decay_rate(state.rate_counts, state.rate_observed_seconds, elapsed)
    # A publisher date inside the window places the item; a missing, future or stale one
    # (garbage dates) counts it now, when we saw it.
    times = [t if t is not None and since <= t <= now else now for t in response.new_item_times]
    return add_items(counts, times), observed


def _validator_verdict(state: PollState, response: PollResponse) -> tuple[int, bool]:
    if state.is_validators_useless:
        return state.validator_miss_streak, True
    if response.status is not None and 200 <= response.status < 300 and response.sent_validators:
        if response.validators_changed and not response.new_item_times:
            streak = state.validator_miss_streak + 1
            return streak, streak >= USELESS_VALIDATOR_POLLS
        return 0, False
    if response.status == 304:
        return 0, False
    return state.validator_miss_streak, False
