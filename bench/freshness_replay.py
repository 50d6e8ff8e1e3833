"""Freshness end to end, in real time (issue 31): from a publisher's post to a page a replica serves.

Usage:
    .venv/bin/python -m bench.freshness_replay [--minutes 20] [--warmup 5] [--history 40] [--tail 3]
        [--modes minute,events] [--burst-at 10] [--seed 7] [--keep DIR]

For each mode (``NEWSROOM_FRESHNESS_MODE``: ``minute`` is every step on its own clock, as before
issue 31; ``events`` the event-driven hand-offs), it brings the whole site up as ``newsroom up``
does (Prefect server, process worker, every deployment of prefect.yaml, the API replica, the WebSub
receiver), with the long-running writer (``NEWSROOM_SCALE_WRITER_MODE=long_running``) in both
modes, then starts the live replay site (``replay.live``) at 1x: 20 publishers posting on Poisson
schedules (wires 30 an hour, leading papers 20, others 4; fewer in Malay and Chinese), with
``--history`` minutes already in their feeds. Eight advertise the site's WebSub hub, three ping the
receiver when they post (this script sends the pings, as the publishers would), nine are only
polled. In the middle of the measured window an earthquake breaks: 14 reports from 11 English
publishers, twelve of them within two minutes (seed 003's 300 sources in 15 minutes, at this site's
scale).

The script watches, every half second and independently of the pipeline's own records: the article
log (first seen), the story-change log (in a story), the live story snapshot pointer (on a live
page) and the replica's ``/healthz`` (served by a replica), and polls the replica's English top
pages for the earthquake story on top, Breaking. It reports, per tier and for pushed vs polled
publishers, p50/p95/max of publish -> each stage for the articles published in the measured
window; the burst's first report -> Breaking on top of each English edition whose region
reported it; the freshness dashboard's published -> on a page p95 (the SQL the health flow runs)
against this script's own over the same articles; and the load average. The last line is one JSON
object (the events mode's figures, the minute mode's under ``before``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench.harness import REPO, load_average, machine_line, percentile
from flows.prefect_server import free_ports
from replay.corpus import load_corpus
from replay.live import LivePlan, LiveReplaySite, publisher_label

CORPORA = ("clustering/ecbplus-dev.jsonl", "clustering/mmds-dev.jsonl")
RATES = {"wire": 30.0, "lead": 20.0, "paper": 4.0, "lead:ms": 12.0, "paper:ms": 2.0, "lead:zh": 10.0,
         "paper:zh": 2.0}
KINDS = {"wire:US:en:1": "hub", "lead:GB:en:1": "hub", "paper:US:en:1": "hub", "paper:GB:en:1": "hub",
         "paper:SG:en:1": "hub", "lead:MY:ms:1": "hub", "lead:SG:zh:1": "hub", "paper:SG:zh:1": "hub",
         "lead:SG:en:1": "ping", "paper:SG:en:2": "ping", "lead:CN:zh:1": "ping"}
BURST_EVENT = "37_ecbplus"  # "6.1-magnitude quake strikes Indonesia's Aceh province", 14 reports
LEFT_OUT = ("37_ecb",)  # another Indonesian earthquake: left out so the burst is one story
# Twelve reports within two minutes from the wires and the leading papers of three regions (and the
# papers that push), then two from papers that are only polled.
BURST_OFFSETS = (0, 15, 25, 35, 45, 55, 65, 75, 85, 95, 105, 115, 300, 600)
BURST_PUBLISHERS = ("wire:US:en:1", "wire:GB:en:1", "lead:GB:en:1", "lead:US:en:1", "lead:SG:en:1",
                    "paper:US:en:1", "paper:GB:en:1", "paper:SG:en:1", "wire:US:en:1", "paper:SG:en:2",
                    "wire:GB:en:1", "lead:GB:en:1", "paper:US:en:2", "paper:GB:en:2")
STAGES = ("seen", "in_story", "on_page", "served")
STAGE_NAMES = {"seen": "first seen", "in_story": "in a story", "on_page": "on a live page",
               "served": "served by a replica"}
WATCH_SECONDS = 0.5
MASTER_SECRET = "freshness-bench-master-secret"


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def quantile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile, nearest rank (as the other benches report)."""
    return percentile(values, q) if values else None


def quantile_cont(values: list[float], q: float) -> float | None:
    """The ``q`` quantile interpolated between ranks, as DuckDB's ``quantile_cont`` (the dashboard's)."""
    ordered = sorted(values)
    if not ordered:
        return None
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(slots=True)
class Observed:
    """When this script first saw each article (by its canonical URL) at each stage, wall clock."""

    seen: dict[str, float] = field(default_factory=dict)
    in_story: dict[str, float] = field(default_factory=dict)
    on_page: dict[str, float] = field(default_factory=dict)
    served: dict[str, float] = field(default_factory=dict)
    article_url: dict[str, str] = field(default_factory=dict)  # our article id -> canonical URL
    story_of: dict[str, str] = field(default_factory=dict)  # canonical URL -> story id (live snapshot)
    first_version: dict[str, int] = field(default_factory=dict)  # canonical URL -> first snapshot listing it
    breaking_on_top: dict[str, float] = field(default_factory=dict)  # edition -> wall clock
    load: list[float] = field(default_factory=list)


class Watcher:
    """Threads that watch the store and the replica (see the module doc)."""

    def __init__(self, store: Any, api: str, observed: Observed, burst_urls: set[str], editions: list[str],
                 burst_from: float) -> None:
        self.store, self.api, self.o = store, api, observed
        self.burst_urls, self.editions, self.burst_from = burst_urls, editions, burst_from
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, args=(f,), daemon=True)
                        for f in (self._logs, self._snapshot, self._replica, self._breaking, self._load)]
        self._segments: set[str] = set()
        self._changes: set[str] = set()
        self._version = 0
        self._versions: dict[int, set[str]] = {}
        self._served_version = 0

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)

    def _loop(self, step: Callable[[], None]) -> None:
        while not self.stop.wait(WATCH_SECONDS):
            try:
                step()
            except Exception as e:  # noqa: BLE001 - a transient read error: the next look catches up
                _say(f"      (watch {step.__name__}: {type(e).__name__}: {e})")

    def _logs(self) -> None:
        from warehouse import layout
        from warehouse.schemas import ARTICLES_SCHEMA, STORY_CHANGES_SCHEMA
        from warehouse.tables import list_segments, read_segment

        for key in sorted(set(list_segments(self.store, layout.ARTICLES_PREFIX)) - self._segments):
            at = time.time()
            for row in read_segment(self.store, key, ARTICLES_SCHEMA).to_pylist():
                url = row["canonical_url"] or row["url"]
                self.o.article_url[row["article_id"]] = url
                self.o.seen.setdefault(url, at)
            self._segments.add(key)
        for key in sorted(set(list_segments(self.store, layout.STORY_CHANGES_PREFIX)) - self._changes):
            at = time.time()
            for row in read_segment(self.store, key, STORY_CHANGES_SCHEMA).to_pylist():
                url = self.o.article_url.get(row["article_id"] or "")
                if url and row["kind"] in ("new_story", "assign", "copy"):
                    self.o.in_story.setdefault(url, at)
            self._changes.add(key)

    def _snapshot(self) -> None:
        from warehouse.snapshots import read_stories_pointer

        pointer = read_stories_pointer(self.store)
        if pointer is None or pointer.version == self._version:
            return
        at = time.time()
        urls = self._version_urls(pointer.version)
        for url in urls:
            self.o.on_page.setdefault(url, at)
            self.o.first_version.setdefault(url, pointer.version)
        self._version = pointer.version

    def _version_urls(self, version: int) -> set[str]:
        from warehouse import layout

        if version not in self._versions:
            snapshot = json.loads(self.store.get(layout.story_snapshot_key(version)).data)
            urls = set()
            for story_id, story in snapshot["stories"].items():
                for source in story["sources"]:
                    url = self.o.article_url.get(source["article_id"]) or source.get("url")
                    if url:
                        urls.add(url)
                        self.o.story_of[url] = story_id
            self._versions[version] = urls
        return self._versions[version]

    def _replica(self) -> None:
        health = httpx.get(f"{self.api}/healthz", timeout=5).json()
        version = health.get("stories_version") or 0
        if version <= self._served_version:
            return
        at = time.time()
        for v in range(self._served_version + 1, version + 1):
            try:
                urls = self._version_urls(v)
            except Exception:  # noqa: BLE001 - a version pruned meanwhile, or never written
                continue
            for url in urls:
                self.o.served.setdefault(url, at)
        self._served_version = version

    def _breaking(self) -> None:
        if time.time() < self.burst_from:
            return
        quake = {self.o.story_of[u] for u in self.burst_urls if u in self.o.story_of}
        for edition in self.editions:
            if edition in self.o.breaking_on_top:
                continue
            response = httpx.get(f"{self.api}/v1/editions/{edition}/top", timeout=5)
            if response.status_code != 200:
                continue
            stories = response.json().get("stories") or []
            if stories and stories[0].get("is_breaking") and stories[0]["story_id"] in quake:
                self.o.breaking_on_top[edition] = time.time()

    def _load(self) -> None:
        if not self.o.load or time.time() - self._last_load >= 15:
            self.o.load.append(load_average()[0])
            self._last_load = time.time()

    _last_load = 0.0


class Pinger(threading.Thread):
    """The ``ping`` publishers: POST /ping/{id} to the receiver when they post (retrying after a 429)."""

    def __init__(self, site: LiveReplaySite, receiver: str, token: Callable[[str], str]) -> None:
        super().__init__(daemon=True)
        self.queue = sorted(site.pings())
        self.receiver, self.token = receiver, token
        self.stop = threading.Event()
        self.sent = 0

    def run(self) -> None:
        now = datetime.now(UTC)
        queue = [(at, p) for at, p in self.queue if at > now - timedelta(seconds=5)]
        while queue and not self.stop.is_set():
            at, publisher = queue.pop(0)
            wait = (at - datetime.now(UTC)).total_seconds()
            if wait > 0 and self.stop.wait(wait):
                return
            try:
                answer = httpx.post(f"{self.receiver}/ping/{publisher}", timeout=5,
                                    headers={"Authorization": f"Bearer {self.token(publisher)}"})
            except httpx.HTTPError:
                answer = None
            if answer is not None and answer.status_code == 429:
                retry = datetime.now(UTC) + timedelta(seconds=int(answer.headers.get("retry-after", "5")))
                if not any(p == publisher and t <= retry for t, p in queue):
                    queue.append((retry, publisher))
                    queue.sort()
            elif answer is not None and answer.status_code == 202:
                self.sent += 1


def _newsroom(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def _wait(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(1)
    return False


def run_mode(mode: str, args: argparse.Namespace, corpus: list[Any], run_dir: Path) -> dict[str, Any]:
    """One real-time run with ``NEWSROOM_FRESHNESS_MODE=mode``; returns its measurements."""
    from tasks.registry import import_publishers
    from tasks.replay_control import download_publishers_csv
    from tasks.settings import WebSubSettings
    from warehouse.store import LocalStore
    from websub.receiver import ping_token

    run_dir.mkdir(parents=True, exist_ok=True)
    store_dir = run_dir / "store"
    prefect_port, api_port, websub_port = free_ports(3)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "NEWSROOM_"))}
    env.update({
        "PYTHONPATH": str(REPO), "NEWSROOM_WAREHOUSE_ROOT": str(store_dir),
        "NEWSROOM_INGEST_ALLOW_PRIVATE_ADDRESSES": "true", "NEWSROOM_SCALE_WRITER_MODE": "long_running",
        "NEWSROOM_FRESHNESS_MODE": mode, "NEWSROOM_WEBSUB_ENABLED": "true",
        "NEWSROOM_WEBSUB_CALLBACK_BASE_URL": f"http://127.0.0.1:{websub_port}",
        "NEWSROOM_WEBSUB_MASTER_SECRET": MASTER_SECRET, "NEWSROOM_WEBSUB_BIND_PORT": str(websub_port),
        "NEWSROOM_SERVING_HMAC_KEY": "b" * 40, "NEWSROOM_SERVING_PROFILES_PATH": str(run_dir / "profiles.sqlite3"),
        "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    })
    api = f"http://127.0.0.1:{api_port}"
    _say(f"[{mode}] newsroom up (Prefect server, worker, every deployment, API, WebSub receiver) in {run_dir}")
    began = time.monotonic()
    up = _newsroom(["up", "--prefect-port", str(prefect_port), "--port", str(api_port)], run_dir, env)
    site: LiveReplaySite | None = None
    watcher: Watcher | None = None
    pinger: Pinger | None = None
    try:
        if up.returncode != 0:
            raise SystemExit(f"newsroom up failed:\n{up.stdout[-3000:]}\n{up.stderr[-3000:]}")
        if not _wait(lambda: httpx.get(f"http://127.0.0.1:{websub_port}/healthz", timeout=2).status_code == 200, 120):
            raise SystemExit(f"the WebSub receiver did not start; see {run_dir}/var/run/websub.log")
        _say(f"[{mode}] up in {time.monotonic() - began:.0f} s; starting the publishers")
        time.sleep(20)  # the long-running flows' first runs are under way
        now = datetime.now(UTC).replace(microsecond=0)
        measure_from = now + timedelta(minutes=args.warmup)
        measure_to = measure_from + timedelta(minutes=args.minutes)
        burst_at = measure_from + timedelta(minutes=args.burst_at)
        plan = LivePlan(start=now - timedelta(minutes=args.history),
                        end=measure_to + timedelta(minutes=args.tail), rates=RATES, kinds=KINDS,  # type: ignore[arg-type]
                        burst_event=BURST_EVENT, burst_at=burst_at, burst_offsets_seconds=BURST_OFFSETS,
                        burst_publishers=BURST_PUBLISHERS, left_out_events=LEFT_OUT)
        site = LiveReplaySite(corpus, plan, seed=args.seed, speed=1.0)
        site.start(port=0)
        store = LocalStore(store_dir)
        import_publishers(store, download_publishers_csv(site.control_url, run_dir / "publishers.csv"))
        websub = WebSubSettings(master_secret=MASTER_SECRET)  # type: ignore[arg-type]
        pinger = Pinger(site, f"http://127.0.0.1:{websub_port}", lambda p: ping_token(websub, p))
        pinger.start()
        burst = [a for a in site.articles if a.event == BURST_EVENT]
        observed = Observed()
        watcher = Watcher(store, api, observed, {a.url for a in burst}, ["en-GB", "en-SG", "en-US"],
                          burst_at.timestamp())
        watcher.start()
        end = measure_to + timedelta(minutes=args.tail)
        _say(f"[{mode}] {len(site.publishers)} publishers, {len(site.articles)} posts scheduled; measuring "
             f"{measure_from:%H:%M:%S}-{measure_to:%H:%M:%S}Z, earthquake at {burst_at:%H:%M:%S}Z, until {end:%H:%M:%S}Z")
        while datetime.now(UTC) < end:
            time.sleep(min(30.0, max(0.0, (end - datetime.now(UTC)).total_seconds())))
            _say(f"      {datetime.now(UTC):%H:%M:%S}Z  seen {len(observed.seen)}  in a story {len(observed.in_story)}"
                 f"  on a page {len(observed.on_page)}  served {len(observed.served)}  load {load_average()[0]:.1f}")
        watcher.join()
        pinger.stop.set()
        return measure(mode, site, observed, store, measure_from, measure_to, burst_at, pinger.sent)
    finally:
        if watcher is not None:
            watcher.join()
        if pinger is not None:
            pinger.stop.set()
        down = _newsroom(["down"], run_dir, env, timeout=300)
        _say(f"[{mode}] newsroom down: {down.stdout.strip()}")
        if site is not None:
            site.stop()


def _lags(site: LiveReplaySite, observed: Observed, articles: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"articles": len(articles)}
    for stage in STAGES:
        times = getattr(observed, stage)
        lags = [times[a.url] - a.published_at.timestamp() for a in articles if a.url in times]
        out[stage] = {"n": len(lags), "p50": quantile(lags, 0.5), "p95": quantile(lags, 0.95),
                      "max": max(lags, default=None)}
    return out


def measure(mode: str, site: LiveReplaySite, observed: Observed, store: Any, measure_from: datetime,
            measure_to: datetime, burst_at: datetime, pings: int) -> dict[str, Any]:
    """Per group, publish -> each stage; the burst; the dashboard against this script's own figure."""
    tiers = {p.publisher_id: p.tier for p in site.publishers}
    window = [a for a in site.articles if measure_from <= a.published_at < measure_to]
    groups: dict[str, list[Any]] = defaultdict(list)
    for a in window:
        pushed = "pushed" if site.kind(a.publisher_id) != "polled" else "polled"
        groups[f"{pushed}, tier {tiers[a.publisher_id]}"].append(a)
        groups[pushed].append(a)
        groups[site.kind(a.publisher_id)].append(a)
    report: dict[str, Any] = {"mode": mode, "groups": {k: _lags(site, observed, v) for k, v in sorted(groups.items())},
                              "pings_sent": pings}
    labels = {p.publisher_id: publisher_label(p, site.publishers) for p in site.publishers}
    burst = sorted((a for a in site.articles if a.event == BURST_EVENT), key=lambda a: a.published_at)
    first = burst[0].published_at.timestamp()
    early = burst[:12]
    regions = defaultdict(int)
    for a in early:
        regions[labels[a.publisher_id].split(":")[1]] += 1
    right = sorted(f"en-{r}" for r, n in regions.items() if n / len(early) >= 0.2)
    report["breaking"] = {"first_report": burst_at.isoformat(), "right_editions": right,
                          "on_top_s": {e: round(t - first, 1) for e, t in sorted(observed.breaking_on_top.items())},
                          "twelfth_report_s": round(early[-1].published_at.timestamp() - first, 1)}
    on_right = [observed.breaking_on_top.get(e) for e in right]
    report["breaking_on_top_s"] = round(max(on_right) - first, 1) if on_right and None not in on_right else None
    report["dashboard"] = dashboard_comparison(site, observed, store)
    report["load_avg"] = {"mean": round(sum(observed.load) / len(observed.load), 2) if observed.load else None,
                          "max": round(max(observed.load), 2) if observed.load else None}
    return report


def dashboard_comparison(site: LiveReplaySite, observed: Observed, store: Any) -> dict[str, Any]:
    """The freshness dashboard's published -> on a page p95 (all tiers, the health flow's SQL over the
    last 24 hours) against this script's own over the same articles."""
    from tasks.sql import open_warehouse
    from warehouse.duck import load_sql, sources_named_in

    now = datetime.now(UTC)
    sql = load_sql("dashboard_freshness")
    con = open_warehouse(store, sources_named_in(sql, "select 1 from articles"))
    try:
        result = con.sql(sql, params={"now": now})
        rows = [dict(zip(result.columns, row, strict=True)) for row in result.fetchall()]
        stated = dict(con.sql("select coalesce(canonical_url, url), min(published_at) from articles "
                              "where version = 1 group by 1").fetchall())
    finally:
        con.close()
    whole = next((r for r in rows if r["stage"] == "published -> on a page" and r["tier"] is None), None)
    by_url = {a.url: a for a in site.articles}
    own = [observed.on_page[u] - by_url[u].published_at.timestamp() for u in observed.on_page
           if u in by_url and u in stated and stated[u] is not None and observed.on_page[u] >= by_url[u].published_at.timestamp()]
    return {"dashboard_p95_s": round(whole["p95_seconds"], 1) if whole else None,
            "dashboard_articles": whole["articles"] if whole else 0,
            "replay_p95_s": round(quantile_cont(own, 0.95), 1) if own else None, "replay_articles": len(own)}


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def print_table(reports: list[dict[str, Any]]) -> None:
    _say("")
    _say("| mode | publishers | posts | " + " | ".join(f"publish -> {STAGE_NAMES[s]} p50 / p95 / max (s)" for s in STAGES) + " |")
    _say("|---|---|---|" + "---|" * len(STAGES))
    for r in reports:
        for group, g in r["groups"].items():
            cells = [f"{_fmt(g[s]['p50'])} / {_fmt(g[s]['p95'])} / {_fmt(g[s]['max'])}"
                     + (f" ({g['articles'] - g[s]['n']} never)" if g[s]["n"] < g["articles"] else "") for s in STAGES]
            _say(f"| {r['mode']} | {group} | {g['articles']} | " + " | ".join(cells) + " |")
    _say("")
    for r in reports:
        b, d = r["breaking"], r["dashboard"]
        _say(f"{r['mode']}: earthquake first report {b['first_report']}, twelfth report +{b['twelfth_report_s']} s; "
             f"Breaking on top (served) {b['on_top_s'] or 'never'} of {', '.join(b['right_editions'])} -> "
             f"{_fmt(r['breaking_on_top_s'])} s")
        _say(f"{r['mode']}: freshness dashboard published -> on a page p95 {_fmt(d['dashboard_p95_s'])} s over "
             f"{d['dashboard_articles']} articles; this script's {_fmt(d['replay_p95_s'])} s over {d['replay_articles']}; "
             f"load average mean {r['load_avg']['mean']}, max {r['load_avg']['max']}; pings sent {r['pings_sent']}")


def headline(report: dict[str, Any]) -> dict[str, Any]:
    groups = report["groups"]
    return {"pushed_publish_to_page_p95_s": groups.get("pushed", {}).get("on_page", {}).get("p95"),
            "polled_tier1_publish_to_page_p95_s": groups.get("polled, tier 1", {}).get("on_page", {}).get("p95"),
            "breaking_on_top_s": report["breaking_on_top_s"],
            "pushed_publish_to_served_p95_s": groups.get("pushed", {}).get("served", {}).get("p95"),
            "polled_tier1_publish_to_served_p95_s": groups.get("polled, tier 1", {}).get("served", {}).get("p95"),
            "dashboard_p95_s": report["dashboard"]["dashboard_p95_s"],
            "replay_p95_s": report["dashboard"]["replay_p95_s"], "load_avg_mean": report["load_avg"]["mean"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=20, help="measured window (real minutes)")
    parser.add_argument("--warmup", type=float, default=5, help="minutes run before the measured window")
    parser.add_argument("--history", type=float, default=20, help="minutes already in the feeds at the start")
    parser.add_argument("--tail", type=float, default=3, help="minutes after the window for its last posts to flow")
    parser.add_argument("--burst-at", type=float, default=10, help="minutes into the window the earthquake breaks")
    parser.add_argument("--modes", default="minute,events", help="NEWSROOM_FRESHNESS_MODE values, run in turn")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--corpus-dir", default=os.environ.get("NEWSROOM_CORPUS_DIR", str(REPO.parent / "shared" / "corpus")))
    parser.add_argument("--keep", default=None, help="keep each run's store and logs under this folder")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    corpus_dir = Path(args.corpus_dir)
    if not corpus_dir.is_dir():
        corpus_dir = Path("/work/shared/corpus")
    corpus = load_corpus([corpus_dir / c for c in CORPORA])
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="freshness-"))
    _say(f"freshness replay: {machine_line()} at the start; "
         f"{args.history:.0f} min history, {args.warmup:.0f} min warm-up, {args.minutes:.0f} min measured, "
         f"modes {args.modes}")
    reports = []
    try:
        for mode in args.modes.split(","):
            reports.append(run_mode(mode, args, corpus, root / mode))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print_table(reports)
    by_mode = {r["mode"]: r for r in reports}
    result = headline(by_mode["events"]) if "events" in by_mode else {}
    if "minute" in by_mode:
        result["before"] = headline(by_mode["minute"])
    result["reports"] = reports
    _say(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
