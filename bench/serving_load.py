"""Serving load bench: an edition page through the API, the same bytes as a static file, and For you.

Starts the real app under uvicorn in child processes on 127.0.0.1 (one worker each), publishes a
30-story en-US front page with the warehouse code into a temporary store, writes the very same
bytes to a folder the servers mount with StaticFiles, and seeds ``--readers`` profiles (follows,
hides, 50 reads, 40 weights each) in a SQLite file and, unless ``--no-postgres``, in a PostgreSQL
database on a throwaway server the bench starts (Debian's PostgreSQL, as the tests do:
tests/pgserver.py). Keep-alive HTTP/1.1 clients (threads, stdlib ``http.client``) then drive, in
alternating rounds so every way sees the same machine state:

* the edition page as a client that asks for no coding (the published bytes), as a browser or
  CDN does (``Accept-Encoding: gzip, deflate, br``: the brotli body the cache made once for this
  version, issue 20), and as the static file (no coding);
* signed-in readers' ``GET /v1/feed?limit=20`` (For you) on the SQLite server and on the
  PostgreSQL one;
* with ``--baseline-rev REV`` (issue 29), the same For you and edition page served by the code of
  git revision REV (``git archive`` into a temp folder; its app started with that folder first on
  the path), over the same store and the same profile databases, in the same rounds.

Each way reports requests, p50/p99 and req/s; the summary adds For you's rate against the edition
page's, PostgreSQL's against SQLite's, and each against the baseline. Also times the For-you re-rank
of a 1,000-story pool in process. ``--pool-stories 1000`` publishes a page per section beside the
front page, so For you ranks and pages a pool of the seeds' size (by default its pool is the
front page's 30 stories, as before issue 29).

``--no-profile-cache``: this code's servers read every profile from the store (profile cache off),
to see a request that misses the cache.

Search (issue 30): the store also holds a search index, built and published as rank does, over the
edition's stories and ``--search-stories`` more (the live window's stories no page lists), and a
``search`` way asks ``GET /v1/search`` (with its facets) a different query each time (a story's
number and a section, a phrase of a headline, a publisher...), so nearly every answer is computed
rather than taken from the replica's memo of answers.

``--cpu-per-request``: only the app's own CPU time per request, called in process through ASGI (no
sockets, no client, CPU time rather than wall time, so other work on a shared machine barely moves
it): the edition page and For you on SQLite, this code and, with ``--baseline-rev``, that revision.

``--profile-reads``: only the profile store itself, no HTTP: the same seeded profiles in SQLite
and PostgreSQL, then ``ProfileStore.load`` (what a For-you request that misses the cache reads)
from one thread, in alternating rounds; gives reads/s and the client's CPU ms per read for each,
their ratio, and PostgreSQL's own CPU ms per read (every process of the throwaway server, read
from /proc: the backend serving the reads, and its background writers). One thread is one pool
connection, so one PostgreSQL backend: the reads/s of about one core of each side (the README's
sizing table).

    .venv/bin/python -m bench.serving_load            # defaults: 4 rounds x 3 s, 8 connections
    .venv/bin/python -m bench.serving_load --no-postgres --rounds 3 --seconds 3 --baseline-rev 3a6d4c0
    .venv/bin/python -m bench.serving_load --quick    # 2 rounds x 1 s, For you on SQLite only (the headline bench)
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path
from typing import Any

from bench.harness import (
    REPO,
    bench_command,
    export_revision,
    import_checkout,
    interleaved_rounds,
    load_average,
    percentile,
    print_json_line,
    run_clients,
)

SECTIONS = ["world", "business", "technology", "science", "sports", "health", "politics", "culture",
            "climate", "travel", "education", "media"]


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_story(i: int, now: datetime, rng: random.Random) -> dict[str, Any]:
    section = SECTIONS[i % len(SECTIONS)]
    sources = []
    for j in range(rng.randint(2, 6)):
        pub = f"publisher-{rng.randint(0, 39):02d}"
        sources.append({
            "article_id": f"s{i:05d}-a{j}", "publisher_id": pub, "publisher": pub.replace("-", " ").title(),
            "title": f"Headline {i} from {pub} about {section} matters and regional battery budgets",
            "url": f"https://{pub}.example/news/{i}/{j}", "first_seen_at": _iso(now - timedelta(minutes=10 * j + i)),
            "is_copy": j == 5, "is_opinion": False, "region": "US",
        })
    return {
        "story_id": f"story{i:06d}", "rank": i + 1, "score": round(5.0 - i * 0.004, 4),
        "score_parts": {"coverage": 1.2, "freshness": 0.8}, "title": f"Story {i}: {section} leaders weigh new plan",
        "snippet": "A snippet of at most two hundred characters that says what happened and why it matters. " * 2,
        "image_url": f"https://img.example/{i}.jpg", "sections": [section], "language": "en",
        "first_seen_at": sources[-1]["first_seen_at"], "updated_at": sources[0]["first_seen_at"],
        "source_count": len(sources), "article_count": len(sources), "sources": sources,
    }


# -- server side (child process) -----------------------------------------------------------------


HMAC_KEY = "b" * 32


def serve(root: Path, port: int, profiles_url: str | None = None, code: str | None = None,
          profile_cache: bool = True) -> None:
    """Run the app (with the bench's static folder mounted) until terminated.

    ``code``: a folder holding another revision's packages (``--baseline-rev``), chosen before
    anything of the app is imported, so that revision's app is the one served.
    """
    if code is not None:
        import_checkout(Path(code))
    import uvicorn
    from fastapi.staticfiles import StaticFiles

    from serving.app import create_app
    from serving.settings import ServingSettings
    from warehouse.store import LocalStore

    # Unknown settings are ignored, so a revision from before the profile cache takes these too.
    extra = {} if profile_cache else {"profile_cache_size": 0}
    app = create_app(LocalStore(root / "store"), ServingSettings(
        refresh_seconds=3600, profiles_path=str(root / "profiles.sqlite3"), hmac_key=HMAC_KEY,
        profiles_url=profiles_url, personal_max_in_flight=256, **extra))  # type: ignore[arg-type]
    app.mount("/bench-static", StaticFiles(directory=root / "static"), name="bench-static")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def prepare(root: Path, pool_stories: int = 30, search_stories: int = 0) -> bytes:
    """The front page (30 stories) and, past 30 ``pool_stories``, a page per section holding the rest:
    For you's pool is every story of the edition's pages. With ``search_stories``, a search index of
    the pages' stories and that many more (issue 30). Returns the front page's bytes."""
    from warehouse import layout
    from warehouse.snapshots import PAGE_SCHEMA, publish_page
    from warehouse.store import LocalStore

    store = LocalStore(root / "store")
    now = datetime.now(UTC).replace(microsecond=0)
    rng = random.Random(7)
    stories = [make_story(i, now, rng) for i in range(max(30, pool_stories))]
    pages = {"top": stories[:30]}
    if pool_stories > 30:
        pages.update({section: [s for s in stories if section in s["sections"]] for section in SECTIONS})
    for section, page in pages.items():
        payload = {"schema": PAGE_SCHEMA, "edition": "en-US", "section": section, "version": 0, "as_of": _iso(now),
                   "stories": page}
        result = publish_page(store, "en-US", section, payload, now=now, validate=lambda new, prev: None)
        if section == "top":
            top_version = result.version
    data = store.get(layout.page_version_key("en-US", "top", top_version)).data
    if search_stories:
        publish_bench_index(store, stories, search_stories, now, rng)
    (root / "static").mkdir()
    (root / "static" / "en-US-top.json").write_bytes(data)
    return data


def publish_bench_index(store: Any, listed: list[dict[str, Any]], extra: int, now: datetime,
                        rng: random.Random) -> None:
    """A search index over the pages' stories and ``extra`` more, published as rank publishes it."""
    from tasks.search import snapshot_documents
    from warehouse.search_index import build_search_index, documents_digest
    from warehouse.search_versions import publish_search_index

    more = [make_story(len(listed) + i, now, rng) for i in range(extra)]
    stories = {s["story_id"]: dict(s, editions=["en-US"]) for s in [*listed, *more]}
    docs = snapshot_documents(stories, lambda sid: ())
    result = publish_search_index(store, lambda: build_search_index(docs, {"as_of": _iso(now)}),
                                  digest=documents_digest(docs), as_of=_iso(now), documents=len(docs), now=now,
                                  validate=lambda data: None)
    assert result.published, result


def search_paths(stories: int, n: int = 20_000, seed: int = 3) -> list[str]:
    """``n`` search requests, nearly all different (the replica memoises answers per query)."""
    from urllib.parse import urlencode

    rng = random.Random(seed)
    out = []
    for k in range(n):
        i, section = rng.randrange(stories), rng.choice(SECTIONS)
        query = [f"story {i} {section}", f'"{section} leaders" {i}', f"publisher {rng.randint(0, 39):02d} {i}",
                 f"battery budgets {section} OR story {i}"][k % 4]
        out.append(f"/v1/search?{urlencode({'q': query, 'edition': 'en-US'})}")
    return out


# -- client side --------------------------------------------------------------------------------


BROWSER_ENCODINGS = {"Accept-Encoding": "gzip, deflate, br"}


def drive(port: int, path: str, seconds: float, connections: int, budget: int,
          headers: list[dict[str, str]] | None = None, paths: list[str] | None = None) -> tuple[list[float], float, int]:
    """Hit ``path`` from ``connections`` keep-alive clients for ``seconds``; latencies in ms.

    With ``headers``, client ``k`` sends ``headers[k % len(headers)]``, ``headers[(k + n) % ...]``,
    ... in turn (signed-in readers); with ``paths``, it asks for those paths in the same way.
    """
    latencies: list[list[float]] = [[] for _ in range(connections)]
    sizes: list[int] = [0] * connections
    stop_at = time.perf_counter() + seconds
    per_client = max(budget // connections, 1)

    def run(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        mine = latencies[k]
        turn = k
        while time.perf_counter() < stop_at and len(mine) < per_client:
            sent = headers[turn % len(headers)] if headers else {}
            asked = paths[turn % len(paths)] if paths else path
            turn += connections
            t0 = time.perf_counter()
            conn.request("GET", asked, headers=sent)
            response = conn.getresponse()
            body = response.read()
            mine.append((time.perf_counter() - t0) * 1000)
            if response.status != 200:
                raise RuntimeError(f"{path}: HTTP {response.status}")
            sizes[k] = len(body)
        conn.close()

    elapsed = run_clients(run, connections)
    flat = [x for xs in latencies for x in xs]
    return flat, len(flat) / elapsed, max(sizes)


def bench_rerank(n: int = 1000, repeats: int = 300) -> dict[str, float]:
    from serving.foryou import build_pool, rank_for_you
    from serving.profiles import Profile

    rng = random.Random(11)
    now = datetime.now(UTC)
    stories = [make_story(i, now, rng) for i in range(n)]
    pool = build_pool([stories])
    profile = Profile(
        "bench",
        followed_topics=frozenset({"technology", "science"}),
        followed_sources=frozenset({"publisher-03"}),
        hidden_sources=frozenset({"publisher-07", "publisher-08", "publisher-09"}),
        hidden_stories=frozenset(f"story{i:06d}" for i in range(0, n, 97)),
        reads={f"story{i:06d}": now.timestamp() for i in range(0, n, 20)},
        topic_weights={s: rng.random() for s in SECTIONS[:10]},
        source_weights={f"publisher-{i:02d}": rng.random() for i in range(20)},
        term_weights={w: rng.random() for w in ["battery", "budgets", "regional", "leaders", "plan", "matters"]
                      + [f"term{i}" for i in range(58)]},
    )
    times, page_times = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ranking = rank_for_you(pool, profile)
        page = ranking.picks(0, 20)  # the whole order, then one page worded (the figure from before issue 29)
        times.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        first = rank_for_you(pool, profile)
        # What a For-you page reads since issue 29: its 21 first picks (one more: is there a next page?).
        reasons = [first.reason(i) for i in islice(first.iter_order(), 21)]
        page_times.append((time.perf_counter() - t0) * 1000)
    assert len(page) == 20 and [p.reason for p in page] == reasons[:20]
    return {"pool": len(pool), "ranked": len(ranking), "p50_ms": statistics.median(times),
            "p99_ms": percentile(times, 0.99), "page_p50_ms": statistics.median(page_times),
            "page_p99_ms": percentile(page_times, 0.99)}


# -- For you on each profile store --------------------------------------------------------------


def seed_profiles(profiles_at: str, readers: int) -> list[str]:
    """The same ``readers`` profiles in the store at ``profiles_at``; returns the readers' names."""
    from serving.profiles import SqliteProfileStore
    from serving.profiles_postgres import PostgresProfileStore
    from serving.signing import Signer
    from warehouse.profile_db import open_fold_store

    signer = Signer(HMAC_KEY.encode(), click_ttl_seconds=60, session_ttl_seconds=86400)
    store = (PostgresProfileStore(profiles_at) if profiles_at.startswith("postgresql://")
             else SqliteProfileStore(profiles_at))
    fold = open_fold_store(profiles_at)
    rng = random.Random(5)
    names = [f"reader{i:04d}" for i in range(readers)]
    now = datetime.now(UTC).timestamp()
    try:
        with fold.transaction() as tx:
            for name in names:
                reader = signer.reader_hash(name)
                weights = [("topic", s, rng.random(), now) for s in rng.sample(SECTIONS, 6)]
                weights += [("source", f"publisher-{rng.randint(0, 39):02d}", rng.random(), now) for _ in range(10)]
                weights += [("term", f"term{rng.randint(0, 500)}", rng.random(), now) for _ in range(24)]
                tx.replace_weights(reader, list({(k, key): (k, key, w, a) for k, key, w, a in weights}.values()))
        for name in names:
            reader = signer.reader_hash(name)
            store.follow(reader, "topic", rng.choice(SECTIONS))
            store.follow(reader, "source", f"publisher-{rng.randint(0, 39):02d}")
            store.hide(reader, "source", f"publisher-{rng.randint(0, 39):02d}")
            store.hide(reader, "story", f"story{rng.randint(0, 29):06d}")
            for j in range(50):
                store.record_read(reader, f"story{rng.randint(0, 999):06d}", now - j)
    finally:
        fold.close()
        store.close()
    return names


def start_server(root: Path, profiles_url: str | None = None, code: str | None = None,
                 profile_cache: bool = True) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = bench_command("serving_load", "--serve", str(root), str(port))
    cmd += ["--serve-profiles-url", profiles_url] if profiles_url else []
    cmd += ["--serve-code", code] if code else []
    cmd += [] if profile_cache else ["--serve-no-profile-cache"]
    server = subprocess.Popen(cmd, cwd=REPO)
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            return server, port
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise
            time.sleep(0.1)


def sessions(port: int, names: list[str]) -> list[dict[str, str]]:
    out = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for name in names:
        conn.request("POST", "/v1/session", body=json.dumps({"reader": name}),
                     headers={"content-type": "application/json"})
        response = conn.getresponse()
        out.append({"Authorization": f"Bearer {json.loads(response.read())['token']}"})
    conn.close()
    return out


def _summary(lat: list[float], rps: list[float], size: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"requests": len(lat), "p50_ms": round(percentile(lat, 0.5), 3),
                           "p99_ms": round(percentile(lat, 0.99), 3), "req_per_s": round(statistics.mean(rps), 1)}
    if size is not None:
        out = {"requests": out["requests"], "bytes": size, **{k: v for k, v in out.items() if k != "requests"}}
    return out


FEED_PATH = "/v1/feed?edition=en-US&limit=20"
SEARCH_PATH = "/v1/search"
PAGE_PATH, STATIC_PATH = "/v1/editions/en-US/top", "/bench-static/en-US-top.json"


def page_rounds(args: argparse.Namespace) -> dict[str, Any]:
    """Every way (see the module docstring) in alternating rounds over one store and one set of readers."""
    import contextlib

    from tasks.progress import terminal_progress
    from tests.pgserver import find_pg_binary, run_postgres

    if args.quick or args.no_for_you:
        args.no_postgres = True
        args.readers = min(args.readers, 50)
    with tempfile.TemporaryDirectory(prefix="newsroom-bench-") as tmp, contextlib.ExitStack() as stack:
        root = Path(tmp)
        data = prepare(root, args.pool_stories, args.search_stories)
        queries = search_paths(max(30, args.pool_stories) + args.search_stories) if args.search_stories else None
        profile_dbs: dict[str, str | None] = {"sqlite": None}
        names: list[str] = []
        if not args.no_for_you:
            names = seed_profiles(str(root / "profiles.sqlite3"), args.readers)
            if not args.no_postgres:
                if find_pg_binary("initdb") is None:
                    raise SystemExit("PostgreSQL is not installed (scripts/ensure-postgresql.sh); or pass --no-postgres")
                pg = stack.enter_context(run_postgres())
                profile_dbs["postgres"] = pg.create_database("bench_profiles")
                assert seed_profiles(str(profile_dbs["postgres"]), args.readers) == names
        baseline_code, commit = None, None
        if args.baseline_rev:
            commit = export_revision(args.baseline_rev, root / "baseline")
            baseline_code = str(root / "baseline")
        servers: list[subprocess.Popen[bytes]] = []

        def stop_servers() -> None:
            for server in servers:
                server.terminate()
                server.wait(10)

        stack.callback(stop_servers)

        def started(profiles_url: str | None, code: str | None = None) -> int:
            cache = code is not None or not args.no_profile_cache  # a baseline runs as it is
            server, port = start_server(root, profiles_url, code, profile_cache=cache)
            servers.append(server)
            return port

        # name -> (port, path, per-connection headers or None)
        ways: dict[str, tuple[int, str, list[dict[str, str]] | None]] = {}
        here = started(None)
        ways["api_edition_page"] = (here, PAGE_PATH, None)
        if queries:
            ways["search"] = (here, SEARCH_PATH, None)
        ways["api_edition_page_compressed"] = (here, PAGE_PATH, [BROWSER_ENCODINGS])
        ways["static_same_bytes"] = (here, STATIC_PATH, None)
        readers = sessions(here, names) if names else []
        if names:
            ways["for_you_sqlite"] = (here, FEED_PATH, readers)
            if "postgres" in profile_dbs:
                ways["for_you_postgres"] = (started(profile_dbs["postgres"]), FEED_PATH, readers)
        if baseline_code is not None:
            before = started(None, baseline_code)
            ways["baseline_api_edition_page"] = (before, PAGE_PATH, None)
            if names:
                ways["baseline_for_you_sqlite"] = (before, FEED_PATH, readers)
                if "postgres" in profile_dbs:
                    ways["baseline_for_you_postgres"] = (started(profile_dbs["postgres"], baseline_code), FEED_PATH,
                                                         readers)
        results: dict[str, dict[str, Any]] = {name: {"lat": [], "rps": [], "bytes": 0} for name in ways}
        for port, path, headers in ways.values():  # warm up every way (pools, caches, prepared statements)
            drive(port, path, 0.5, args.connections, 10_000, headers,
                  search_paths(100, 500, seed=99) if path == SEARCH_PATH else None)
        with terminal_progress() as progress:
            advance = progress.stage("rounds", args.rounds * len(ways))

            def one_round(name: str) -> Callable[[int], None]:
                def run(_: int) -> None:
                    port, path, headers = ways[name]
                    lat, rps, size = drive(port, path, args.seconds, args.connections, args.max_requests, headers,
                                           queries if path == SEARCH_PATH else None)
                    if path not in (FEED_PATH, SEARCH_PATH) and headers is None:
                        assert size == len(data), (name, size, len(data))
                    results[name]["lat"] += lat
                    results[name]["rps"].append(rps)
                    results[name]["bytes"] = size
                    advance(1)
                return run

            interleaved_rounds({name: one_round(name) for name in ways}, args.rounds)

    summary: dict[str, Any] = {"page_bytes": len(data), "connections": args.connections,
                               "rounds": args.rounds, "seconds_per_round": args.seconds,
                               "pool_stories": max(30, args.pool_stories)}
    for name in ("api_edition_page", "api_edition_page_compressed", "static_same_bytes"):
        summary[name] = _summary(results[name]["lat"], results[name]["rps"], results[name]["bytes"])
    summary["api_edition_page_compressed"]["coding"] = "br"
    rate = {name: statistics.mean(r["rps"]) for name, r in results.items()}
    summary["api_vs_static_rate"] = round(rate["api_edition_page"] / rate["static_same_bytes"], 3)
    summary["api_compressed_vs_static_rate"] = round(rate["api_edition_page_compressed"] / rate["static_same_bytes"], 3)
    summary["api_compressed_vs_plain_rate"] = round(rate["api_edition_page_compressed"] / rate["api_edition_page"], 3)
    summary["compression_ratio"] = round(len(data) / summary["api_edition_page_compressed"]["bytes"], 2)
    if "search" in results:
        summary["search"] = {"indexed_stories": max(30, args.pool_stories) + args.search_stories,
                             **_summary(results["search"]["lat"], results["search"]["rps"])}
        summary["search_vs_page_rate"] = round(rate["search"] / rate["api_edition_page"], 3)
        summary["search_vs_page_p50"] = round(summary["search"]["p50_ms"] / summary["api_edition_page"]["p50_ms"], 3)
        summary["search_vs_page_p99"] = round(summary["search"]["p99_ms"] / summary["api_edition_page"]["p99_ms"], 3)
    if names:
        for_you: dict[str, Any] = {"readers": args.readers, "profile_cache": not args.no_profile_cache}
        for store in profile_dbs:
            r = results[f"for_you_{store}"]
            for_you[store] = _summary(r["lat"], r["rps"])
        if "postgres" in for_you:
            for_you["postgres_vs_sqlite_p50"] = round(for_you["postgres"]["p50_ms"] / for_you["sqlite"]["p50_ms"], 3)
            for_you["postgres_vs_sqlite_rate"] = round(rate["for_you_postgres"] / rate["for_you_sqlite"], 3)
        summary["for_you_by_profile_store"] = for_you
        summary["for_you_vs_page_rate"] = round(rate["for_you_sqlite"] / rate["api_edition_page"], 3)
    if baseline_code is not None:
        baseline: dict[str, Any] = {"rev": args.baseline_rev, "commit": commit}
        for name in [n for n in results if n.startswith("baseline_")]:
            baseline[name.removeprefix("baseline_")] = _summary(results[name]["lat"], results[name]["rps"])
        summary["baseline"] = baseline
        summary["vs_baseline_rate"] = {name.removeprefix("baseline_"): round(rate[name.removeprefix("baseline_")]
                                                                             / rate[name], 3)
                                       for name in results if name.startswith("baseline_")}
    return summary


def _server_cpu_seconds(data_dir: Path) -> float:
    """CPU seconds (user + system) used so far by a PostgreSQL server: its postmaster and every child."""
    ticks = os.sysconf("SC_CLK_TCK")
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == postmaster or ppid == postmaster:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def bench_profile_reads(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``ProfileStore.load`` per second from one thread, SQLite against PostgreSQL, alternating rounds."""
    import contextlib

    from serving.profiles import SqliteProfileStore
    from serving.profiles_postgres import PostgresProfileStore
    from serving.signing import Signer
    from tests.pgserver import run_postgres

    signer = Signer(HMAC_KEY.encode(), click_ttl_seconds=60, session_ttl_seconds=86400)
    with contextlib.ExitStack() as stack:
        names = seed_profiles(str(root / "profiles.sqlite3"), args.readers)
        pg = stack.enter_context(run_postgres())
        url = pg.create_database("bench_profiles")
        assert seed_profiles(url, args.readers) == names
        stores = {"sqlite": SqliteProfileStore(str(root / "profiles.sqlite3")), "postgres": PostgresProfileStore(url)}
        for store in stores.values():
            stack.callback(store.close)
        readers = [signer.reader_hash(n) for n in names]
        for name, store in stores.items():  # warm up (pool, prepared statements)
            for reader in readers:
                assert store.load(reader).reads, name

        def one_round(store: Any) -> Callable[[int], dict[str, float]]:
            def run(_: int) -> dict[str, float]:
                server = _server_cpu_seconds(pg.data_dir)
                wall, cpu, i = time.perf_counter(), time.process_time(), 0
                while time.perf_counter() - wall < args.seconds:
                    store.load(readers[i % len(readers)])
                    i += 1
                return {"reads": i, "wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                        "server_cpu": _server_cpu_seconds(pg.data_dir) - server}
            return run

        rounds = interleaved_rounds({name: one_round(store) for name, store in stores.items()}, args.rounds)
        keys = ("reads", "wall", "cpu", "server_cpu")
        results = {name: {key: sum(r[key] for r in measured) for key in keys} for name, measured in rounds.items()}
    out: dict[str, Any] = {"readers": args.readers, "rounds": args.rounds, "seconds_per_round": args.seconds}
    for name, r in results.items():
        out[name] = {"reads": int(r["reads"]), "reads_per_s": round(r["reads"] / r["wall"], 1),
                     "client_cpu_ms_per_read": round(1000 * r["cpu"] / r["reads"], 3)}
    out["postgres"]["server_cpu_ms_per_read"] = round(1000 * results["postgres"]["server_cpu"]
                                                      / results["postgres"]["reads"], 3)
    # What the server spent while SQLite was read: its idle background work, the floor of the above.
    out["postgres"]["server_cpu_s_idle_rounds"] = round(results["sqlite"]["server_cpu"], 3)
    out["postgres_vs_sqlite_reads_per_s"] = round(out["postgres"]["reads_per_s"] / out["sqlite"]["reads_per_s"], 3)
    return out


def asgi_cpu(root: Path, code: str | None, rounds: int, requests: int) -> dict[str, float]:
    """CPU microseconds per request of the app called in process (no sockets, no client): the
    edition page and signed-in readers' For you, in alternating rounds; the best round of each.

    Runs in a child process (``--asgi-cpu``), so ``code`` (another revision's packages) can be the
    one imported. CPU time, not wall time: other work on the machine barely moves it.
    """
    if code is not None:
        import_checkout(Path(code))
    import asyncio

    from serving.app import create_app
    from serving.settings import ServingSettings
    from warehouse.store import LocalStore

    app = create_app(LocalStore(root / "store"), ServingSettings(  # type: ignore[arg-type]
        refresh_seconds=3600, profiles_path=str(root / "profiles.sqlite3"), hmac_key=HMAC_KEY,
        personal_max_in_flight=256))
    names = [f"reader{i:04d}" for i in range(200)]
    tokens = [app.state.signer.issue_session(name)[0] for name in names]

    def scope(path: str, query: bytes = b"", token: str | None = None) -> dict[str, Any]:
        headers = [(b"host", b"127.0.0.1")] + ([(b"authorization", f"Bearer {token}".encode())] if token else [])
        return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
                "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": query, "root_path": "",
                "headers": headers, "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}

    async def call(request: dict[str, Any]) -> None:
        status: list[int] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])

        await app(request, receive, send)
        assert status == [200], status

    async def run() -> dict[str, float]:
        page = [scope(PAGE_PATH)]
        feed = [scope("/v1/feed", b"edition=en-US&limit=20", token) for token in tokens]
        best = {"api_edition_page": float("inf"), "for_you_sqlite": float("inf")}
        async with app.router.lifespan_context(app):
            await asyncio.sleep(0.5)  # the profile cache's first poll
            for requests_of in (page, feed, feed):  # warm up: pool, cards, profiles
                for k in range(len(requests_of) * 2):
                    await call(requests_of[k % len(requests_of)])
            for _ in range(rounds):
                for name, requests_of in (("api_edition_page", page), ("for_you_sqlite", feed)):
                    started = time.process_time()
                    for k in range(requests):
                        await call(requests_of[k % len(requests_of)])
                    best[name] = min(best[name], (time.process_time() - started) / requests * 1e6)
        return {name: round(us, 1) for name, us in best.items()}

    return asyncio.run(run())


def bench_asgi_cpu(args: argparse.Namespace) -> dict[str, Any]:
    """``asgi_cpu`` for this code and, with ``--baseline-rev``, for that revision, over one store."""
    with tempfile.TemporaryDirectory(prefix="newsroom-bench-") as tmp:
        root = Path(tmp)
        prepare(root, args.pool_stories)
        names = seed_profiles(str(root / "profiles.sqlite3"), 200)
        assert names[0] == "reader0000"
        codes: dict[str, str | None] = {"this": None}
        out: dict[str, Any] = {"pool_stories": max(30, args.pool_stories), "rounds": args.rounds}
        if args.baseline_rev:
            out["baseline_commit"] = export_revision(args.baseline_rev, root / "baseline")
            codes["baseline"] = str(root / "baseline")
        for name, code in codes.items():
            cmd = bench_command("serving_load", "--asgi-cpu", str(root), "--rounds", str(args.rounds))
            cmd += ["--serve-code", code] if code else []
            child = subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, text=True)
            out[name] = json.loads(child.stdout)
            out[name]["for_you_vs_page_cpu"] = round(out[name]["api_edition_page"] / out[name]["for_you_sqlite"], 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds per way, alternating")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--max-requests", type=int, default=200_000, help="cap per round")
    parser.add_argument("--readers", type=int, default=200, help="seeded profiles for the For-you rounds")
    parser.add_argument("--no-postgres", action="store_true", help="For you on SQLite only")
    parser.add_argument("--pool-stories", type=int, default=30,
                        help="stories in For you's pool: past 30, section pages hold the rest (the seeds' pools: 1,000)")
    parser.add_argument("--baseline-rev", default=None, metavar="REV",
                        help="also serve the code of this git revision, in the same rounds")
    parser.add_argument("--no-profile-cache", action="store_true",
                        help="this code's servers read every profile from the store")
    parser.add_argument("--profile-reads", action="store_true",
                        help="only ProfileStore.load per second, SQLite against PostgreSQL (no HTTP)")
    parser.add_argument("--no-for-you", action="store_true", help="skip the For-you rounds on the profile stores")
    parser.add_argument("--search-stories", type=int, default=10_000,
                        help="stories in the search index beyond the pages' (0: no search rounds)")
    parser.add_argument("--cpu-per-request", action="store_true",
                        help="only the app's CPU per request, called in process: edition page and For you (SQLite)")
    parser.add_argument("--asgi-cpu", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="2 rounds of 1 s, For you on SQLite only, 50 readers")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    parser.add_argument("--serve", nargs=2, metavar=("ROOT", "PORT"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-profiles-url", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve-code", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve-no-profile-cache", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve[0]), int(args.serve[1]), args.serve_profiles_url, args.serve_code,
              profile_cache=not args.serve_no_profile_cache)
        return
    if args.asgi_cpu:
        print_json_line(asgi_cpu(Path(args.asgi_cpu), args.serve_code, args.rounds, 2000))
        return
    if args.cpu_per_request:
        print(json.dumps(bench_asgi_cpu(args), indent=2))
        return
    if args.profile_reads:
        with tempfile.TemporaryDirectory(prefix="newsroom-bench-") as tmp:
            print(json.dumps(bench_profile_reads(Path(tmp), args), indent=2))
        return
    if args.quick:
        args.rounds, args.seconds = 2, 1.0
    summary = page_rounds(args)
    summary["for_you_rerank"] = {k: round(v, 4) for k, v in bench_rerank(repeats=100 if args.quick else 300).items()}
    summary["load_average"] = load_average()
    if args.json:
        print_json_line(summary)
    else:
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
