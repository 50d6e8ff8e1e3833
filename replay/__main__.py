"""Command line: ``python -m replay --corpus A.jsonl [--corpus B.jsonl] --port P --seed 7 --start ISO``.

Prints one line ``replay listening control=http://127.0.0.1:P publishers=N`` once every host is
bound, then serves until SIGINT or SIGTERM. ``--synthetic-hosts N`` serves the synthetic farm of
``replay.synthetic`` instead (no corpus; the line then ends ``feeds=M``).
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
from replay.synthetic import SyntheticSite

DEFAULT_START = "2026-12-02T06:00:00Z"


def _utc(value: str) -> datetime:
    when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{value!r} needs a UTC offset or Z")
    return when.astimezone(UTC)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m replay", description="Serve a corpus as local publishers.")
    parser.add_argument("--corpus", action="append", type=Path,
                        help="clustering JSONL file; repeat for several (required unless --synthetic-hosts)")
    parser.add_argument("--synthetic-hosts", type=int, default=0, help="serve a synthetic farm of this many hosts")
    parser.add_argument("--feeds-per-host", type=int, default=25)
    parser.add_argument("--changed-share", type=float, default=0.2, help="share of feeds changing on every request")
    parser.add_argument("--items-per-feed", type=int, default=20)
    parser.add_argument("--port", type=int, default=0, help="port shared by every host (0 picks one)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start", type=_utc, default=_utc(DEFAULT_START), help="simulated start time (ISO, UTC)")
    parser.add_argument("--span-hours", type=float, default=6.0, help="events start spread over this long")
    parser.add_argument("--speed", type=float, default=None,
                        help="simulated seconds per wall second; default is a manual clock set via POST")
    parser.add_argument("--limit", type=int, default=None, help="use at most this many corpus articles")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    if not args.corpus and not args.synthetic_hosts:
        parser.error("--corpus is required (or --synthetic-hosts)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    site: ReplaySite | SyntheticSite
    if args.synthetic_hosts:
        site = SyntheticSite(hosts=args.synthetic_hosts, feeds_per_host=args.feeds_per_host,
                             changed_share=args.changed_share, items_per_feed=args.items_per_feed, seed=args.seed)
        site.start(port=args.port)
        line = f"replay listening control={site.control_url} feeds={len(site.feed_urls())}\n"
    else:
        site = ReplaySite.from_corpora(args.corpus, seed=args.seed, start=args.start, span_hours=args.span_hours,
                                       limit=args.limit, speed=args.speed)
        site.start(port=args.port)
        line = f"replay listening control={site.control_url} publishers={len(site.publishers)}\n"
    try:
        sys.stdout.write(line)
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
    finally:
        site.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
