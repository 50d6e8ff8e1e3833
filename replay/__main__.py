"""Command line: ``python -m replay --corpus A.jsonl [--corpus B.jsonl] --port P --seed 7 --start ISO``.

Prints one line ``replay listening control=http://127.0.0.1:P publishers=N`` once every host is
bound, then serves until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from replay.site import ReplaySite

DEFAULT_START = "2026-12-02T06:00:00Z"


def _utc(value: str) -> datetime:
    when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{value!r} needs a UTC offset or Z")
    return when.astimezone(UTC)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m replay", description="Serve a corpus as local publishers.")
    parser.add_argument("--corpus", action="append", required=True, type=Path,
                        help="clustering JSONL file; repeat for several")
    parser.add_argument("--port", type=int, default=0, help="port shared by every host (0 picks one)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start", type=_utc, default=_utc(DEFAULT_START), help="simulated start time (ISO, UTC)")
    parser.add_argument("--span-hours", type=float, default=6.0, help="events start spread over this long")
    parser.add_argument("--speed", type=float, default=None,
                        help="simulated seconds per wall second; default is a manual clock set via POST")
    parser.add_argument("--limit", type=int, default=None, help="use at most this many corpus articles")
    parser.add_argument("--log-level", default="WARNING")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    site = ReplaySite.from_corpora(args.corpus, seed=args.seed, start=args.start, span_hours=args.span_hours,
                                   limit=args.limit, speed=args.speed)
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    site.start(port=args.port)
    try:
        sys.stdout.write(f"replay listening control={site.control_url} publishers={len(site.publishers)}\n")
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
    finally:
        site.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
