"""CPU time of one repair pass (``repair_stories``) over a writer at the seeds' scale, for A/B runs
of two checkouts (issue 15).

    taskset -c 0,1 .venv/bin/python -m bench.repair_scale write --stories 150000 --minutes 10 WRITER
    taskset -c 0,1 .venv/bin/python -m bench.repair_scale time --code-root A WRITER   # then B, A, B ...
    taskset -c 0,1 .venv/bin/python -m bench.repair_scale assign --code-root A WRITER # then B, A, B ...

``write`` builds bench/writer_world.py's window of ``--stories`` active stories, assigns
``--minutes`` minutes of 6,000 new articles each (the seeds' English peak), and pickles the
writer, once (150,000 stories and 10 minutes take about 5 minutes). With 10 minutes of peak
arrivals, about 40,000 stories have an article in the repair's 6-hour lookback: the load the
writer's first repair meets in ``bench/writer_replay.py``.

``time`` loads that writer with the code under ``--code-root`` (a checkout, or a ``git archive``
of one), freezes it out of the garbage collector as the writer does, and runs one repair pass at
the end of the assigned minutes, printing its CPU time (``process_time``: on a shared machine,
wall time measures the share of a core the run was given), the stories in the lookback, the
repairs by kind and a digest of them, so two checkouts can be compared for speed and checked
for the same repairs in one run.

``assign`` times ``LanguageClusterer.assign`` over one more minute of ``--per-minute`` articles
on that writer instead (its CPU rate, and a digest of the placements and one of the scores;
``--dump`` writes both as JSON, to count the decisions two checkouts differ in): the
assignment rate at the window's size. The pickle holds the writer, not the world that fed it, so
the minute comes from a fresh world (``--seed``) whose follow-ups go to new topics filed under
the newest 20,000 stories' ids: the same articles for every checkout, a stream the writer has not
seen, with copies and new stories in the world's shares.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import pickle
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.harness import REPO, import_checkout, timed


def _write(args: argparse.Namespace) -> None:
    from bench.writer_world import T_START, World

    started = time.perf_counter()
    world = World(args.seed)
    clusterer = world.window(args.stories)
    at = T_START
    for _ in range(args.minutes):
        for features in world.minute(at, args.per_minute):
            clusterer.assign(features)
        at += timedelta(minutes=1)
    gc.disable()
    with args.writer.open("wb") as fh:
        pickle.dump((clusterer, at), fh, protocol=5)
    print(f"{args.stories:,} stories and {args.minutes} minutes of {args.per_minute:,} articles "  # noqa: T201
          f"-> {args.writer} in {time.perf_counter() - started:.0f} s")


def _load(args: argparse.Namespace) -> tuple[Any, datetime]:
    """The pickled writer and its stream time, loaded with the code under ``--code-root`` (and the
    garbage collector off while the objects are made; callers freeze them)."""
    import_checkout(args.code_root)
    gc.disable()
    with args.writer.open("rb") as fh:
        clusterer, now = pickle.load(fh)
    return clusterer, now


def _time(args: argparse.Namespace) -> None:
    clusterer, now = _load(args)
    import transforms.clustering as clustering
    from transforms.clustering.params import RepairParams

    gc.enable()
    gc.collect()
    gc.freeze()
    since_ms = int(now.timestamp() * 1000) - int(RepairParams().lookback_hours * 3_600_000)
    lookback = sum(1 for sid in clusterer.story_ids() if clusterer.story_times(sid)[1] >= since_ms)
    repair = timed(lambda: clustering.repair_stories(clusterer, now))
    repairs, wall, cpu = repair.result, repair.wall, repair.cpu
    kinds = {kind: sum(r.kind == kind for r in repairs) for kind in ("split", "merge")}
    digest = hashlib.sha256(repr(repairs).encode()).hexdigest()[:12]
    print(f"{clustering.__file__}: repair pass, CPU {cpu:.1f} s (wall {wall:.1f} s), "  # noqa: T201
          f"{len(clusterer.stories):,} stories, {lookback:,} in the lookback, splits {kinds['split']}, "
          f"merges {kinds['merge']}, repairs {digest}")


def unseen_minute(clusterer: Any, now: datetime, seed: int, per_minute: int) -> list[Any]:
    """One more minute of articles for a pickled writer: a fresh world's (``seed``), its article
    ids ones the writer has not seen, its follow-ups filed under the newest 20,000 stories."""
    from bench.writer_world import World

    world = World(seed)
    world.counter = 10**8
    world.topics = [(sid, *world._topic()) for sid in list(clusterer.stories)[-20_000:]]  # noqa: SLF001
    return world.minute(now, per_minute)  # type: ignore[no-any-return]


def placement(assignment: Any) -> tuple[str, str, str | None, bool]:
    """Where an article was placed, without its score."""
    return assignment.article_id, assignment.story_id, assignment.copy_of, assignment.is_new_story


def _assign(args: argparse.Namespace) -> None:
    clusterer, now = _load(args)
    import transforms.clustering as clustering

    stream = unseen_minute(clusterer, now, args.seed, args.per_minute)
    gc.enable()
    gc.collect()
    gc.freeze()
    run = timed(lambda: [clusterer.assign(features) for features in stream])
    out, cpu = run.result, run.cpu
    placements = [placement(a) for a in out]
    scores = [a.score for a in out]
    print(f"{clustering.__file__}: {len(out):,} articles, CPU {cpu:.2f} s = {len(out) / cpu:.0f}/s, "  # noqa: T201
          f"{len(clusterer.stories):,} stories, placements {_digest(placements)}, "
          f"scores {_digest(scores)} (to 12 places {_digest([round(s, 12) for s in scores])})")
    if args.dump:
        args.dump.write_text(json.dumps({"placements": placements, "scores": scores}))


def _digest(values: object) -> str:
    return hashlib.sha1(repr(values).encode()).hexdigest()[:12]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="build and pickle a writer at scale")
    write.add_argument("--stories", type=int, default=150_000)
    write.add_argument("--minutes", type=int, default=10)
    write.add_argument("--per-minute", type=int, default=6_000)
    write.add_argument("--seed", type=int, default=11)
    write.add_argument("writer", type=Path)
    time_parser = sub.add_parser("time", help="time one repair pass with the code under --code-root")
    time_parser.add_argument("--code-root", type=Path, default=REPO)
    time_parser.add_argument("writer", type=Path)
    assign = sub.add_parser("assign", help="time the assignment of one more minute with the code under --code-root")
    assign.add_argument("--code-root", type=Path, default=REPO)
    assign.add_argument("--per-minute", type=int, default=6_000)
    assign.add_argument("--seed", type=int, default=99)
    assign.add_argument("--dump", type=Path, help="write the placements and scores here as JSON")
    assign.add_argument("writer", type=Path)
    args = parser.parse_args(argv)
    {"write": _write, "time": _time, "assign": _assign}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
