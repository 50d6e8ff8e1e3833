"""Every headline figure in one run, each next to its baseline measured in the same run (issue 20).

Usage::

    .venv/bin/python -m bench.headline            # about 5 minutes on the shared 2-core machine
    .venv/bin/python -m bench.headline --quick    # each bench in its quick mode (the test's run)
    .venv/bin/python -m bench.headline --only polls edition_page

Runs the project's own benches, each in a child process of its own (so one's threads and memory
never slow the next), at sizes small enough for the whole run to take about five minutes, reads
the JSON line each prints last, and prints one JSON object: per figure its value, the baseline it
is measured against in the same run, the ratio, the exact command, and the bench's details; the
machine's load average at the start and at the end; the git commit and whether the checkout had
uncommitted changes. A bench that fails is reported with its error, and the others still run.

On a shared machine the rates move with the load: read each ratio, and the load average beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import CORPUS_DIR, REPO, bench_command, checkout_revision, load_average

CORPUS = Path(os.environ.get("NEWSROOM_CORPUS_DIR") or CORPUS_DIR)
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/corpus")
CLUSTER_FILES = ["ecbplus", "ecbplus-timed", "gnews2014", "mmds"]
SECTION_LABELS = REPO / "training" / "sections" / "mmds-dev-sections.tsv"
POLL_PROCESSES = max(2, os.cpu_count() or 2)
"""The polling bench runs once in one process and once in a worker process per core."""


@dataclass(frozen=True, slots=True)
class Bench:
    """One bench run: its command (full and quick) and how its last JSON line becomes figures."""

    name: str
    full: list[str]
    quick: list[str]
    figures: Callable[[dict[str, Any]], dict[str, dict[str, Any]]]
    env: tuple[tuple[str, str], ...] = ()


def _ratio(value: float, baseline: float) -> float | None:
    return round(value / baseline, 3) if baseline else None


def _polls(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    processes = int(out.get("processes") or 0)
    name = "polls_per_second_processes" if processes else "polls_per_second"
    runs_on = (f"{processes} worker processes, a shard of whole hosts each (NEWSROOM_SCALE_INGEST_PROCESSES)"
               if processes else "one process, threads (the default)")
    return {name: {
        "value": out["ours_polls_per_second"], "unit": "polls/s",
        "what": f"{out['feeds']:,} feeds on {out['hosts']} hosts, 80% answering 304 (tasks.ingest.poll.poll_shard), "
                f"{runs_on}",
        "baseline": out["baseline_polls_per_second"], "baseline_what": "sequential httpx + feedparser loop",
        "ratio": out["ratio"],
        "politeness_max_in_flight_per_host": out["max_in_flight_per_host"],
        "politeness_limit": 2,
        "cpu_ms_per_poll": out["ours_cpu_ms_per_poll"], "baseline_cpu_ms_per_poll": out["baseline_cpu_ms_per_poll"],
        "rate_ceiling_polls_per_second": out["rate_ceiling_polls_per_second"],
        "processes": processes or 1,
    }}


def _serving(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    compressed, plain, static = out["api_edition_page_compressed"], out["api_edition_page"], out["static_same_bytes"]
    return {
        "edition_page": {
            "value": compressed["req_per_s"], "unit": "req/s",
            "what": f"edition page via the API, brotli ({compressed['bytes']:,} of {out['page_bytes']:,} bytes), "
                    f"{out['connections']} connections",
            "p50_ms": compressed["p50_ms"], "p99_ms": compressed["p99_ms"],
            "baseline": static["req_per_s"], "baseline_what": "the same page as a static file, same server",
            "baseline_p50_ms": static["p50_ms"], "baseline_p99_ms": static["p99_ms"],
            "ratio": _ratio(compressed["req_per_s"], static["req_per_s"]),
            "uncompressed_req_per_s": plain["req_per_s"], "uncompressed_p50_ms": plain["p50_ms"],
            "uncompressed_p99_ms": plain["p99_ms"], "bytes": compressed["bytes"], "page_bytes": out["page_bytes"],
        },
        "for_you_rerank_p50_ms": {
            "value": out["for_you_rerank"]["p50_ms"], "unit": "ms",
            "what": f"For-you re-rank of a {out['for_you_rerank']['pool']:,}-story pool (serving.foryou)",
            "p99_ms": out["for_you_rerank"]["p99_ms"],
            "baseline": None, "baseline_what": "none: no other re-rank to compare with", "ratio": None,
        },
    }


def _writer(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {"writer_articles_per_second": {
        "value": out["indexed_articles_per_s"], "unit": "articles/s (wall)",
        "cpu_value": out["indexed_cpu_articles_per_s"],
        "what": f"one language writer, {out['stories']:,} active stories, {out['articles']:,} articles",
        "baseline": out["brute_articles_per_s"], "baseline_cpu": out["brute_cpu_articles_per_s"],
        "baseline_what": f"the same clusterer scoring every story ({out['brute_articles']} articles)",
        "ratio": out["ratio"], "cpu_ratio": out["cpu_ratio"],
        "same_decisions": f"{out['same_decisions']}/{out['brute_articles']}",
    }}


def _rank(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {"rank_cycle_seconds": {
        "value": out["cycle_s"], "unit": "s",
        "what": f"one rank cycle, {out['stories']:,} stories, {out['editions']} editions, {out['pages']} pages",
        "baseline": out["naive_estimate_s"],
        "baseline_what": f"naive per-edition Python loop (run on {out['naive_editions_run']} editions, extrapolated)",
        "ratio": out["ratio"], "ratio_means": "baseline / value (times faster)",
    }}


def _clusters(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"cluster_bcubed_f1_{name}": {
        "value": f["bcubed_f1"], "unit": f"BCubed F1 ({f['scored_on']}, file order)",
        "what": f"newsroom cluster-eval on {name}-dev ({f['articles']:,} articles)",
        "baseline": f["baseline_bcubed_f1"],
        "baseline_what": f"online TF-IDF, best threshold {f['baseline_threshold']} (an oracle choice)",
        "ratio": f["ratio"],
    } for name, f in out.items()}


def _copies(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {"copy_detection_recall": {
        "value": out["reprint_recall"], "unit": "recall",
        "what": f"edited reprints found ({out['reprints']:,}, MinHash LSH)",
        "false_copy_rate": out["false_copy_rate"],
        "false_copies": f"{out['false_copies']} of {out['same_event_pairs']:,} same-event pairs",
        "recall_by_edit": out["recall_by_edit"],
        "baseline": None, "baseline_what": "none in the run (SimHash was measured once and dropped)", "ratio": None,
    }}


def _extraction(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {"extraction_f1": {
        "value": out["f1"], "unit": "F1 (4-token shingles)", "what": f"extract_page on {out['pages']} pages",
        "baseline": out["baseline_f1"], "baseline_what": "trafilatura defaults", "ratio": out["ratio"],
        "ms_per_page": out["ms_per_page"], "baseline_ms_per_page": out["baseline_ms_per_page"],
    }}


BENCHES = [
    Bench("polls", ["-m", "bench.poll_throughput"], ["-m", "bench.poll_throughput", "--quick"], _polls),
    Bench("polls_processes", ["-m", "bench.poll_throughput", "--processes", str(POLL_PROCESSES)],
          ["-m", "bench.poll_throughput", "--quick", "--processes", str(POLL_PROCESSES)], _polls),
    Bench("edition_page", ["-m", "bench.serving_load", "--no-for-you", "--json"],
          ["-m", "bench.serving_load", "--quick", "--no-for-you", "--json"], _serving),
    Bench("writer", ["-m", "bench.cluster_speed", "--stories", "10000", "--articles", "2000",
                     "--brute-articles", "100"],
          ["-m", "bench.cluster_speed", "--stories", "1000", "--articles", "200", "--brute-articles", "20"],
          _writer),
    Bench("rank_cycle", ["-m", "bench.rank_cycle", "--stories", "30000", "--naive-editions", "3"],
          ["-m", "bench.rank_cycle", "--stories", "3000", "--naive-editions", "1"], _rank,
          env=(("POLARS_MAX_THREADS", "2"),)),
    Bench("cluster_eval", ["-m", "bench.cluster_eval", "--orders", "1", "--corpus-dir", str(CORPUS / "clustering"),
                           "--files", *CLUSTER_FILES],
          ["-m", "bench.cluster_eval", "--orders", "1", "--corpus-dir", str(CORPUS / "clustering"),
           "--files", "mmds"], _clusters),
    Bench("copy_detection", ["-m", "bench.copy_detection", "--corpus-dir", str(CORPUS / "clustering")],
          ["-m", "bench.copy_detection", "--quick", "--corpus-dir", str(CORPUS / "clustering")], _copies),
    Bench("extraction", ["-m", "bench.extract_eval", "--pages", str(CORPUS / "pages")],
          ["-m", "bench.extract_eval", "--pages", str(CORPUS / "pages"), "--limit", "8"], _extraction),
]
"""The section classifier is run by :func:`_sections` (two commands: the classifier and its baseline)."""


def _last_json(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            parsed: dict[str, Any] = json.loads(line)
            return parsed
    raise ValueError("the bench printed no JSON line")


def _run(command: list[str], env: tuple[tuple[str, str], ...] = (), timeout: float = 900) -> dict[str, Any]:
    environment = {**os.environ, **dict(env)}
    done = subprocess.run([sys.executable, *command], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env=environment, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:] or ['no output']}")
    return _last_json(done.stdout)


def _display(command: list[str]) -> str:
    return " ".join(["python", *(str(Path(c).relative_to(REPO)) if c.startswith(str(REPO)) else c for c in command)])


def _sections(quick: bool) -> dict[str, dict[str, Any]]:
    """``newsroom classify-sections`` on the labelled MMDS dev articles, and the seed-word classifier before it."""
    source = CORPUS / "clustering" / "mmds-dev.jsonl"
    with tempfile.TemporaryDirectory() as tmp:
        if quick:  # the first 60 articles
            lines = source.read_text(encoding="utf-8").splitlines(keepends=True)[:60]
            source = Path(tmp) / "mmds-sample.jsonl"
            source.write_text("".join(lines), encoding="utf-8")
        before = Path(tmp) / "before.jsonl"
        after = _run(["-m", "bench.section_eval", "--input", str(source), "--labels", str(SECTION_LABELS)])
        subprocess.run(bench_command("section_baseline", "--input", str(source), "--output", str(before)),
                       cwd=REPO, check=True, capture_output=True)
        baseline = _run(["-m", "bench.section_eval", "--input", str(source), "--labels", str(SECTION_LABELS),
                         "--predictions", str(before)])
    return {"section_classifier": {
        "value": after["coverage"], "unit": "coverage (share of labelled articles answered)",
        "accuracy": after["accuracy"],
        "what": f"newsroom classify-sections on MMDS dev articles with a label ({after['labelled']}, en/zh/ms)",
        "baseline": baseline["coverage"], "baseline_accuracy": baseline["accuracy"],
        "baseline_what": "the seed-word TF-IDF classifier before issue 21 (bench/section_baseline.py)",
        "ratio": _ratio(after["coverage"], baseline["coverage"]),
        "command": f"python -m bench.section_eval --input {source.name} --labels "
                   f"{SECTION_LABELS.relative_to(REPO)}; python -m bench.section_baseline, then --predictions",
    }}


def run(quick: bool, only: set[str] | None = None) -> dict[str, Any]:
    """Every bench (or ``only`` these), in turn; the figures of each, or its error."""
    commit, dirty = checkout_revision()
    started = time.perf_counter()
    load_start = load_average()
    figures: dict[str, Any] = {}
    errors: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for bench in BENCHES:
        if only is not None and bench.name not in only:
            continue
        command = bench.quick if quick else bench.full
        t0 = time.perf_counter()
        try:
            found = bench.figures(_run(command, bench.env))
        except Exception as e:  # noqa: BLE001 - one bench failing never hides the others' figures
            errors[bench.name] = f"{type(e).__name__}: {e}"
        else:
            for figure in found.values():
                figure.setdefault("command", _display(command))
            figures.update(found)
        seconds[bench.name] = round(time.perf_counter() - t0, 1)
    if only is None or "sections" in only:
        t0 = time.perf_counter()
        try:
            figures.update(_sections(quick))
        except Exception as e:  # noqa: BLE001
            errors["sections"] = f"{type(e).__name__}: {e}"
        seconds["sections"] = round(time.perf_counter() - t0, 1)
    return {
        "commit": commit, "dirty": dirty, "mode": "quick" if quick else "full",
        "load_average": {"start": load_start, "end": load_average()},
        "cpus": os.cpu_count(), "seconds": round(time.perf_counter() - started, 1), "bench_seconds": seconds,
        "figures": figures, "errors": errors,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every bench in its quick mode")
    parser.add_argument("--only", nargs="+", choices=[b.name for b in BENCHES] + ["sections"],
                        help="run only these benches")
    args = parser.parse_args(argv)
    result = run(args.quick, set(args.only) if args.only else None)
    print(json.dumps(result, indent=2))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
