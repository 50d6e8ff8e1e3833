"""Peak memory and wall time of one ingest run with a hostile feed, against the same run without it.

Usage:
    .venv/bin/python -m bench.hostile_ingest [--articles 300] [--workers 1] [--runs inline,normal,hostile]
        [--corpus-dir /work/shared/corpus]

The replay site (this process) serves the dev corpora (``clustering/ecbplus-dev.jsonl`` and
``mmds-dev.jsonl``, ``--articles`` of them) as about 20 publishers, every article released. Each run
is one ingest cycle (plan, robots, poll and pages in four shards on threads as the flow runs them,
commit) into a fresh store, in a fresh subprocess:

* ``inline``: the normal feeds, ``NEWSROOM_INGEST_ARTICLE_WORKERS=0`` (each page's row built in the
  polling threads: the caps on every text, no budget): the baseline the budget's cost is read against;
* ``normal``: the normal feeds, ``--workers`` article workers (the per-article time and memory
  budget, the default);
* ``hostile``: the same, with one publisher's feed also carrying the hostile items of
  ``replay/hostile.py`` (1 MB space-free title, lede and body, a 10,000-reference title, 4.5 MB and
  100 MB of nested markup).

Per run: the child's ``ru_maxrss`` as ``wait4`` reports it (the largest single process of the run:
the ingest process or one of its article workers), the peak of the whole process tree's RSS
(sampled every 20 ms from ``/proc``), wall time, articles stored, and the page errors. Then the
ratios hostile/normal (goal: at most 1.5x) and normal/inline (what the budget costs), and whether
every article of the normal run was stored by the hostile one. The last line is the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.harness import REPO, bench_command, load_average, machine_line, print_json_line

START = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
SPAN_HOURS = 1.0
SAMPLE_SECONDS = 0.02
RUNS = ("inline", "normal", "hostile")


def _child(args: argparse.Namespace) -> int:
    """One ingest cycle into ``args.store``; prints its summary and timings as one JSON line."""
    import resource

    from tasks.ingest.budget import close_article_workers
    from tasks.ingest.commit import commit_ingest
    from tasks.ingest.plan import plan_due_feeds
    from tasks.ingest.poll import poll_shard
    from tasks.registry import import_publishers
    from tasks.settings import IngestSettings
    from warehouse.store import LocalStore

    # Generous timeouts: on a loaded shared machine a page read can stall for seconds, and a host whose
    # pages time out is skipped for the rest of the run, which would make the runs store different sets.
    settings = IngestSettings(  # type: ignore[call-arg]
        allow_private_addresses=True, host_rate_per_second=50.0, host_burst=50.0, article_workers=args.workers,
        read_timeout_seconds=60.0, total_timeout_seconds=180.0, slow_response_seconds=60.0)
    now = datetime.fromisoformat(args.now)
    store = LocalStore(Path(args.store))
    import_publishers(store, Path(args.publishers))
    started = time.perf_counter()
    plan = plan_due_feeds(store, now, shards=4)
    with ThreadPoolExecutor(max_workers=4) as pool:  # the flow's four ingest threads
        shards = list(pool.map(lambda jobs: poll_shard(jobs, settings, now), plan))
    summary = commit_ingest(store, shards, now)
    elapsed = time.perf_counter() - started
    close_article_workers()  # waited for: their peaks count in RUSAGE_CHILDREN
    print_json_line({"summary": summary, "elapsed_s": elapsed,
                     "self_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                     "workers_maxrss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}, default=str)
    return 0


def _tree_rss_bytes(root: int) -> int:
    """RSS of ``root`` and every descendant, from /proc (0 for a process gone meanwhile)."""
    total, todo, page = 0, [root], os.sysconf("SC_PAGE_SIZE")
    while todo:
        pid = todo.pop()
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, ValueError, IndexError):
            continue
    return total


def _run(name: str, workers: int, control: str, now: datetime, publishers: Path) -> dict[str, Any]:
    """One run in a fresh subprocess and store; its figures."""
    with tempfile.TemporaryDirectory(prefix=f"hostile-{name}-") as tmp:
        cmd = bench_command("hostile_ingest", "--child", "--store", str(Path(tmp) / "store"), "--now", now.isoformat(),
                            "--publishers", str(publishers), "--workers", str(workers))
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=REPO)
        peak, stop = [0], threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], _tree_rss_bytes(proc.pid))
                stop.wait(SAMPLE_SECONDS)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        stop.set()
        sampler.join()
        if proc.returncode != 0:
            raise SystemExit(f"{name}: the ingest run failed (exit status {proc.returncode})")
        child = json.loads(out.strip().splitlines()[-1])
        stored = _stored(Path(tmp) / "store")
    summary = child["summary"]
    return {"run": name, "workers": workers, "ru_maxrss_mb": round(usage.ru_maxrss / 1024, 1),
            "ingest_process_maxrss_mb": round(child["self_maxrss_mb"], 1),
            "largest_worker_maxrss_mb": round(child["workers_maxrss_mb"], 1),
            "tree_peak_rss_mb": round(peak[0] / 2**20, 1), "ingest_s": round(child["elapsed_s"], 2),
            "wall_s": round(wall, 2), "articles": summary["new_articles"], "errors": summary["errors"],
            "over_budget": summary.get("over_budget", []), "stored": stored}


def _stored(store: Path) -> dict[str, Any]:
    """The stored articles: their URLs, and the longest title, snippet, term and entity of any."""
    from warehouse.store import LocalStore
    from warehouse.tables import parquet_bytes_to_table

    local = LocalStore(store)
    rows = [row for key in local.list("log/articles/")
            for row in parquet_bytes_to_table(local.get(key).data).to_pylist()]
    return {"urls": sorted(r["url"] for r in rows),
            "hostile": {r["url"].rsplit("/", 1)[-1]: {"title_chars": len(r["title"]), "snippet_chars": len(r["snippet"]),
                                                      "longest_term": max(map(len, r["terms"]), default=0)}
                        for r in rows if "/articles/hostile/" in r["url"]},
            "longest": {"title": max((len(r["title"]) for r in rows), default=0),
                        "term": max((len(t) for r in rows for t in r["terms"]), default=0),
                        "entity": max((len(e) for r in rows for e in r["entities"]), default=0)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=300, help="corpus articles replayed (before reprints)")
    parser.add_argument("--workers", type=int, default=1, help="article workers of the normal and hostile runs")
    parser.add_argument("--runs", default=",".join(RUNS), help=f"which runs, in order (of {', '.join(RUNS)})")
    parser.add_argument("--corpus-dir", type=Path, default=Path(os.environ.get("NEWSROOM_CORPUS_DIR",
                                                                             "/work/shared/corpus")))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--now", help=argparse.SUPPRESS)
    parser.add_argument("--publishers", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args)

    from replay.site import ReplaySite
    from tasks.replay_control import download_publishers_csv

    corpora = [args.corpus_dir / "clustering" / "ecbplus-dev.jsonl", args.corpus_dir / "clustering" / "mmds-dev.jsonl"]
    site = ReplaySite.from_corpora(corpora, seed=7, start=START, limit=args.articles, span_hours=SPAN_HOURS)
    site.start(port=0)
    results: dict[str, dict[str, Any]] = {}
    try:
        now = START + timedelta(hours=SPAN_HOURS, minutes=5)
        site.set_clock(now)
        hostile = next(p for p in site.publishers if p.language == "en")
        with tempfile.TemporaryDirectory() as tmp:
            publishers = download_publishers_csv(site.control_url, Path(tmp) / "publishers.csv")
            print(f"machine: {machine_line()}; {len(site.publishers)} publishers, "
                  f"{sum(len(site.released(p.publisher_id)) for p in site.publishers)} articles released; "
                  f"hostile feed: {hostile.rss_url}")
            for name in args.runs.split(","):
                site.set_faults({hostile.publisher_id: "hostile_pages" if name == "hostile" else None})
                results[name] = _run(name, 0 if name == "inline" else args.workers, site.control_url, now, publishers)
                r = results[name]
                print(f"{name:8} workers={r['workers']} ru_maxrss={r['ru_maxrss_mb']:.0f} MB (ingest process "
                      f"{r['ingest_process_maxrss_mb']:.0f}, largest worker {r['largest_worker_maxrss_mb']:.0f}) "
                      f"tree peak={r['tree_peak_rss_mb']:.0f} MB  ingest {r['ingest_s']:.1f} s (wall {r['wall_s']:.1f} s)  "
                      f"articles={r['articles']} errors={r['errors']}")
                for page in r["over_budget"]:
                    print(f"         over budget: {page['url']} {page['kind']}")
                for kind, row in sorted(r["stored"]["hostile"].items()):
                    print(f"         stored capped: {kind} {row}")
    finally:
        site.stop()
    figures: dict[str, Any] = {"load_average_end": load_average()[0], "articles": args.articles,
                               "runs": {k: {f: v for f, v in r.items() if f != "stored"} | {
                                   "longest": r["stored"]["longest"], "hostile_stored": r["stored"]["hostile"]}
                                   for k, r in results.items()}}
    if "normal" in results and "hostile" in results:
        normal, bad = results["normal"], results["hostile"]
        missing = sorted(set(normal["stored"]["urls"]) - set(bad["stored"]["urls"]))
        figures["hostile_over_normal"] = {k: round(bad[k] / normal[k], 2) for k in
                                          ("ru_maxrss_mb", "tree_peak_rss_mb", "ingest_s")}
        figures["normal_articles_stored_by_hostile_run"] = not missing
        print(f"hostile/normal: ru_maxrss {figures['hostile_over_normal']['ru_maxrss_mb']}x, tree peak "
              f"{figures['hostile_over_normal']['tree_peak_rss_mb']}x, time {figures['hostile_over_normal']['ingest_s']}x "
              f"(goal: memory at most 1.5x); normal run's {len(normal['stored']['urls'])} articles all stored: "
              f"{not missing}{'' if not missing else f' (missing {missing[:5]})'}")
    if "normal" in results and "inline" in results:
        normal, inline = results["normal"], results["inline"]
        figures["budget_over_inline"] = {k: round(normal[k] / inline[k], 2) for k in
                                         ("ru_maxrss_mb", "tree_peak_rss_mb", "ingest_s")}
        figures["same_articles_as_inline"] = normal["stored"]["urls"] == inline["stored"]["urls"]
        print(f"normal/inline (the budget's cost): ru_maxrss {figures['budget_over_inline']['ru_maxrss_mb']}x, tree peak "
              f"{figures['budget_over_inline']['tree_peak_rss_mb']}x, time {figures['budget_over_inline']['ingest_s']}x; "
              f"same articles: {figures['same_articles_as_inline']}")
    print_json_line(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
