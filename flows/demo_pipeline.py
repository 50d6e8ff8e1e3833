"""The live demo's pipeline process: register the replay publishers, then run the cycles under Prefect.

``newsroom demo`` starts this module as a child (through :mod:`flows.lifeline`, so it dies with
the demo) next to the temporary Prefect server, the replay site and the API, and reads its
progress as JSON lines on a pipe (``--events-fd``); its own log goes to a file, so Prefect's
output never garbles the demo's terminal. Events, in order:

- ``{"event": "registered", "publishers": N, "feeds": M}``
- ``{"event": "ready", "seconds": S}``: imports done, models loaded, the Prefect API answers
- ``{"event": "cycle", "cycle": i, "cycles": n, "now": ISO, "seconds": S, <counts>}`` per cycle, or
  ``{"event": "cycle_failed", "cycle": i, "error": "..."}`` (the next cycle still runs)
- ``{"event": "done"}`` after the last cycle; then the profiles flow folds readers' clicks every
  minute and the health flow refreshes the dashboards every five, until the demo stops it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypedDict

from newsroom.times import parse_iso

if TYPE_CHECKING:
    from flows.cycle import CycleSummary

FOLD_EVERY_SECONDS = 60
HEALTH_EVERY_SECONDS = 300


class PipelineEvent(TypedDict, total=False):
    """One JSON line the pipeline process writes to the demo: ``event`` names it, the rest depends on it
    (``registered``: publishers, feeds; ``ready``: seconds; ``cycle``: cycle, cycles, now, seconds and
    :func:`cycle_counts`; ``cycle_failed``: cycle, cycles, now, error; ``done``: nothing more)."""

    event: str
    publishers: int
    feeds: int
    seconds: float
    cycle: int
    cycles: int
    now: str
    error: str
    polled: int
    new_articles: int
    clustered: int
    repaired: int
    pages: int
    published: int
    stories: int


def cycle_counts(summary: CycleSummary) -> dict[str, int]:
    """The counts one cycle line shows, from ``pipeline_cycle``'s summary."""
    ingest, rank = summary.get("ingest") or {}, summary.get("rank") or {}
    return {
        "polled": int(ingest.get("feeds_polled", 0)),
        "new_articles": int(ingest.get("new_articles", 0)),
        "clustered": sum(int(s.get("articles", 0)) for s in summary.get("cluster") or []),
        "repaired": sum(int(s.get("merge", 0)) + int(s.get("split", 0)) for s in summary.get("repair") or []),
        "pages": int(rank.get("pages", 0)),
        "published": len(rank.get("published") or []),
        "stories": int(rank.get("stories", 0)),
    }


def wait_for_prefect(api_url: str, timeout_seconds: float) -> None:
    """Block until the Prefect API answers its health check."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=2) as response:  # noqa: S310 (loopback)
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the Prefect API at {api_url} did not answer within {timeout_seconds:.0f} s")
        time.sleep(0.25)


class _Events:
    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def emit(self, event: str, **fields: Any) -> None:
        self._stream.write(json.dumps({"event": event, **fields}) + "\n")
        self._stream.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.demo_pipeline")
    parser.add_argument("--events-fd", type=int, required=True)
    parser.add_argument("--control-url", required=True, help="the replay site's control host")
    parser.add_argument("--start", required=True, help="simulated instant before the first cycle (ISO)")
    parser.add_argument("--step-minutes", type=int, required=True)
    parser.add_argument("--cycles", type=int, required=True)
    parser.add_argument("--csv", required=True, help="where to save the replay site's publishers")
    parser.add_argument("--prefect-timeout", type=float, default=300)
    args = parser.parse_args(argv)
    started = time.monotonic()
    events = _Events(os.fdopen(args.events_fd, "w", encoding="utf-8"))

    from tasks.registry import import_publishers
    from tasks.replay_control import download_publishers_csv, set_replay_clock
    from tasks.storage import configured_store

    registry = import_publishers(configured_store(), download_publishers_csv(args.control_url, Path(args.csv))).registry
    events.emit("registered", publishers=len(registry.publishers), feeds=len(registry.feeds))

    # The heavy imports and the sentence-embedding model load while the Prefect server starts.
    from flows.cycle import pipeline_cycle
    from flows.health import check_health
    from flows.profiles import fold_profiles
    from tasks.warmup import warm_up_pipeline

    warm_up_pipeline()
    wait_for_prefect(os.environ["PREFECT_API_URL"].rstrip("/"), args.prefect_timeout)
    events.emit("ready", seconds=round(time.monotonic() - started, 1))

    start = parse_iso(args.start, naive="utc")
    step = timedelta(minutes=args.step_minutes)
    for i in range(1, args.cycles + 1):
        now = start + step * i
        began = time.monotonic()
        set_replay_clock(args.control_url, now)
        try:
            summary = pipeline_cycle(now=now.isoformat())
        except Exception as e:  # noqa: BLE001 - a failed cycle is reported; the next one still runs
            events.emit("cycle_failed", cycle=i, cycles=args.cycles, now=now.isoformat(),
                        error=f"{type(e).__name__}: {e}"[:500])
            continue
        events.emit("cycle", cycle=i, cycles=args.cycles, now=now.isoformat(),
                    seconds=round(time.monotonic() - began, 1), **cycle_counts(summary))
    end = start + step * args.cycles
    check_health(now=end.isoformat())
    events.emit("done")
    next_fold = next_health = time.monotonic()
    while True:
        if time.monotonic() >= next_fold:
            fold_profiles()
            next_fold = time.monotonic() + FOLD_EVERY_SECONDS
        if time.monotonic() >= next_health:
            check_health(now=end.isoformat())
            next_health = time.monotonic() + HEALTH_EVERY_SECONDS
        time.sleep(1)


if __name__ == "__main__":
    raise SystemExit(main())
