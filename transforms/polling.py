"""When to poll a feed next: a pure function of its state, the poll's response and ``now``.

The interval aims at about half the expected gap between a feed's items, read from a decayed count
of items per hour of the week, so a feed is polled more often at the hours it publishes. Server hints
(``Retry-After``, ``Cache-Control: max-age``, ``Expires``, RSS ``ttl``, ``skipHours``/``skipDays``)
are honoured; failures back off exponentially and a feed that keeps failing is parked and re-probed
slowly. Nothing here reads a clock: ``now`` is an argument (STYLE §1).

The poll outcome is decided here too (:func:`settle_poll`): which items are new (guid
bookkeeping), which validators are kept and sent back (RFC 9110 §8.8, §13.1), and what is an
error and what a warning. ``tasks/ingest/poll.py`` only does the request and the parse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Literal

from transforms.feeds import FeedItem, ParsedFeed, is_plausible_published_at
from transforms.records import FeedState
from transforms.websub import is_lease_live

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
RECENT_GUIDS = 200
"""Guids a feed's state remembers (newest first): an item seen among them is not new."""
VALIDATOR_MAX_CHARS = 256
"""Longest ETag / Last-Modified kept and sent back; real ones are a few dozen characters."""
ERROR_MAX_CHARS = 500

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


# --- the poll outcome ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FeedReport:
    """One feed's poll in a run: the summary line, the run report's failures, WebSub upkeep."""

    feed_id: str
    url: str
    status: int | None
    new_items: int
    error_kind: str | None
    error: str | None
    next_poll_at: datetime
    elapsed_ms: float
    interval_seconds: int = 0
    poll_reason: str = ""
    warning_kind: str | None = None
    warning: str | None = None
    is_parked: bool = False
    hub_url: str | None = None
    topic_url: str | None = None
    sent_validators: bool = False
    """The poll sent If-None-Match or If-Modified-Since (a conditional GET, RFC 9110 section 13)."""


@dataclass(frozen=True, slots=True)
class PollExchange:
    """What one conditional GET of a feed gave, as the fetching task saw it.

    ``status`` is None when no response came; ``parsed`` is the parsed body of a 2xx; ``error_kind``
    names a failure of the request or of the parse (``timeout``, ``rejected``, ``parse``, ...).
    ``headers`` are the response's, with lower-case names.
    """

    status: int | None
    headers: Mapping[str, str] = field(default_factory=dict)
    parsed: ParsedFeed | None = None
    error_kind: str | None = None
    error: str | None = None
    elapsed_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class PollOutcome:
    """A feed's next state, the items new to it (in feed order) and the poll's report."""

    state: FeedState
    new_items: tuple[FeedItem, ...]
    report: FeedReport


def clean_validator(value: object) -> str | None:
    """``value`` if it can be stored and sent back as ``If-None-Match``/``If-Modified-Since``, else None.

    Only printable ASCII (visible characters and spaces, RFC 9110 §8.8.3 ``etagc`` and §5.6.7
    HTTP-date) of at most :data:`VALIDATOR_MAX_CHARS` characters is kept: httpx refuses to encode
    anything else, and a stored one would then fail every later poll of the feed.

    >>> clean_validator('W/"v1"'), clean_validator('"caf\\u00e9"'), clean_validator("a\\r\\nb")
    ('W/"v1"', None, None)
    """
    if not isinstance(value, str) or len(value) > VALIDATOR_MAX_CHARS or not value.strip():
        return None
    return value if value.isascii() and value.isprintable() else None


def with_sendable_validators(state: FeedState) -> FeedState:
    """``state`` without a stored validator that cannot be sent back (stored before they were
    checked): dropped whatever the poll brings, so it can never fail the request."""
    etag, last_modified = clean_validator(state.etag), clean_validator(state.last_modified)
    if (etag, last_modified) == (state.etag, state.last_modified):
        return state
    return replace(state, etag=etag, last_modified=last_modified)


def conditional_headers(state: FeedState) -> dict[str, str]:
    """``If-None-Match`` / ``If-Modified-Since`` for a feed's next poll (RFC 9110 §13.1), unless its
    validators proved useless.

    >>> conditional_headers(FeedState("f", etag='"v1"'))
    {'If-None-Match': '"v1"'}
    """
    state = with_sendable_validators(state)
    headers = {}
    if not state.is_validators_useless:
        if state.etag:
            headers["If-None-Match"] = state.etag
        if state.last_modified:
            headers["If-Modified-Since"] = state.last_modified
    return headers


def poll_state_of(state: FeedState) -> PollState:
    """What :func:`decide_next_poll` needs of a stored state."""
    return PollState(
        interval_seconds=state.interval_seconds, last_polled_at=state.last_polled_at,
        rate_counts=tuple(state.rate_counts), rate_observed_seconds=float(state.rate_observed_seconds),
        error_streak=int(state.error_streak), validator_miss_streak=int(state.validator_miss_streak),
        is_validators_useless=bool(state.is_validators_useless),
    )


def bad_date_count(items: Sequence[FeedItem], now: datetime) -> int:
    """Items with no usable date: none at all, or an implausible published one."""
    return sum(1 for i in items if i.published_at is None and i.updated_at is None
               or (i.published_at is not None and not is_plausible_published_at(i.published_at, now)))


def _new_items(state: FeedState, parsed: ParsedFeed, max_items: int) -> tuple[list[FeedItem], list[FeedItem], tuple[str, ...]]:
    """(fresh items, those taken this poll, the guids to remember): at most ``max_items`` are taken
    and only they, with the items already seen, are marked seen, newest first."""
    seen = set(state.recent_guids)
    fresh = [item for item in parsed.items if item.guid not in seen]
    taken_items = fresh[:max_items]
    taken = {item.guid for item in taken_items}
    marked = [item.guid for item in parsed.items if item.guid in seen or item.guid in taken]
    kept = set(marked)
    recent = (marked + [g for g in state.recent_guids if g not in kept])[:RECENT_GUIDS]
    return fresh, taken_items, tuple(recent)


def settle_poll(state: FeedState, exchange: PollExchange, now: datetime, *, feed_url: str, max_items: int,
                floor_seconds: int, ceiling_seconds: int, backstop_seconds: int | None = None) -> PollOutcome:
    """The outcome of one conditional GET: the feed's next state, its new items and the report.

    * Guids: items not among the state's ``recent_guids`` are new; at most ``max_items`` are taken,
      and the rest are not marked seen, so the next poll gets them.
    * Validators change only on 2xx (RFC 9110 §8.8); a response without ``Last-Modified`` keeps the
      old one, one sent but unusable (non-ASCII, too long) clears it, and while items are left over
      the old ones stay, so no 304 hides them.
    * An error is a failed request, a non-2xx other than 304, or a body that is no usable feed; a
      usable but flawed feed (broken XML, garbage dates) is a ``warning`` and is ingested.
    * The feed's WebSub hub (``link rel=hub``) and topic (``rel=self``) are read from a usable 2xx
      only; while a lease is live the next poll is a backstop, at least ``backstop_seconds`` away.
    """
    state = with_sendable_validators(state)
    sent_validators = bool(conditional_headers(state))
    parsed = exchange.parsed
    read = _read_answer(state, exchange, now, max_items=max_items, sent_validators=sent_validators)
    changes = dict(read.changes)
    hub_url = changes.get("hub_url", state.hub_url)
    is_live = bool(hub_url) and is_lease_live(state.lease_expires_at, now)
    decision = decide_next_poll(poll_state_of(state), _poll_response(exchange, read, now, sent_validators), now,
                                floor_seconds=floor_seconds, ceiling_seconds=max(floor_seconds, ceiling_seconds),
                                backstop_seconds=backstop_seconds if is_live else None)
    changes.update(
        last_polled_at=now, last_status=exchange.status, interval_seconds=decision.interval_seconds,
        next_poll_at=decision.next_poll_at, poll_reason=decision.reason, last_new_items=len(read.new),
        error_streak=decision.error_streak, rate_counts=decision.rate_counts,
        rate_observed_seconds=decision.rate_observed_seconds,
        validator_miss_streak=decision.validator_miss_streak, is_validators_useless=decision.is_validators_useless,
        is_parked=decision.is_parked, parked_reason=decision.parked_reason,
    )
    if read.error_kind or read.warning_kind:
        changes.update(last_error_kind=read.error_kind or read.warning_kind, last_error=read.error or read.warning,
                       last_error_at=now)
    if parsed is not None and (bool(parsed.items) or not parsed.is_malformed):
        changes["topic_url"] = parsed.self_url or feed_url  # the WebSub topic (rel=self), read with hub_url
    # A 304 (or an error) says nothing new of rel=hub or rel=self: the ones last read stand.
    state = replace(state, **changes)  # type: ignore[arg-type]
    report = FeedReport(state.feed_id, feed_url, exchange.status, len(read.new), read.error_kind, read.error,
                        decision.next_poll_at, exchange.elapsed_ms, decision.interval_seconds, decision.reason,
                        read.warning_kind, read.warning, decision.is_parked, hub_url=state.hub_url,
                        topic_url=state.topic_url or feed_url, sent_validators=sent_validators)
    return PollOutcome(state, read.new, report)


@dataclass(frozen=True, slots=True)
class _AnswerRead:
    """What a poll's answer says of the feed, its schedule aside: the items new to it, the state's
    changes (hub, guids, validators), and its error or warning."""

    new: tuple[FeedItem, ...] = ()
    changes: Mapping[str, object] = field(default_factory=dict)
    validators_changed: bool = False
    error_kind: str | None = None
    error: str | None = None
    warning_kind: str | None = None
    warning: str | None = None


def _read_answer(state: FeedState, exchange: PollExchange, now: datetime, *, max_items: int,
                 sent_validators: bool) -> _AnswerRead:
    """:func:`settle_poll`'s reading of the answer: a failed request keeps its error, a non-2xx but
    304 is an ``http_status`` error, a 2xx body with no items and broken XML a ``parse`` error; a
    usable body gives its new items and validators, with a warning when it is flawed."""
    status, headers, parsed = exchange.status, exchange.headers, exchange.parsed
    if exchange.error_kind is not None:
        return _AnswerRead(error_kind=exchange.error_kind, error=exchange.error)
    if status is None or not 200 <= status < 300 or parsed is None:
        if status == 304:
            return _AnswerRead()
        return _AnswerRead(error_kind="http_status", error=f"HTTP {status}" + (
            f" (Retry-After: {headers['retry-after']})" if "retry-after" in headers else ""))
    changes: dict[str, object] = {}
    if parsed.items or not parsed.is_malformed:
        changes["hub_url"] = parsed.hub_url
    if parsed.is_malformed and not parsed.items:
        return _AnswerRead(changes=changes, error_kind="parse", error=f"not a usable feed: {parsed.error or 'no items'}")
    fresh, new, changes["recent_guids"] = _new_items(state, parsed, max_items)
    raw_etag, raw_last_modified = headers.get("etag"), headers.get("last-modified")
    etag, last_modified = clean_validator(raw_etag), clean_validator(raw_last_modified)
    validators_changed = sent_validators and (
        bool(etag) and etag != state.etag or bool(last_modified) and last_modified != state.last_modified)
    if len(fresh) == len(new):
        changes["etag"] = etag if raw_etag else state.etag
        changes["last_modified"] = last_modified if raw_last_modified else state.last_modified
    warning_kind = warning = None
    bad_dates = bad_date_count(parsed.items, now)
    if parsed.is_malformed:
        warning_kind, warning = "malformed", f"feed used as is: {parsed.error}"
    elif bad_dates:
        warning_kind, warning = "bad_dates", f"{bad_dates} of {len(parsed.items)} items have no usable date"
    return _AnswerRead(tuple(new), changes, validators_changed, warning_kind=warning_kind, warning=warning)


def _poll_response(exchange: PollExchange, read: _AnswerRead, now: datetime, sent_validators: bool) -> PollResponse:
    """What :func:`decide_next_poll` needs of a poll: the answer's hints and the new items' dates.
    Implausible dates (1900, 9999) say nothing of the feed's rate (#16)."""
    parsed, headers = exchange.parsed, exchange.headers
    usable_times = tuple(i.published_at if i.published_at is not None
                         and is_plausible_published_at(i.published_at, now) else None for i in read.new)
    dated = [i.published_at for i in (parsed.items if parsed else ()) if i.published_at is not None
             and is_plausible_published_at(i.published_at, now)]
    return PollResponse(
        status=exchange.status, is_error=read.error_kind is not None, new_item_times=usable_times,
        oldest_item_at=min(dated) if dated else None,
        retry_after=headers.get("retry-after"), cache_control=headers.get("cache-control"),
        expires=headers.get("expires"), ttl_minutes=parsed.ttl_minutes if parsed else None,
        skip_hours=parsed.skip_hours if parsed else frozenset(), skip_days=parsed.skip_days if parsed else frozenset(),
        sent_validators=sent_validators, validators_changed=read.validators_changed,
    )


def settle_failed_poll(state: FeedState, kind: str, message: str, now: datetime, *, feed_url: str,
                       floor_seconds: int, ceiling_seconds: int) -> PollOutcome:
    """A poll that got no usable response (a crash on the feed's input, a host skipped for
    backing off), through the same decision as any other failure."""
    decision = decide_next_poll(poll_state_of(state), PollResponse(status=None, is_error=True), now,
                                floor_seconds=floor_seconds, ceiling_seconds=max(floor_seconds, ceiling_seconds))
    message = message[:ERROR_MAX_CHARS]
    state = replace(state, last_polled_at=now, last_status=None, error_streak=decision.error_streak,
                    next_poll_at=decision.next_poll_at, poll_reason=decision.reason,
                    interval_seconds=decision.interval_seconds, is_parked=decision.is_parked,
                    parked_reason=decision.parked_reason, last_new_items=0, last_error_kind=kind,
                    last_error=message, last_error_at=now)
    report = FeedReport(state.feed_id, feed_url, None, 0, kind, message, decision.next_poll_at, 0.0,
                        decision.interval_seconds, decision.reason, is_parked=decision.is_parked)
    return PollOutcome(state, (), report)


def forget_items(state: FeedState, guids: set[str]) -> FeedState:
    """``state`` with ``guids`` no longer seen and no validators, so the next poll takes those items
    again and a 304 cannot hide them (their pages failed for now: timeout, 429, 5xx)."""
    return replace(state, recent_guids=tuple(g for g in state.recent_guids if g not in guids),
                   etag=None, last_modified=None)
