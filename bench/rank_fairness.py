"""Fairness of representative choice over a replay day: Herfindahl index and top publisher share.

    .venv/bin/python -m bench.rank_fairness [--step-minutes 15] [--compare-uncapped]

A synthetic day (tests/rank_world.py: 24 publishers in US/GB/SG, stories appearing all day) is
written into a fresh local store with the warehouse code; rank & publish runs every
``--step-minutes``; representative impressions per edition are then counted from the day's
published top-page versions (story-slot minutes, the same count the 10% cap uses).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from tasks.rank.history import PageHistory
from tasks.rank.publish import publish_all
from tasks.settings import RankSettings
from tests.rank_world import day_world
from transforms.pages import impressions_from_versions
from warehouse.store import LocalStore


def run_day(settings: RankSettings, step: int, label: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(Path(tmp) / "store")
        _, day = day_world(store)
        t = time.perf_counter()
        cycles = 0
        for minute in range(step, 24 * 60 + 1, step):
            publish_all(store, day + timedelta(minutes=minute), settings)
            cycles += 1
        end = day + timedelta(hours=23, minutes=59, seconds=59)
        history = PageHistory(store)
        print(f"[{label}] {cycles} rank cycles every {step} min in {time.perf_counter() - t:.0f} s; "
              f"cap={settings.publisher_daily_share_cap:.0%}")
        print(f"[{label}] edition  impressions  publishers  HHI     top publisher (share)")
        for edition in sorted({e for e, s in history.pages() if s == "top"}):
            counts = impressions_from_versions(history.day_representatives(edition, end), end)
            total = sum(counts.values())
            shares = sorted(((c / total, p) for p, c in counts.items()), reverse=True)
            hhi = sum(s * s for s, _ in shares)
            print(f"[{label}] {edition:8} {total:11.0f}  {len(shares):10d}  {hhi:.4f}  {shares[0][1]} ({shares[0][0]:.2%})")


def main() -> None:
    parser = argparse.ArgumentParser(description="Herfindahl index of representative impressions per edition")
    parser.add_argument("--step-minutes", type=int, default=15)
    parser.add_argument("--compare-uncapped", action="store_true", help="also run the day with the cap off")
    args = parser.parse_args()
    # The cadence is a setting: smoothing looks back whole cycles, and a listing counts a cycle long.
    cadence = args.step_minutes * 60
    run_day(RankSettings(cycle_seconds=cadence), args.step_minutes, "capped")
    if args.compare_uncapped:
        run_day(RankSettings(cycle_seconds=cadence, publisher_daily_share_cap=1.0), args.step_minutes, "uncapped")


if __name__ == "__main__":
    main()
