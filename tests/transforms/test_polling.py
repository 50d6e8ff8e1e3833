"""The poll-interval decision: table-driven cases over (state, response, now)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from transforms.polling import (
    BACKOFF_CAP_SECONDS,
    CEILING_SECONDS,
    HOURS_OF_WEEK,
    PARK_AFTER_FAILURES,
    PARK_REPROBE_SECONDS,
    RETRY_AFTER_CAP_SECONDS,
    PollResponse,
    PollState,
    decide_next_poll,
    expected_rate_per_hour,
    floor_for_tier,
    hour_of_week,
)

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)  # a Wednesday
WEEK = 7 * 86400


def steady(per_hour: float, weeks: float = 4.0, **kw: object) -> PollState:
    """A feed seen for ``weeks`` publishing ``per_hour`` items every hour, last polled a minute ago."""
    return PollState(rate_counts=(per_hour * weeks,) * HOURS_OF_WEEK, rate_observed_seconds=weeks * WEEK,
                     last_polled_at=NOW - timedelta(minutes=1), interval_seconds=kw.pop("interval", 600),  # type: ignore[arg-type]
                     **kw)  # type: ignore[arg-type]


OK = PollResponse(status=200, is_error=False)
NOT_MODIFIED = PollResponse(status=304, is_error=False)

CASES = [
    # id, state, response, floor, expected interval, expected reason
    ("busy-feed-half-gap", steady(6), NOT_MODIFIED, 60, 300, "rate"),
    ("tier1-floor", steady(120), NOT_MODIFIED, 60, 60, "rate"),
    ("tier2-floor", steady(120), NOT_MODIFIED, 300, 300, "rate"),
    ("quiet-feed-ceiling", steady(0.1), NOT_MODIFIED, 60, CEILING_SECONDS, "rate"),
    ("silent-feed-ceiling", steady(0.0), NOT_MODIFIED, 60, CEILING_SECONDS, "rate"),
    ("never-polled-empty-feed", PollState(), OK, 300, 1800, "rate"),
    ("empty-for-a-day", PollState(rate_counts=(0.0,) * HOURS_OF_WEEK, rate_observed_seconds=86400,
                                  last_polled_at=NOW - timedelta(minutes=30)), NOT_MODIFIED, 300, CEILING_SECONDS, "rate"),
    ("new-items-halve-at-once", steady(0.5, interval=3600),
     PollResponse(200, False, new_item_times=(NOW,)), 60, 1800, "new_items"),
    ("ttl-is-a-lower-bound", steady(6), PollResponse(200, False, ttl_minutes=20), 60, 1200, "ttl"),
    ("ttl-capped-by-ceiling", steady(6), PollResponse(200, False, ttl_minutes=600), 60, CEILING_SECONDS, "ttl"),
    ("max-age", steady(6), PollResponse(304, False, cache_control="public, max-age=900"), 60, 900, "max_age"),
    ("no-cache-voids-max-age", steady(6), PollResponse(304, False, cache_control="no-cache, max-age=900"),
     60, 300, "rate"),
    ("expires-when-no-max-age", steady(6), PollResponse(304, False, expires="Wed, 02 Dec 2026 10:20:00 GMT"),
     60, 1200, "expires"),
    ("max-age-wins-over-expires", steady(6),
     PollResponse(304, False, cache_control="max-age=60", expires="Wed, 02 Dec 2026 10:20:00 GMT"), 60, 300, "rate"),
    ("first-failure-backs-off", steady(6), PollResponse(None, True), 60, 120, "backoff"),
    ("third-failure", steady(6, error_streak=2), PollResponse(500, True), 300, 2400, "backoff"),
    ("backoff-cap", steady(6, error_streak=6), PollResponse(500, True), 300, BACKOFF_CAP_SECONDS, "backoff"),
    ("parked-after-repeated-failures", steady(6, error_streak=PARK_AFTER_FAILURES - 1), PollResponse(None, True),
     60, PARK_REPROBE_SECONDS, "parked"),
    ("gone-parks-at-once", steady(6), PollResponse(410, True), 60, PARK_REPROBE_SECONDS, "gone"),
    ("429-retry-after", steady(6), PollResponse(429, True, retry_after="600"), 60, 600, "retry_after"),
    ("503-retry-after-date", steady(6), PollResponse(503, True, retry_after="Wed, 02 Dec 2026 11:00:00 GMT"),
     60, 3600, "retry_after"),
    ("retry-after-capped", steady(6), PollResponse(429, True, retry_after="9999999"), 60, RETRY_AFTER_CAP_SECONDS,
     "retry_after"),
    ("retry-after-ignored-on-500", steady(6), PollResponse(500, True, retry_after="600"), 60, 120, "backoff"),
    ("retry-after-below-backoff", steady(6, error_streak=3), PollResponse(429, True, retry_after="5"),
     60, 960, "backoff"),
    ("skip-hours", steady(6), PollResponse(200, False, skip_hours=frozenset({10, 11})), 60, 7200, "skip_hours"),
    ("skip-days", steady(6), PollResponse(200, False, skip_days=frozenset({"Wednesday"})), 60, 14 * 3600,
     "skip_hours"),
    ("skip-every-hour-is-ignored", steady(6), PollResponse(200, False, skip_hours=frozenset(range(24))),
     60, 300, "rate"),
]


@pytest.mark.parametrize(("state", "response", "floor", "interval", "reason"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_next_interval(state: PollState, response: PollResponse, floor: int, interval: int, reason: str) -> None:
    decision = decide_next_poll(state, response, NOW, floor_seconds=floor)
    assert (decision.interval_seconds, decision.reason) == (interval, reason)
    assert decision.next_poll_at == NOW + timedelta(seconds=interval)
    assert decision.is_parked == (reason in ("parked", "gone"))


def test_parked_reason_and_unparking() -> None:
    parked = decide_next_poll(steady(6, error_streak=PARK_AFTER_FAILURES - 1), PollResponse(None, True), NOW,
                              floor_seconds=60)
    assert parked.parked_reason == f"{PARK_AFTER_FAILURES} failures in a row"
    assert parked.error_streak == PARK_AFTER_FAILURES
    healthy = decide_next_poll(steady(6, error_streak=PARK_AFTER_FAILURES), NOT_MODIFIED, NOW, floor_seconds=60)
    assert not healthy.is_parked and healthy.error_streak == 0 and healthy.parked_reason is None


def test_the_busy_hours_of_the_week_get_shorter_intervals() -> None:
    counts = [0.1 * 4] * HOURS_OF_WEEK
    counts[hour_of_week(NOW)] = 20 * 4.0  # 20 items an hour on Wednesdays at 10:00, for four weeks
    state = PollState(rate_counts=tuple(counts), rate_observed_seconds=4 * WEEK, last_polled_at=NOW,
                      interval_seconds=600)
    busy = decide_next_poll(state, NOT_MODIFIED, NOW, floor_seconds=60)
    night = decide_next_poll(state, NOT_MODIFIED, NOW + timedelta(hours=12), floor_seconds=60)
    assert busy.interval_seconds < 180 < 1800 < night.interval_seconds
    an_hour_before = decide_next_poll(state, NOT_MODIFIED, NOW - timedelta(minutes=30), floor_seconds=60)
    assert an_hour_before.interval_seconds < 180, "the next hour's rate is anticipated"


@pytest.mark.parametrize(
    ("misses", "changed", "new", "status", "streak", "useless"),
    [(0, True, False, 200, 1, False), (2, True, False, 200, 3, True), (2, True, True, 200, 0, False),
     (2, False, False, 200, 0, False), (2, False, False, 304, 0, False), (2, False, False, 500, 2, False)],
    ids=["first-miss", "third-miss-useless", "new-items-reset", "same-validators-reset", "304-reset",
         "error-keeps"],
)
def test_validators_that_change_without_new_items_become_useless(
    misses: int, changed: bool, new: bool, status: int, streak: int, useless: bool
) -> None:
    response = PollResponse(status, status >= 400, new_item_times=(NOW,) if new else (), sent_validators=True,
                            validators_changed=changed)
    decision = decide_next_poll(steady(6, validator_miss_streak=misses), response, NOW, floor_seconds=60)
    assert (decision.validator_miss_streak, decision.is_validators_useless) == (streak, useless)


def test_first_poll_learns_the_rate_from_the_feeds_own_history() -> None:
    times = tuple(NOW - timedelta(minutes=10 * i) for i in range(1, 25))  # one item every 10 min for 4 h
    decision = decide_next_poll(PollState(), PollResponse(200, False, new_item_times=times, oldest_item_at=times[-1]),
                                NOW, floor_seconds=60)
    rate = expected_rate_per_hour(decision.rate_counts, decision.rate_observed_seconds, NOW)
    assert rate == pytest.approx(6.0, rel=0.1)
    assert 290 <= decision.interval_seconds <= 330 and decision.rate_observed_seconds == 4 * 3600


def test_garbage_and_future_dates_count_when_seen_and_errors_leave_the_rate_alone() -> None:
    state = steady(1.0)
    future = NOW + timedelta(days=400)
    decision = decide_next_poll(state, PollResponse(200, False, new_item_times=(None, future)), NOW, floor_seconds=60)
    added = decision.rate_counts[hour_of_week(NOW)] - state.rate_counts[hour_of_week(NOW)]
    assert added == pytest.approx(2.0, abs=0.01)
    failed = decide_next_poll(state, PollResponse(None, True), NOW, floor_seconds=60)
    assert (failed.rate_counts, failed.rate_observed_seconds) == (state.rate_counts, state.rate_observed_seconds)


def test_floor_for_tier_and_argument_checks() -> None:
    assert (floor_for_tier(1), floor_for_tier(2), floor_for_tier(3)) == (60, 300, 300)
    with pytest.raises(ValueError, match="floor"):
        decide_next_poll(PollState(), OK, NOW, floor_seconds=0)
    with pytest.raises(ValueError, match="floor"):
        decide_next_poll(PollState(), OK, NOW, floor_seconds=600, ceiling_seconds=60)
    with pytest.raises(ValueError, match="timezone"):
        decide_next_poll(PollState(), OK, NOW.replace(tzinfo=None), floor_seconds=60)


@pytest.mark.parametrize("value", ["Mon, 07 Dec 2026 12:00:00 GMT", "Mon Dec  7 12:00:00 2026"],
                         ids=["imf-fixdate", "asctime"])
def test_retry_after_in_every_http_date_form_is_honoured(value: str) -> None:
    """RFC 9110 §5.6.7: all three HTTP-date forms are accepted, asctime (no zone written) too."""
    now = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
    decision = decide_next_poll(PollState(), PollResponse(status=503, is_error=True, retry_after=value), now,
                                floor_seconds=300)
    assert decision.reason == "retry_after"
    assert decision.next_poll_at == datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
