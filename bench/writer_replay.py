"""The long-running writer at the seeds' English peak: writer lag over a replay (issue 15).

    taskset -c 0,1 .venv/bin/python -m bench.writer_replay [--stories 150000] [--rate 100] \\
        [--minutes 30] [--segment-seconds 5] [--quick]

Builds a window of ``--stories`` active stories (bench/writer_world.py) and stores it as a
writer's base. Then, in real time, a publisher process writes an article segment every
``--segment-seconds`` holding the articles first seen in that interval at ``--rate`` articles a
second (10% copies, 55% follow-ups, 35% new stories), for ``--minutes``; meanwhile this process
runs the long-running writer (``tasks.writer.service.serve_language_writers``: the state kept in
memory, each batch committed through the fence, the chain folded in a background thread every 30
deltas, repairs every 10 minutes). Lag is per segment: from the publisher's write to the commit
of the batch that consumed it. Reports p50, p95 and max lag, batches, articles, bytes written,
and the CPU seconds of each process.

``--quick``: 10,000 stories, 3 minutes at 100 articles a second.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import pickle
import resource
import shutil
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.harness import load_average
from bench.writer_world import T_START, World, article_row
from tasks.repair import repair_language
from tasks.writer.service import serve_language_writers
from tasks.writer.session import WriterSession, commit
from warehouse import layout
from warehouse.schemas import ARTICLES_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import rows_to_table, write_segment


def _publish(root: str, world_path: str, landed_path: str, rate: float, seconds: float, every: float,
             start_wall: float) -> None:
    """The publisher process: a segment of the interval's articles every ``every`` seconds."""
    with open(world_path, "rb") as fh:
        world: World = pickle.load(fh)
    store = LocalStore(Path(root))
    per_segment = max(1, round(rate * every))
    with open(landed_path, "a", encoding="utf-8") as landed:
        tick = 0
        while tick * every < seconds:
            due = start_wall + (tick + 1) * every
            time.sleep(max(0.0, due - time.time()))
            at = T_START + timedelta(seconds=tick * every)
            articles = world.minute(at, per_segment)  # spread over ``every`` seconds below
            rows = [article_row(f) for f in articles]
            for i, row in enumerate(rows):
                row["first_seen_at"] = at + timedelta(seconds=every * i / len(rows))
            key = layout.article_segment_key(at, f"tick{tick:06d}")
            write_segment(store, key, rows_to_table(rows, ARTICLES_SCHEMA), ARTICLES_SCHEMA)
            landed.write(json.dumps({"key": key, "at": time.time(), "articles": len(rows)}) + "\n")
            landed.flush()
            tick += 1
    print(json.dumps({"publisher_cpu_seconds": time.process_time()}), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=150_000)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--segment-seconds", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--work", type=Path, default=Path("/tmp/newsroom-writer-replay"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.stories, args.minutes = 10_000, 3.0
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    store = LocalStore(args.work / "store")
    started = time.perf_counter()
    world = World(args.seed)
    clusterer = world.window(args.stories)
    commit(WriterSession.fresh(store, "en", clusterer), [], T_START)
    del clusterer
    with (args.work / "world.pkl").open("wb") as fh:
        pickle.dump(world, fh)
    print(f"window of {args.stories:,} stories stored in {time.perf_counter() - started:.0f} s; replaying "
          f"{args.minutes:g} minutes at {args.rate:g} articles/s", flush=True)
    landed_path = args.work / "landed.jsonl"
    landed_path.touch()
    seconds = args.minutes * 60
    start_wall = time.time()
    publisher = multiprocessing.get_context("spawn").Process(
        target=_publish, args=(str(args.work / "store"), str(args.work / "world.pkl"), str(landed_path), args.rate,
                               seconds, args.segment_seconds, start_wall))
    publisher.start()
    landed: dict[str, float] = {}

    def landed_at(key: str) -> float | None:
        if key not in landed:
            for line in landed_path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                landed[row["key"]] = row["at"]
        return landed.get(key)

    total_segments = int(seconds // args.segment_seconds + (seconds % args.segment_seconds > 0))

    def until() -> bool:
        if publisher.is_alive():
            return False
        landed_at("")
        return len(report_lags) >= len(landed) or time.time() > start_wall + seconds + 600

    def clock() -> Any:
        return T_START + timedelta(seconds=time.time() - start_wall)

    report_lags: list[float] = []

    def on_batch(summary: dict[str, Any], report: Any) -> None:
        report_lags[:] = report.lags
        if len(report.batches) % 20 == 0:
            totals = report.totals()
            print(f"  {time.time() - start_wall:6.0f} s  batches {totals['batches']}  articles {totals['articles']}  "
                  f"lag p95 {totals['lag_p95_seconds']:.1f} s  load {load_average()[0]:.1f}", flush=True)

    cpu = time.process_time()
    report = serve_language_writers(store, ["en"], clock=clock, until=until, poll_seconds=1.0,
                                    landed_at=landed_at, repair=repair_language, on_batch=on_batch)
    writer_cpu = time.process_time() - cpu
    publisher.join()
    totals = report.totals()
    result = {"stories": args.stories, "rate": args.rate, "minutes": args.minutes, "segments": total_segments,
              **totals, "writer_cpu_seconds": round(writer_cpu, 1),
              "writer_peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
              "load_average": load_average()}
    print(json.dumps(result, indent=1))
    if args.output is not None:
        args.output.write_text(json.dumps(result, indent=1))
    shutil.rmtree(args.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
