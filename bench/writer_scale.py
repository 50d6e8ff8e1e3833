"""The language writer at the seeds' scale, against today's design in the same run (issue 15).

    taskset -c 0,1 .venv/bin/python -m bench.writer_scale [--stories 50000,150000,300000] \\
        [--per-minute 6000] [--runs 3] [--baseline-code DIR] [--baseline-max 50000] [--quick]

For each size, one process builds a synthetic window of that many active stories
(bench/writer_world.py) and stores it as a writer's state twice: as a version 4 base (this code)
and, up to ``--baseline-max`` stories, as the JSON state blob the writer stored before (for the
code in ``--baseline-code``, a checkout or ``git archive`` of the design to compare with). It also
writes ``--runs`` minutes of ``--per-minute`` new articles as article segments, the same in both
stores. Then a fresh process per design measures, on its own store:

- **cold restart**: reading the checkpoint and loading the state (``load_writer_state``), wall and
  CPU seconds, and the RSS after it;
- **a minute's run**: ``cluster_language`` over one minute of articles with the state kept in
  memory from the previous commit (the long-running writer; today's writer session), state I/O
  included: wall and CPU seconds, CPU seconds inside ``LanguageClusterer.assign`` and
  ``copy_keys`` (the assignment rate), and the bytes the run wrote to the store (state object and change segment);
- **peak RSS** of the process.

``--quick``: 10,000 stories, 600 articles a minute, 2 runs (a minute or two). On a shared machine
compare CPU seconds and ratios; the load average is printed with each result.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.harness import REPO, bench_command, import_checkout, load_average, print_json_line


def _tree_bytes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _rss_mib() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _setup(args: argparse.Namespace) -> None:
    import gc

    from bench.writer_world import T_START, World, article_row
    from tasks.writer.session import WriterSession, commit
    from transforms.clustering.columns import state_columns
    from warehouse import layout
    from warehouse.schemas import ARTICLES_SCHEMA
    from warehouse.state_blobs import columns_to_table, encode_state, encode_state_object
    from warehouse.store import LocalStore
    from warehouse.tables import rows_to_table, write_segment

    gc.disable()
    started = time.perf_counter()
    world = World(args.seed)
    clusterer = world.window(args.stories)
    built = time.perf_counter()
    new = LocalStore(args.work / "new")
    stores = [new]
    if not args.baseline:
        # The base as a first commit stores it, with the objects let go as soon as their columns
        # exist: at 300,000 stories the objects and the encoded tables together would not fit.
        columns = state_columns(clusterer)
        del clusterer
        gc.collect()
        tables = {name: columns_to_table(name, getattr(columns, name)) for name in ("stories", "members", "norms",
                                                                                   "recent", "df")}
        meta = columns.meta
        del columns
        data = encode_state_object({**meta, "format": "newsroom-writer-state", "offset": 0, "consumed": [],
                                    "updated_at": T_START.isoformat(), "kind": "base"}, tables)
        del tables
        key = layout.story_state_object_key("en", "base", 0, "bench")
        new.put(key, data)
        new.put(layout.story_checkpoint_key("en"), json.dumps(
            {"offset": 0, "state_key": key, "deltas": [], "consumed": [], "updated_at": T_START.isoformat()}).encode())
        del data
        clusterer = None
    else:
        commit(WriterSession.fresh(new, "en", clusterer), [], T_START)
    if args.baseline:
        old = LocalStore(args.work / "old")
        state = {"clusterer": clusterer.to_state(), "seen": [], "consumed": [], "updated_at": T_START.isoformat()}
        blob = encode_state(state)
        del state
        key = layout.story_state_key("en", 0, "bench")
        old.put(key, blob)
        old.put(layout.story_checkpoint_key("en"), json.dumps(
            {"offset": 0, "state_key": key, "consumed": [], "updated_at": T_START.isoformat()}).encode())
        stores.append(old)
    del clusterer
    for run in range(args.runs):
        at = T_START + timedelta(minutes=run)
        table = rows_to_table([article_row(f) for f in world.minute(at, args.per_minute)], ARTICLES_SCHEMA)
        for store in stores:
            write_segment(store, layout.article_segment_key(at, f"run{run}"), table, ARTICLES_SCHEMA)
    print_json_line({"build_seconds": round(built - started, 1), "setup_seconds": round(time.perf_counter() - started, 1),
                     "setup_peak_mib": round(_peak_mib())})


def _measure_run(args: argparse.Namespace) -> None:
    import_checkout(args.code_root)
    import gc
    from datetime import UTC, datetime

    import transforms.clustering.clusterer as clusterer_module
    from tasks.writer import checkpoint as writer_checkpoint
    from tasks.writer import kept as writer_kept
    from tasks.writer import run as writer_run
    from tasks.writer import session as writer_session
    from warehouse import layout
    from warehouse.store import LocalStore

    t_start = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assign_cpu = [0.0]
    cls = clusterer_module.LanguageClusterer

    def timed(original: Any) -> Any:
        def run(self: Any, *args: Any) -> Any:
            start = time.process_time()
            try:
                return original(self, *args)
            finally:
                assign_cpu[0] += time.process_time() - start
        return run

    # Assignment: every article's assign, and the minute's LSH keys computed ahead of them.
    cls.assign = timed(cls.assign)  # type: ignore[method-assign]
    if hasattr(cls, "copy_keys"):
        cls.copy_keys = timed(cls.copy_keys)  # type: ignore[method-assign]
    store = LocalStore(args.work / args.store)
    base_rss = _rss_mib()
    wall, cpu = time.perf_counter(), time.process_time()
    checkpoint, _ = writer_checkpoint.open_writer(store, "en")
    state = writer_session.load_writer_state(store, "en", checkpoint)
    restart = {"wall_seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu}
    gc.collect()
    restart["rss_mib_after"] = _rss_mib()
    restart["rss_mib_before"] = base_rss
    runs = []
    with writer_kept.keep_states_in_memory() as kept:
        kept.put(store, "en", store.head(layout.story_checkpoint_key("en")), *state)
        del state
        for run in range(args.runs):
            before = _tree_bytes(args.work / args.store)
            assign_cpu[0] = 0.0
            wall, cpu = time.perf_counter(), time.process_time()
            summary = writer_run.cluster_language(store, "en", t_start + timedelta(minutes=run + 1), kept=kept)
            elapsed, used = time.perf_counter() - wall, time.process_time() - cpu
            after = _tree_bytes(args.work / args.store)
            written = {k: v for k, v in after.items() if before.get(k) != v}
            runs.append({"wall_seconds": elapsed, "cpu_seconds": used, "assign_cpu_seconds": assign_cpu[0],
                         "articles": summary.get("articles"), "bytes_written": sum(written.values()),
                         "state_bytes": sum(v for k, v in written.items() if "/stories/" in k and "checkpoint" not in k),
                         "objects_written": len(written)})
        hits = kept.hits
    stored = _tree_bytes(args.work / args.store)
    base = max((v for k, v in stored.items() if "/base-" in k or "/state-" in k), default=0)
    print_json_line({"restart": restart, "runs": runs, "kept_hits": hits, "peak_rss_mib": _peak_mib(),
                     "base_bytes": base, "load_average": load_average()})


def _child(mode: str, args: argparse.Namespace, extra: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    command = bench_command("writer_scale", mode, "--stories", str(args.stories_one),
                            "--per-minute", str(args.per_minute), "--runs", str(args.runs), "--seed", str(args.seed),
                            "--work", str(args.work), *extra)
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(env or {})},
                            cwd=REPO)
    if result.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _report(stories: int, label: str, out: dict[str, Any]) -> str:
    runs = out["runs"][1:] or out["runs"]  # the first run also warms the process (its caches, the GC freeze)
    mean = {k: sum(r[k] for r in runs) / len(runs) for k in ("wall_seconds", "cpu_seconds", "assign_cpu_seconds",
                                                             "bytes_written", "state_bytes")}
    articles = runs[0]["articles"] or 1
    return (f"| {stories:,} | {label} | {out['restart']['wall_seconds']:.1f} / {out['restart']['cpu_seconds']:.1f} | "
            f"{mean['wall_seconds']:.1f} / {mean['cpu_seconds']:.1f} | {articles / mean['assign_cpu_seconds']:,.0f} | "
            f"{mean['bytes_written'] / 1e6:.1f} MB | {out['base_bytes'] / 1e6:.0f} MB | "
            f"{100 * mean['state_bytes'] / max(1, out['base_bytes']):.1f}% | {out['peak_rss_mib'] / 1024:.2f} GiB | "
            f"{out['load_average'][0]:.1f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="compare", choices=["compare", "setup", "measure"])
    parser.add_argument("--stories", default="50000,150000,300000")
    parser.add_argument("--per-minute", type=int, default=6000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--work", type=Path, default=Path("/tmp/newsroom-writer-scale"))
    parser.add_argument("--baseline-code", type=Path, default=None,
                        help="a checkout (or git archive) of the design to compare with; none: no baseline")
    parser.add_argument("--baseline-max", type=int, default=50_000,
                        help="largest size the baseline runs at (its RSS is about 60 KB per story)")
    parser.add_argument("--code-root", type=Path, default=REPO)
    parser.add_argument("--store", default="new")
    parser.add_argument("--baseline", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.stories, args.per_minute, args.runs = "10000", 600, 2
    if args.mode == "setup":
        args.stories = int(args.stories)
        _setup(args)
        return 0
    if args.mode == "measure":
        _measure_run(args)
        return 0
    results = []
    lines = ["| active stories | design | cold restart s (wall / CPU) | minute's run s (wall / CPU) | assign articles/s "
             "(CPU) | bytes written per run | base | state written / base | peak RSS | load |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for stories in (int(s) for s in args.stories.split(",")):
        import shutil

        shutil.rmtree(args.work, ignore_errors=True)
        args.work.mkdir(parents=True)
        args.stories_one = stories
        baseline = args.baseline_code is not None and stories <= args.baseline_max
        setup = _child("setup", args, ["--baseline"] if baseline else [])
        measured = {"new": _child("measure", args, ["--store", "new"])}
        if baseline:
            measured["old"] = _child("measure", args, ["--store", "old", "--code-root", str(args.baseline_code)])
        for label, out in measured.items():
            lines.append(_report(stories, "base + deltas (this)" if label == "new" else "JSON state (before)", out))
            print(lines[-1], flush=True)
        results.append({"stories": stories, "setup": setup, **measured})
        shutil.rmtree(args.work, ignore_errors=True)
    print("\n".join(lines))
    if args.output is not None:
        args.output.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
