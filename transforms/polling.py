"""When to poll a feed next: a pure function of its state, the response and ``now``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

ERROR_BACKOFF_CAP_SECONDS = 6 * 3600


@dataclass(frozen=True, slots=True)
class PollOutcome:
    status: int | None  # None: no HTTP response (timeout, DNS, refused)
    new_items: int
    is_error: bool
    retry_after: str | None = None
    cache_control: str | None = None
    ttl_minutes: int | None = None


def parse_retry_after(value: str | None, now: datetime) -> int | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date), RFC 9110 §10.2.3.

    >>> from datetime import UTC
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
    if value.isdigit():
        return int(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0, int((when - now).total_seconds()))


def parse_max_age(cache_control: str | None) -> int | None:
    """``max-age`` from Cache-Control, ignored when ``no-cache``/``no-store`` is present."""
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


def next_poll_interval(
    previous_seconds: int,
    outcome: PollOutcome,
    error_streak: int,
    now: datetime,
    *,
    floor_seconds: int,
    ceiling_seconds: int,
) -> int:
    """Seconds until the next poll.

    New items pull the interval down to the floor; quiet polls stretch it by half up to the ceiling.
    Failures back off exponentially from the floor (``error_streak`` counts this failure). Server
    hints (Retry-After, Cache-Control max-age, RSS ttl) are lower bounds, capped for max-age and ttl
    by the ceiling.
    """
    if floor_seconds <= 0 or ceiling_seconds < floor_seconds:
        raise ValueError("need 0 < floor_seconds <= ceiling_seconds")
    if outcome.is_error:
        interval = min(ERROR_BACKOFF_CAP_SECONDS, floor_seconds * 2 ** min(error_streak, 16))
    elif outcome.new_items > 0:
        interval = floor_seconds
    else:
        interval = min(ceiling_seconds, max(floor_seconds, int(previous_seconds * 1.5)))
    hints = [parse_max_age(outcome.cache_control)]
    if outcome.ttl_minutes:
        hints.append(outcome.ttl_minutes * 60)
    for hint in hints:
        if hint is not None:
            interval = max(interval, min(hint, ceiling_seconds))
    retry_after = parse_retry_after(outcome.retry_after, now)
    if retry_after is not None and outcome.status in (429, 503):
        interval = max(interval, min(retry_after, ERROR_BACKOFF_CAP_SECONDS))
    return max(floor_seconds, interval)


def next_poll_at(now: datetime, interval_seconds: int) -> datetime:
    return now + timedelta(seconds=interval_seconds)
