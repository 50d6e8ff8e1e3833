"""Polls per second against a synthetic publisher farm: our scheduler vs sequential httpx + feedparser.

Usage:
    .venv/bin/python -m bench.poll_throughput [--hosts 200] [--feeds-per-host 25] [--changed-share 0.2]
        [--workers 8] [--host-rate 5] [--baseline-sample 1000] [--parser lxml|feedparser|fastfeedparser]
        [--processes 2] [--profile 10] [--quick]

The farm (``python -m replay --synthetic-hosts ...``) runs in its own process on 127.0.1.x/127.0.2.x
and counts, per host, the peak number of requests in flight: politeness is checked from the
server's side. Both pollers start from the steady state of a previous cycle (stored ETags and guids),
so unchanged feeds answer 304 and changed ones 200 with one new item.

* ours: ``tasks.ingest.poll.poll_shard`` (conditional GET, parse_feed, interval decision, per-host
  queues with 2 requests in flight and a token bucket per host) over every feed;
* ``--parser feedparser``: ours with every feed parsed by feedparser (``parse_feed(parser="feedparser")``,
  the code before issue 20's lxml reader), for a before/after in one run;
* ``--parser fastfeedparser`` (a what-if, not the product): the same run with ``parse_feed`` swapped
  for a bench-only fastfeedparser adapter (no safety gate, fewer fields);
* ``--processes N``: ours with the feeds split into N shards of whole hosts, each polled by
  ``poll_shard`` in its own worker process, as the ingest flow runs with
  ``NEWSROOM_SCALE_INGEST_PROCESSES=N``: one process polls on one core at most (the interpreter
  lock), so this is how polling uses a second core; per-host politeness is unchanged, since a host
  lives in one shard;
* ``--profile N``: cProfile around every poll (each worker thread, timed by the thread's CPU clock),
  merged, and the top N functions by cumulative CPU time printed: where a poll's CPU goes (cProfile
  slows the run: read the shares, not the rate);
* baseline: a plain loop, one httpx.Client, GET with If-None-Match, feedparser on 200s, over an
  evenly spaced sample of the feeds (same 304/200 mix), measured in the same run.

Besides polls/s, each side's CPU per poll (this process, every thread; and the farm's, from
``/proc``) and the load average at the start and end are printed: on a shared machine the rates
move with the load, the CPU per poll much less, and a 2-core machine can poll at most about
2 / (ours + farm) polls per second.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import multiprocessing
import os
import pstats
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

import feedparser
import httpx

from bench.harness import REPO, load_average, machine_line, print_json_line
from tasks.ingest.plan import FeedJob
from tasks.ingest.poll import ShardResult, poll_shard
from tasks.settings import IngestSettings
from transforms.feeds import parse_feed
from transforms.records import FeedState

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
R = TypeVar("R")
QUICK = {"hosts": 100, "feeds_per_host": 10, "baseline_sample": 250}
"""``--quick``: 1,000 feeds on 100 hosts, a 250-poll baseline (the headline bench's short run)."""


def _start_farm(args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "replay", "--synthetic-hosts", str(args.hosts), "--feeds-per-host",
           str(args.feeds_per_host), "--changed-share", str(args.changed_share), "--items-per-feed",
           str(args.items_per_feed)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, line.split("control=")[1].split()[0]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux ``/proc``; 0.0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _steady_state(url: str, items_per_feed: int) -> FeedState:
    """The state a previous cycle left: the feed's validator and its guids."""
    parts = urlsplit(url)
    octets = parts.hostname.split(".")  # type: ignore[union-attr]
    host = (int(octets[2]) - 1) * 100 + int(octets[3]) - 1
    feed = int(parts.path.rsplit("/", 1)[-1].removesuffix(".xml"))
    return FeedState(url, etag=f'"s{host}-{feed}"',  # changed feeds have moved on from any old tag
                     recent_guids=tuple(f"h{host}-f{feed}-i{k}" for k in range(1, items_per_feed)), last_polled_at=NOW)


def _fast_parse_feed(body: bytes, url: str, **_: object) -> object:
    """Bench-only adapter: fastfeedparser output in the ParsedFeed shape poll_feed reads."""
    import fastfeedparser

    from transforms.feeds import FeedItem, ParsedFeed

    feed = fastfeedparser.parse(body)
    items = []
    for e in feed.entries[:200]:
        published = e.get("published")
        items.append(FeedItem(
            guid=e.get("id") or e.get("link") or e.get("title", ""), link=e.get("link") or None,
            title=e.get("title", ""), summary=e.get("description", ""),
            published_at=datetime.fromisoformat(published) if published else None, updated_at=None,
            categories=(), author=None, image_url=None, language=None))
    return ParsedFeed(title=feed.feed.get("title"), link=None, language=None, items=tuple(items), ttl_minutes=None,
                      skip_hours=frozenset(), skip_days=frozenset(), hub_url=None, self_url=None,
                      is_malformed=False, error=None)


def _profiled(function: Callable[..., R], profiles: list[cProfile.Profile]) -> Callable[..., R]:
    """``function`` run under a cProfile profile of its thread's own (cProfile sees one thread)."""
    local = threading.local()

    def run(*args: object, **kwargs: object) -> R:
        profile = getattr(local, "profile", None)
        if profile is None:
            # CPU time of this thread, not wall time: a poll's wait for the farm is not its cost.
            profile = local.profile = cProfile.Profile(time.thread_time)
            profiles.append(profile)
        profile.enable()
        try:
            return function(*args, **kwargs)
        finally:
            profile.disable()

    return run


def _top_cumulative(profiles: list[cProfile.Profile], count: int) -> list[dict[str, object]]:
    """The ``count`` functions with the most cumulative time over every thread's profile."""
    stats = pstats.Stats(profiles[0])
    for profile in profiles[1:]:
        stats.add(profile)
    rows = []
    for (path, line, function), (_, calls, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{Path(path).name}:{line}" if line else path
        rows.append({"function": f"{function} ({where})", "calls": calls, "cumulative_s": round(cumulative, 3)})
    rows.sort(key=lambda r: -float(r["cumulative_s"]))  # type: ignore[arg-type]
    return rows[:count]


def _ours(urls: list[str], args: argparse.Namespace) -> tuple[float, Counter[int | None], float, float]:
    # Feeds only (the farm's items link nowhere): no article workers to start beside the poller (issue 32).
    settings = IngestSettings(  # type: ignore[call-arg]
        allow_private_addresses=True, max_workers=args.workers, host_rate_per_second=args.host_rate,
        host_burst=args.host_burst, max_items_per_feed=100, article_workers=0,
    )
    jobs = [FeedJob(u, u, "p", "en", "US", "", _steady_state(u, args.items_per_feed), 1) for u in urls]
    if args.processes:
        return _ours_in_processes(jobs, settings, args.processes)
    started, cpu = time.perf_counter(), time.process_time()
    result = poll_shard(jobs, settings, NOW)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    statuses = Counter(r.status if not r.error_kind else None for r in result.reports)
    client_peak = max(s.max_in_flight for s in result.host_stats.values())
    return elapsed, statuses, client_peak, cpu


def _timed_shard(jobs: list[FeedJob], settings: IngestSettings) -> tuple[ShardResult, float]:
    """One shard in a worker process, and the CPU seconds it took there."""
    cpu = time.process_time()
    result = poll_shard(jobs, settings, NOW)
    return result, time.process_time() - cpu


def _ours_in_processes(jobs: list[FeedJob], settings: IngestSettings, processes: int
                       ) -> tuple[float, Counter[int | None], float, float]:
    """The feeds as ``processes`` shards of whole hosts, each polled by ``poll_shard`` in its own
    worker process: what ``NEWSROOM_SCALE_INGEST_PROCESSES`` (or Dask workers) gives the ingest flow.
    The workers are started and have imported the poller before the clock starts."""
    hosts = sorted({urlsplit(job.url).hostname or "" for job in jobs})
    shard_of = {host: i % processes for i, host in enumerate(hosts)}
    shards: list[list[FeedJob]] = [[] for _ in range(processes)]
    for job in jobs:
        shards[shard_of[urlsplit(job.url).hostname or ""]].append(job)
    context = multiprocessing.get_context("spawn")  # as Prefect's ProcessPoolTaskRunner starts them
    with ProcessPoolExecutor(max_workers=processes, mp_context=context) as pool:
        list(pool.map(_timed_shard, [[] for _ in range(processes)], [settings] * processes))  # warm: imports
        started = time.perf_counter()
        done = list(pool.map(_timed_shard, shards, [settings] * processes))
        elapsed = time.perf_counter() - started
    statuses = Counter(r.status if not r.error_kind else None for result, _ in done for r in result.reports)
    client_peak = max(s.max_in_flight for result, _ in done for s in result.host_stats.values())
    return elapsed, statuses, client_peak, sum(cpu for _, cpu in done)


def _baseline(urls: list[str], args: argparse.Namespace) -> tuple[float, Counter[int | None], float]:
    etags = {u: str(_steady_state(u, args.items_per_feed).etag) for u in urls}
    statuses: Counter[int | None] = Counter()
    with httpx.Client(trust_env=False, timeout=10) as client:
        started, cpu = time.perf_counter(), time.process_time()
        for url in urls:
            response = client.get(url, headers={"If-None-Match": etags[url]})
            if response.status_code == 200:
                feedparser.parse(io.BytesIO(response.content))
                etags[url] = response.headers.get("etag", etags[url])
            statuses[response.status_code] += 1
        return time.perf_counter() - started, statuses, time.process_time() - cpu


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--feeds-per-host", type=int, default=25)
    parser.add_argument("--changed-share", type=float, default=0.2)
    parser.add_argument("--items-per-feed", type=int, default=20)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--host-rate", type=float, default=5.0, help="token-bucket rate per host (req/s)")
    parser.add_argument("--host-burst", type=float, default=5.0)
    parser.add_argument("--baseline-sample", type=int, default=1000)
    parser.add_argument("--parser", choices=("lxml", "feedparser", "fastfeedparser"), default="lxml",
                        help="lxml: the product (lxml reader, feedparser when it declines); feedparser: every feed "
                             "through feedparser (before issue 20); fastfeedparser: bench-only what-if adapter")
    parser.add_argument("--processes", type=int, default=0, metavar="N",
                        help="poll in N worker processes, each a shard of whole hosts (the ingest flow with "
                             "NEWSROOM_SCALE_INGEST_PROCESSES=N); 0: one process, on threads")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="profile every poll and print the top N functions by cumulative time")
    parser.add_argument("--quick", action="store_true",
                        help=f"a short run: {QUICK['hosts']} hosts x {QUICK['feeds_per_host']} feeds, "
                             f"baseline of {QUICK['baseline_sample']}")
    args = parser.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    return args


def run(args: argparse.Namespace, report: Callable[[str], None] = lambda line: None) -> dict[str, object]:
    """One run: ours over every feed, then the sequential baseline over a sample; the figures as a dict."""
    import tasks.ingest.poll
    import tasks.ingest.readers

    if args.parser == "fastfeedparser":
        tasks.ingest.readers.parse_feed = _fast_parse_feed  # type: ignore[assignment]
    elif args.parser == "feedparser":
        tasks.ingest.readers.parse_feed = functools.partial(parse_feed, parser="feedparser")
    profiles: list[cProfile.Profile] = []
    if args.profile:
        tasks.ingest.poll.poll_feed = _profiled(tasks.ingest.poll.poll_feed, profiles)
    proc, control = _start_farm(args)
    try:
        with httpx.Client(trust_env=False, timeout=30) as client:
            urls = client.get(f"{control}/_replay/feeds").json()
            report(f"{machine_line()}; farm: {args.hosts} hosts x {args.feeds_per_host} feeds = {len(urls)} feeds, "
                   f"{args.changed_share:.0%} changing ({args.items_per_feed} items each), server in its own process")
            load_start = load_average()[0]
            farm_cpu = _cpu_seconds(proc.pid)
            elapsed, statuses, client_peak, cpu = _ours(urls, args)
            farm_cpu = _cpu_seconds(proc.pid) - farm_cpu
            server = client.get(f"{control}/_replay/stats").json()
            report(f"ours:     {len(urls)} polls in {elapsed:.2f} s = {len(urls) / elapsed:.0f} polls/s  "
                   f"statuses={dict(sorted(statuses.items(), key=str))}  parser={args.parser} workers={args.workers} "
                   f"processes={args.processes or 1} "
                   f"per-host limit=2 in flight, {args.host_rate:g} req/s (burst {args.host_burst:g})")
            report(f"          max in flight per host: server-side {server['max_in_flight_per_host']}, "
                   f"client-side {client_peak}; server saw {server['requests']} requests on "
                   f"{server['connections']} connections; "
                   f"rate ceiling (feeds per host - burst) / rate: {_rate_ceiling(args, len(urls)):.0f} polls/s")
            report(f"          CPU per poll: {1000 * cpu / len(urls):.2f} ms here (every thread), "
                   f"{1000 * farm_cpu / len(urls):.2f} ms in the farm")
            step = max(1, len(urls) // args.baseline_sample)
            sample = urls[::step][: args.baseline_sample]
            base_farm_cpu = _cpu_seconds(proc.pid)
            base_elapsed, base_statuses, base_cpu = _baseline(sample, args)
            base_farm_cpu = _cpu_seconds(proc.pid) - base_farm_cpu
            report(f"baseline: {len(sample)} polls in {base_elapsed:.2f} s = {len(sample) / base_elapsed:.0f} polls/s  "
                   f"statuses={dict(sorted(base_statuses.items(), key=str))}  (sequential httpx + feedparser), "
                   f"CPU per poll {1000 * base_cpu / len(sample):.2f} ms here, {1000 * base_farm_cpu / len(sample):.2f} ms in the farm")
            ratio = (len(urls) / elapsed) / (len(sample) / base_elapsed)
            report(f"speed-up: {ratio:.1f}x")
            figures: dict[str, object] = {
                "ours_polls_per_second": round(len(urls) / elapsed), "baseline_polls_per_second":
                round(len(sample) / base_elapsed), "ratio": round(ratio, 2), "parser": args.parser,
                "processes": args.processes,
                "feeds": len(urls), "hosts": args.hosts, "baseline_polls": len(sample),
                "ours_cpu_ms_per_poll": round(1000 * cpu / len(urls), 3),
                "baseline_cpu_ms_per_poll": round(1000 * base_cpu / len(sample), 3),
                "farm_cpu_ms_per_poll": [round(1000 * farm_cpu / len(urls), 3), round(1000 * base_farm_cpu / len(sample), 3)],
                "max_in_flight_per_host": server["max_in_flight_per_host"],
                "client_max_in_flight_per_host": client_peak,
                "rate_ceiling_polls_per_second": round(_rate_ceiling(args, len(urls))),
                "ours_connections": server["connections"],
                "load_average": [load_start, load_average()[0]],
            }
            if profiles:
                figures["profile_top_cumulative"] = _top_cumulative(profiles, args.profile)
            return figures
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _rate_ceiling(args: argparse.Namespace, feeds: int) -> float:
    """The most polls/s the per-host token buckets allow: each host's feeds beyond its burst at its rate."""
    seconds = max(0.0, args.feeds_per_host - args.host_burst) / args.host_rate
    return feeds / seconds if seconds else float("inf")


def main() -> int:
    args = parse_args()
    figures = run(args, report=print)
    for row in figures.get("profile_top_cumulative", []):  # type: ignore[union-attr]
        print(f"  {row['cumulative_s']:>8.3f} s  {row['calls']:>7}  {row['function']}")  # type: ignore[index]
    print_json_line(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
