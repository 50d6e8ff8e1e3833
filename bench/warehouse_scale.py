"""Queries over the warehouse as days of rows pile up (issue 28): monitoring and analysts' queries
should cost what they look at, not everything kept.

    taskset -c 0,1 .venv/bin/python -m bench.warehouse_scale --days 1 4 16 --work /tmp/wh
    .venv/bin/python -m bench.warehouse_scale --quick        # 1 and 2 days of 20,000 articles

One store grows day by day (``--per-day`` articles a day, 512-dimension embeddings, as wide as
ingest writes them but for the signatures; their story changes; a fetch log of ``--feeds`` feeds
polled every 2 minutes plus every page fetch; a listing per article), laid out as maintenance
leaves it: ten-minute segments compacted each hour by ``warehouse.maintenance.compact_folder``, a
closed day's compacted segments merged by ``merge_closed_days``, the last hour left uncompacted.
At each size in ``--days`` every measurement runs in a fresh process, for this checkout and for
the code before (``--before``, a git revision checked out beside the work folder), on the same
store, alternating:

- ``health``: ``tasks.health.check_health`` (the health flow, every 5 minutes);
- ``dashboards``: ``tasks.dashboards.build_dashboards`` (the four dashboards over 24 hours);
- ``lineage``: ``tasks.explain.lineage`` of the newest story (what ``newsroom explain`` reads from
  the warehouse; its rank part reads rank's aggregates, not the logs);
- ``sql-hour`` / ``sql-day``: ``newsroom sql``'s ``run_sql`` counting the articles and publishers
  of the last hour / day;
- ``sql-all`` (this checkout only): a full-table aggregate, every article joined with its story.

Reported per size: wall seconds of the call and peak RSS of the process (imports included), and
whether both codes gave the same answer. A run of the code before is stopped past ``--rss-cap``
(it reads every segment into memory). The last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("POLARS_MAX_THREADS", "2")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from bench.harness import REPO, export_revision, load_average, machine_line, print_json_line  # noqa: E402

DAY0 = datetime(2026, 11, 1, tzinfo=UTC)
SEGMENTS_PER_HOUR = 6
KINDS = ("health", "dashboards", "lineage", "sql-hour", "sql-day")

CHILD = r"""
import io, json, os, sys, time, hashlib
from datetime import datetime
root, kind, now, story = sys.argv[1], sys.argv[2], datetime.fromisoformat(sys.argv[3]), sys.argv[4]
from warehouse.store import LocalStore
store = LocalStore(root)
def digest(value):
    return hashlib.blake2b(json.dumps(value, default=str, sort_keys=True).encode(), digest_size=8).hexdigest()
sql = {
    "sql-hour": "select count(*), count(distinct publisher_id) from articles where first_seen_at > timestamptz '%s' - interval 1 hour",
    "sql-day": "select count(*), count(distinct publisher_id) from articles where first_seen_at > timestamptz '%s' - interval 24 hour",
    "sql-all": "select count(*), count(distinct a.story_id) from articles join story_assignments as a using (article_id)",
}
started = time.perf_counter()
if kind == "health":
    from tasks.health import check_health
    t = time.perf_counter(); result = sorted((f.check, f.subject) for f in check_health(store, now))
elif kind == "dashboards":
    from tasks.dashboards import build_dashboards
    t = time.perf_counter(); result = [d.table for d in build_dashboards(store, now)]
elif kind == "lineage":
    from tasks.explain import lineage
    t = time.perf_counter(); result = lineage(store, story)
else:
    from tasks.sql import run_sql
    out, err = io.StringIO(), io.StringIO()
    query = sql[kind] % now.isoformat() if "%s" in sql[kind] else sql[kind]
    t = time.perf_counter(); status = run_sql(store, query, out=out, err=err, fmt="csv")
    result = [status, out.getvalue()]
seconds = time.perf_counter() - t
with open("/proc/self/status") as status:  # VmHWM: this process's own peak (ru_maxrss keeps the parent's from the fork)
    peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
print(json.dumps({"seconds": seconds, "peak_mib": peak,
                  "digest": digest(result), "summary": str(result)[:160]}))
"""


class Day:
    """Writes one synthetic day into the store through the warehouse's own writers and maintenance."""

    def __init__(self, store: Any, per_day: int, feeds: int, seed: int) -> None:
        from bench.rank_incremental import Synth

        self.store, self.per_day, self.feeds = store, per_day, feeds
        self.synth = Synth(max(1000, per_day // 10), seed, terms=16, dims=512)
        self.synth.start = DAY0
        self.synth.born[:] = self.synth.rng.uniform(-6 * 3600, 0, size=self.synth.stories)
        self.rng = np.random.default_rng(seed + 1)
        self.open_hour: dict[str, list[str]] = {}
        """The last hour's segments of the day written last, left uncompacted until the next day."""

    def registry(self) -> None:
        from warehouse import layout
        from warehouse.schemas import FEED_STATE_SCHEMA, FEEDS_SCHEMA, PUBLISHERS_SCHEMA
        from warehouse.tables import write_table

        publishers = self.synth.registry().to_pylist()
        for i, p in enumerate(publishers):
            p["tier"] = 1 if i % 10 == 0 else (2 if i % 10 < 5 else 3)
        write_table(self.store, layout.PUBLISHERS_KEY, pa.Table.from_pylist(publishers, PUBLISHERS_SCHEMA),
                    PUBLISHERS_SCHEMA)
        feeds = [{"feed_id": f"feed-{p['publisher_id']}", "url": f"https://{p['domain']}/feed",
                  "publisher_id": p["publisher_id"], "kind": "rss", "section_hint": None} for p in publishers]
        write_table(self.store, layout.FEEDS_KEY, pa.Table.from_pylist(feeds, FEEDS_SCHEMA), FEEDS_SCHEMA)
        state = [{"feed_id": f["feed_id"], "next_poll_at": DAY0, "last_polled_at": DAY0, "last_status": 200,
                  "recent_guids": [f"https://{f['feed_id']}.example/{g}" for g in range(200)],
                  "interval_seconds": 120, "poll_reason": "rate", "error_streak": 0, "is_parked": False}
                 for f in feeds]
        write_table(self.store, layout.FEED_STATE_KEY, pa.Table.from_pylist(state, FEED_STATE_SCHEMA),
                    FEED_STATE_SCHEMA)

    def write(self, day: int, *, leave_last_hour: bool) -> None:
        """Day ``day`` (0-based): each hour's segments written, then compacted (the last hour of
        the last day left as written); the day before merged once this one starts."""
        from warehouse.catalog import LOG_TABLES
        from warehouse.maintenance import compact_folder, merge_closed_days

        start = DAY0 + timedelta(days=day)
        for name, keys in self.open_hour.items():
            compact_folder(self.store, LOG_TABLES[name], keys[0].rsplit("/", 1)[0], keys)
        self.open_hour = {}
        merge_closed_days(self.store, start + timedelta(minutes=30))
        for hour in range(24):
            written: dict[str, list[str]] = {}
            for part in range(SEGMENTS_PER_HOUR):
                end = start + timedelta(hours=hour, minutes=(part + 1) * 60 // SEGMENTS_PER_HOUR)
                for name, key in self._segment(end):
                    written.setdefault(name, []).append(key)
            if leave_last_hour and hour == 23:
                self.open_hour = written
                continue
            for name, keys in written.items():
                compact_folder(self.store, LOG_TABLES[name], keys[0].rsplit("/", 1)[0], keys)

    def _segment(self, end: datetime) -> list[tuple[str, str]]:
        from warehouse import layout
        from warehouse.schemas import ARTICLES_SCHEMA, FETCHES_SCHEMA, LISTINGS_SCHEMA, STORY_CHANGES_SCHEMA
        from warehouse.tables import content_segment_id, write_segment

        count = self.per_day // (24 * SEGMENTS_PER_HOUR)
        minutes = 60 // SEGMENTS_PER_HOUR
        end_s = (end - DAY0).total_seconds()
        articles, changes = self._window(end_s, count, minutes * 60)
        seen = articles.column("first_seen_at")
        listings = pa.table({"article_id": articles.column("article_id"),
                             "story_id": changes.column("story_id"),
                             "listed_at": pc.add(seen, pa.scalar(timedelta(seconds=120)))}, schema=LISTINGS_SCHEMA)
        fetches = self._fetches(end, minutes, articles)
        out = []
        for name, table, schema, key in (
            ("articles", articles, ARTICLES_SCHEMA, layout.article_segment_key(end, content_segment_id(articles))),
            ("story_changes", changes, STORY_CHANGES_SCHEMA,
             layout.story_changes_key("en", int(changes.column("offset")[0].as_py()))),
            ("listings", listings, LISTINGS_SCHEMA, layout.listing_segment_key(end, content_segment_id(listings))),
            ("fetches", fetches, FETCHES_SCHEMA, layout.fetch_segment_key(end, content_segment_id(fetches))),
        ):
            write_segment(self.store, key, table, schema)
            out.append((name, key))
        return out

    def _window(self, end_s: float, count: int, span_s: float) -> tuple[pa.Table, pa.Table]:
        """``count`` articles first seen in the ``span_s`` seconds before ``end_s``: a fifth open new
        stories, the rest join young ones; a tenth are copies (the rank bench's generator)."""
        synth = self.synth
        young = np.argsort(-synth.born)[: max(1, min(synth.stories, 3000))]
        fresh = max(1, count // 5)
        new_ids = np.arange(synth.stories, synth.stories + fresh)
        synth.born = np.concatenate([synth.born, np.full(fresh, end_s - span_s)])
        synth.first_article = np.concatenate([synth.first_article, np.full(fresh, -1, dtype=np.int64)])
        synth.stories += fresh
        story = np.concatenate([new_ids, synth.rng.choice(young, size=count - fresh)])
        seen = end_s - synth.rng.uniform(0.5, span_s - 0.5, size=count)
        seen[:fresh] = end_s - span_s + 0.1
        return synth.tables(story, seen, synth.rng.random(count) < 0.1)

    def _fetches(self, end: datetime, minutes: int, articles: pa.Table) -> pa.Table:
        from warehouse.schemas import FETCHES_SCHEMA

        polls = self.feeds * minutes // 2  # every feed every 2 minutes
        pages = articles.num_rows
        n = polls + pages
        rng = self.rng
        feed = rng.integers(0, self.feeds, n)
        status = np.where(rng.random(n) < 0.25, 304, 200)
        failed = rng.random(n) < 0.03
        at = pa.array(np.datetime64(end.replace(tzinfo=None), "us")
                      - (rng.uniform(0, minutes * 60, n) * 1e6).astype("timedelta64[us]"), pa.timestamp("us", tz="UTC"))
        ids = pa.array([f"{v:024x}" for v in rng.integers(0, 2**62, n)])
        publisher = [f"p{f % 2000:04d}" for f in feed]
        kind = ["feed"] * polls + ["page"] * pages
        return pa.table({
            "fetch_id": ids, "fetched_at": at, "kind": kind, "feed_id": [f"feed-{p}" for p in publisher],
            "publisher_id": publisher, "host": [f"{p}.example" for p in publisher],
            "url": [f"https://{p}.example/feed" for p in publisher[:polls]] + articles.column("url").to_pylist(),
            "status": pa.array(np.where(failed, 503, status), pa.int16()),
            "is_conditional": pa.array(np.array(kind) == "feed"),
            "error_kind": pa.array(np.where(failed, "http_5xx", None).tolist(), pa.string()),
            "elapsed_ms": pa.array(rng.gamma(2, 60, n).astype(np.float32)),
            "interval_seconds": pa.array(np.where(np.array(kind) == "feed", 120, 0).astype(np.int32)),
            "poll_reason": ["rate"] * n,
        }, schema=FETCHES_SCHEMA)

    def newest_story(self) -> str:
        return str(self.synth.story_ids(np.array([self.synth.stories - 1]))[0].as_py())


def _checkout(rev: str, work: Path) -> Path:
    target = work / f"code-{rev}"
    if not target.exists():
        export_revision(rev, target)
    return target


def _measure(code: Path, store: Path, kind: str, now: datetime, story: str, rss_cap_mib: float,
             timeout: float) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(code), "PREFECT_LOGGING_LEVEL": "ERROR"}
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", CHILD, str(store), kind, now.isoformat(), story],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(code), env=env)
    peak = 0.0
    while process.poll() is None:
        try:
            with open(f"/proc/{process.pid}/status") as status:
                rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024
        except (OSError, StopIteration):
            rss = 0.0
        peak = max(peak, rss)
        if rss > rss_cap_mib or time.perf_counter() - started > timeout:
            process.kill()
            process.wait()
            why = f"stopped past {rss_cap_mib / 1024:.1f} GiB" if rss > rss_cap_mib else f"stopped after {timeout:.0f} s"
            return {"seconds": None, "peak_mib": peak, "digest": None, "summary": why}
        time.sleep(0.2)
    out = process.stdout.read().decode() if process.stdout else ""
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        return {"seconds": None, "peak_mib": peak, "digest": None, "summary": f"failed (exit {process.returncode})"}
    return json.loads(lines[-1])


def _store_facts(store: Path) -> tuple[int, int]:
    files = [p for p in (store / "log").rglob("*.parquet")]
    return len(files), sum(p.stat().st_size for p in files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--per-day", type=int, default=150_000)
    parser.add_argument("--feeds", type=int, default=2000)
    parser.add_argument("--before", default="3a6d4c0", help="git revision of the code before (empty: skip it)")
    parser.add_argument("--rss-cap", type=float, default=6144, help="MiB past which a run is stopped")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--work", type=Path, default=None, help="where the store grows (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--quick", action="store_true", help="1 and 2 days of 20,000 articles, 500 feeds")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.quick:
        args.days, args.per_day, args.feeds = [1, 2], 20_000, 500
    from warehouse.store import LocalStore

    work = args.work or Path(tempfile.mkdtemp(prefix="warehouse-scale-"))
    root = work / "store"
    if root.exists():
        shutil.rmtree(root)
    store = LocalStore(root)
    codes = {"after": REPO}
    if args.before:
        codes["before"] = _checkout(args.before, work)
    print(f"{machine_line()} at the start; {args.per_day:,} articles a day, {args.feeds:,} feeds "
          f"polled every 2 minutes", flush=True)
    day = Day(store, args.per_day, args.feeds, args.seed)
    day.registry()
    results: dict[str, Any] = {}
    written = 0
    try:
        for size in sorted(args.days):
            t = time.perf_counter()
            while written < size:
                day.write(written, leave_last_hour=written == size - 1)
                written += 1
            now = DAY0 + timedelta(days=size) - timedelta(seconds=1)
            files, size_bytes = _store_facts(root)
            print(f"\n== {size} days: {size * args.per_day:,} articles, {files} log files, "
                  f"{size_bytes / 1e6:.0f} MB (written in {time.perf_counter() - t:.0f} s); "
                  f"load {load_average()[0]:.2f}", flush=True)
            story = day.newest_story()
            row: dict[str, Any] = {}
            kinds = [*KINDS, "sql-all"]
            for kind in kinds:
                for code_name in ("before", "after"):
                    if code_name not in codes or (kind == "sql-all" and code_name == "before"):
                        continue
                    measured = _measure(codes[code_name], root, kind, now, story, args.rss_cap, args.timeout)
                    row[f"{kind}/{code_name}"] = measured
                after = row[f"{kind}/after"]
                before = row.get(f"{kind}/before")
                same = "" if before is None or before["digest"] is None else (
                    "same answer" if before["digest"] == after["digest"] else "DIFFERENT ANSWER")
                line = f"  {kind:<10} after {_fmt(after)}"
                if before is not None:
                    line += f" | before {_fmt(before)} {same}"
                print(line, flush=True)
            results[str(size)] = {k: {"seconds": v["seconds"], "peak_mib": v["peak_mib"], "same": None}
                                  for k, v in row.items()}
            results[str(size)]["files"], results[str(size)]["log_mb"] = files, size_bytes / 1e6
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    sizes = sorted(args.days)
    summary: dict[str, Any] = {"per_day": args.per_day, "sizes": results}
    for kind in ("health", "dashboards", "sql-hour"):
        first, last = results[str(sizes[0])][f"{kind}/after"], results[str(sizes[-1])][f"{kind}/after"]
        if first["seconds"] and last["seconds"]:
            summary[f"{kind}_growth_{sizes[-1]}d_over_{sizes[0]}d"] = round(last["seconds"] / first["seconds"], 2)
    print_json_line(summary)
    return 0


def _fmt(m: dict[str, Any]) -> str:
    if m["seconds"] is None:
        return f"{m['summary']} (peak {m['peak_mib']:.0f} MiB)"
    return f"{m['seconds']:6.2f} s {m['peak_mib']:6.0f} MiB"


if __name__ == "__main__":
    raise SystemExit(main())
