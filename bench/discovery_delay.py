"""Discovery delay over a simulated day: how long after publication our polling finds an item.

Usage:
    .venv/bin/python -m bench.discovery_delay [--tier1 40] [--tier2 160] [--warmup-days 7] [--seed 7]

Feeds publish on a seeded schedule with realistic shapes: a daily curve (quiet at night, busy from
morning to evening, lighter at weekends) and bursts (an item brings a follow-up within minutes with
some probability, as live stories do). Tier-1 feeds (wires, big newsrooms) peak at 6-30 items an
hour, tier-2 at 0.3-4. Every poll goes through the product's decision function
(``transforms.polling.decide_next_poll``) with the tier floors of ``IngestSettings``; a poll sees the
items published since the previous one. The rate model learns during ``--warmup-days`` of the same
simulation; the day after is measured: discovery delay = poll time - publication time, and the
share of polls that found nothing, per tier. A fixed-interval poller at the tier floor is shown
for the request count it would cost.
"""

from __future__ import annotations

import argparse
import bisect
import math
import random
import statistics
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bench.harness import percentile
from transforms.polling import PollResponse, PollState, decide_next_poll, floor_for_tier

START = datetime(2026, 11, 23, 0, 0, tzinfo=UTC)  # a Monday
BURST_PROBABILITY = 0.3
BURST_MEAN_SECONDS = 240


@dataclass(frozen=True, slots=True)
class SimFeed:
    feed_id: str
    tier: int
    peak_per_hour: float
    times: list[datetime]


def daily_factor(when: datetime) -> float:
    """0.1 at night, up to 1.0 mid-afternoon (UTC), times 0.6 at weekends."""
    hour = when.hour + when.minute / 60
    day = max(0.0, math.sin(math.pi * (hour - 5) / 19)) if 5 <= hour <= 24 else 0.0
    return (0.1 + 0.9 * day) * (0.6 if when.weekday() >= 5 else 1.0)


def publish_times(rng: random.Random, peak_per_hour: float, start: datetime, end: datetime) -> list[datetime]:
    """A thinned Poisson process under the daily curve, plus follow-up bursts."""
    times: list[datetime] = []
    t = start
    while True:
        t += timedelta(seconds=rng.expovariate(peak_per_hour / 3600))
        if t >= end:
            break
        if rng.random() < daily_factor(t):
            times.append(t)
            follow = t
            while rng.random() < BURST_PROBABILITY:
                follow += timedelta(seconds=rng.expovariate(1 / BURST_MEAN_SECONDS))
                if follow < end:
                    times.append(follow)
    return sorted(times)


def simulate(feed: SimFeed, start: datetime, measure_from: datetime, end: datetime
             ) -> tuple[list[float], int, int, int]:
    """Poll one feed from ``start`` to ``end``; delays (s) of items published after ``measure_from``,
    polls and empty polls in the measured span, and the fixed-floor poll count for that span."""
    floor = floor_for_tier(feed.tier)
    state = PollState()
    now = start
    delays: list[float] = []
    polls = empty = 0
    seen_until = start - timedelta(days=2)
    while now < end:
        lo = bisect.bisect_right(feed.times, seen_until)
        hi = bisect.bisect_right(feed.times, now)
        new = feed.times[lo:hi]
        if now >= measure_from:
            polls += 1
            empty += not new
            delays += [(now - t).total_seconds() for t in new if t >= measure_from]
        visible = feed.times[max(0, hi - 50):hi]  # the document's window, for the first-poll bootstrap
        response = PollResponse(status=200 if new else 304, is_error=False, new_item_times=tuple(new),
                                oldest_item_at=visible[0] if visible else None)
        decision = decide_next_poll(state, response, now, floor_seconds=floor)
        state = PollState(interval_seconds=decision.interval_seconds, last_polled_at=now,
                          rate_counts=decision.rate_counts, rate_observed_seconds=decision.rate_observed_seconds)
        seen_until = now
        now = decision.next_poll_at
    fixed = int((end - measure_from).total_seconds() // floor)
    return delays, polls, empty, fixed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier1", type=int, default=40)
    parser.add_argument("--tier2", type=int, default=160)
    parser.add_argument("--warmup-days", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    measure_from = START + timedelta(days=args.warmup_days)
    end = measure_from + timedelta(days=1)
    feeds = [SimFeed(f"t1-{i}", 1, rng.uniform(6, 30), []) for i in range(args.tier1)]
    feeds += [SimFeed(f"t2-{i}", 2, rng.uniform(0.3, 4), []) for i in range(args.tier2)]
    for feed in feeds:
        feed.times.extend(publish_times(rng, feed.peak_per_hour, START - timedelta(days=2), end))
    print(f"simulated day {measure_from.date()} ({measure_from:%A}) after {args.warmup_days} warm-up days; "
          f"{args.tier1} tier-1 feeds (peak 6-30 items/h), {args.tier2} tier-2 feeds (peak 0.3-4 items/h), seed {args.seed}")
    print(f"{'tier':<5} {'items':>6} {'p50 delay':>10} {'p90 delay':>10} {'p99 delay':>10} {'polls':>7} "
          f"{'empty polls':>12} {'fixed-floor polls':>18}")
    for tier in (1, 2):
        delays: list[float] = []
        polls = empty = fixed = 0
        for feed in (f for f in feeds if f.tier == tier):
            d, p, e, x = simulate(feed, START, measure_from, end)
            delays += d
            polls, empty, fixed = polls + p, empty + e, fixed + x
        print(f"{tier:<5} {len(delays):>6} {statistics.median(delays):>9.0f}s {percentile(delays, 0.9):>9.0f}s "
              f"{percentile(delays, 0.99):>9.0f}s {polls:>7} {empty / polls:>11.1%} {fixed:>18}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
