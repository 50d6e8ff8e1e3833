"""Serving load bench: an edition page through the API vs the same bytes as a static file.

Starts the real app under uvicorn in a child process on 127.0.0.1 (one worker), publishes a
30-story en-US front page with the warehouse code into a temporary store, writes the very same
bytes to a folder the same server mounts with StaticFiles, then drives both URLs with keep-alive
HTTP/1.1 clients (threads, stdlib ``http.client``), alternating rounds so both see the same
machine state. Bounded by ``--seconds`` per round and ``--max-requests`` in total. Also times the
For-you re-rank of a 1,000-story pool in process.

For you with each profile store (issue 19): two more app processes over the same store, one with
the SQLite profile file and one with a PostgreSQL database on a throwaway server the bench starts
(Debian's PostgreSQL, as the tests do: tests/pgserver.py), each holding the same ``--readers``
seeded profiles (follows, hides, 50 reads, 40 weights). Signed-in readers' ``GET /v1/feed`` is
driven against both in alternating rounds; the summary gives each one's p50/p99 and the
PostgreSQL/SQLite p50 ratio. ``--no-postgres`` skips PostgreSQL (SQLite alone).

    .venv/bin/python bench/serving_load.py            # defaults: 4 rounds x 3 s, 8 connections
    .venv/bin/python bench/serving_load.py --quick    # 2 rounds x 1 s, For you on SQLite only (the headline bench)

The edition page is driven three ways in the same rounds (issue 20): as a client that asks for no
coding (the published bytes), as a browser or CDN does (``Accept-Encoding: gzip, deflate, br``:
the brotli body the cache made once for this version), and as the static file (no coding: the
static route does not compress). Each reports bytes per response, p50/p99 and req/s.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

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


def serve(root: Path, port: int, profiles_url: str | None = None) -> None:
    import uvicorn
    from fastapi.staticfiles import StaticFiles

    from serving.app import create_app
    from serving.settings import ServingSettings
    from warehouse.store import LocalStore

    app = create_app(LocalStore(root / "store"), ServingSettings(
        refresh_seconds=3600, profiles_path=str(root / "profiles.sqlite3"), hmac_key=HMAC_KEY,
        profiles_url=profiles_url, personal_max_in_flight=256))  # type: ignore[arg-type]
    app.mount("/bench-static", StaticFiles(directory=root / "static"), name="bench-static")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def prepare(root: Path) -> bytes:
    from warehouse import layout
    from warehouse.snapshots import PAGE_SCHEMA, publish_page
    from warehouse.store import LocalStore

    store = LocalStore(root / "store")
    now = datetime.now(UTC).replace(microsecond=0)
    rng = random.Random(7)
    stories = [make_story(i, now, rng) for i in range(30)]
    payload = {"schema": PAGE_SCHEMA, "edition": "en-US", "section": "top", "version": 0, "as_of": _iso(now),
               "stories": stories}
    result = publish_page(store, "en-US", "top", payload, now=now, validate=lambda new, prev: None)
    data = store.get(layout.page_version_key("en-US", "top", result.version)).data
    (root / "static").mkdir()
    (root / "static" / "en-US-top.json").write_bytes(data)
    return data


# -- client side --------------------------------------------------------------------------------


BROWSER_ENCODINGS = {"Accept-Encoding": "gzip, deflate, br"}


def drive(port: int, path: str, seconds: float, connections: int, budget: int,
          headers: list[dict[str, str]] | None = None) -> tuple[list[float], float, int]:
    """Hit ``path`` from ``connections`` keep-alive clients for ``seconds``; latencies in ms.

    With ``headers``, client ``k`` sends ``headers[k % len(headers)]``, ``headers[(k + n) % ...]``,
    ... in turn (signed-in readers).
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
            turn += connections
            t0 = time.perf_counter()
            conn.request("GET", path, headers=sent)
            response = conn.getresponse()
            body = response.read()
            mine.append((time.perf_counter() - t0) * 1000)
            if response.status != 200:
                raise RuntimeError(f"{path}: HTTP {response.status}")
            sizes[k] = len(body)
        conn.close()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(connections)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    flat = [x for xs in latencies for x in xs]
    return flat, len(flat) / elapsed, max(sizes)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


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
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ranking = rank_for_you(pool, profile)
        page = ranking.picks(0, 20)  # what one For-you request does: rank all, word one page
        times.append((time.perf_counter() - t0) * 1000)
    assert len(page) == 20
    return {"pool": len(pool), "ranked": len(ranking), "p50_ms": statistics.median(times),
            "p99_ms": pct(times, 0.99)}


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


def start_server(root: Path, profiles_url: str | None = None) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, __file__, "--serve", str(root), str(port)]
    cmd += ["--serve-profiles-url", profiles_url] if profiles_url else []
    server = subprocess.Popen(cmd, cwd=REPO)
    deadline = time.monotonic() + 60
    while True:
        try:
            http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/healthz")
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


def bench_for_you(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``GET /v1/feed`` p50 with the SQLite and (unless ``--no-postgres``) the PostgreSQL profile store."""
    import contextlib

    sys.path.insert(0, str(REPO / "tests"))
    from pgserver import find_pg_binary, run_postgres

    from tasks.progress import terminal_progress

    with contextlib.ExitStack() as stack:
        backends: dict[str, str | None] = {"sqlite": None}
        names = seed_profiles(str(root / "profiles.sqlite3"), args.readers)
        if not args.no_postgres:
            if find_pg_binary("initdb") is None:
                raise SystemExit("PostgreSQL is not installed (scripts/ensure-postgresql.sh); or pass --no-postgres")
            pg = stack.enter_context(run_postgres())
            backends["postgres"] = pg.create_database("bench_profiles")
            assert seed_profiles(str(backends["postgres"]), args.readers) == names
        servers: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
        try:
            for name, url in backends.items():
                servers[name] = start_server(root, url)
            readers = {name: sessions(port, names) for name, (_, port) in servers.items()}
            path = "/v1/feed?edition=en-US&limit=20"
            for name, (_, port) in servers.items():  # warm up (pool, prepared statements)
                drive(port, path, 0.5, args.connections, 2_000, readers[name])
            results: dict[str, dict[str, list[float]]] = {n: {"lat": [], "rps": []} for n in servers}
            with terminal_progress() as progress:
                advance = progress.stage("For-you rounds", args.rounds * len(servers))
                for _ in range(args.rounds):
                    for name, (_, port) in servers.items():
                        lat, rps, _ = drive(port, path, args.seconds, args.connections, args.max_requests,
                                            readers[name])
                        results[name]["lat"] += lat
                        results[name]["rps"].append(rps)
                        advance(1)
        finally:
            for server, _ in servers.values():
                server.terminate()
                server.wait(10)
    out: dict[str, Any] = {"readers": args.readers}
    for name, r in results.items():
        out[name] = {"requests": len(r["lat"]), "p50_ms": round(pct(r["lat"], 0.5), 3),
                     "p99_ms": round(pct(r["lat"], 0.99), 3), "req_per_s": round(statistics.mean(r["rps"]), 1)}
    if "postgres" in out:
        out["postgres_vs_sqlite_p50"] = round(out["postgres"]["p50_ms"] / out["sqlite"]["p50_ms"], 3)
    return out


def page_rounds(args: argparse.Namespace) -> dict[str, Any]:
    """The edition page via the API (plain and compressed) and as a static file, in alternating rounds."""
    with tempfile.TemporaryDirectory(prefix="newsroom-bench-") as tmp:
        root = Path(tmp)
        data = prepare(root)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen([sys.executable, __file__, "--serve", str(root), str(port)], cwd=REPO)
        api, static = "/v1/editions/en-US/top", "/bench-static/en-US-top.json"
        ways = {"api_edition_page": (api, None), "api_edition_page_compressed": (api, [BROWSER_ENCODINGS]),
                "static_same_bytes": (static, None)}
        results: dict[str, dict[str, Any]] = {name: {"lat": [], "rps": [], "bytes": 0} for name in ways}
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/healthz")
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            for path, headers in ways.values():  # warm up every way
                drive(port, path, 0.5, args.connections, 10_000, headers)
            for _ in range(args.rounds):
                for name, (path, headers) in ways.items():
                    lat, rps, size = drive(port, path, args.seconds, args.connections, args.max_requests, headers)
                    if headers is None:
                        assert size == len(data), (path, size, len(data))
                    results[name]["lat"] += lat
                    results[name]["rps"].append(rps)
                    results[name]["bytes"] = size
        finally:
            server.terminate()
            server.wait(10)
        if args.quick or args.no_for_you:
            args.no_postgres = True
            args.readers = min(args.readers, 50)
        for_you = bench_for_you(root, args) if not args.no_for_you else None

    summary: dict[str, Any] = {"page_bytes": len(data), "connections": args.connections,
                               "rounds": args.rounds, "seconds_per_round": args.seconds}
    for name in ways:
        lat = results[name]["lat"]
        summary[name] = {"requests": len(lat), "bytes": results[name]["bytes"], "p50_ms": round(pct(lat, 0.5), 3),
                         "p99_ms": round(pct(lat, 0.99), 3), "req_per_s": round(statistics.mean(results[name]["rps"]), 1)}
    summary["api_edition_page_compressed"]["coding"] = "br"
    summary["api_vs_static_rate"] = round(summary["api_edition_page"]["req_per_s"]
                                          / summary["static_same_bytes"]["req_per_s"], 3)
    summary["api_compressed_vs_static_rate"] = round(summary["api_edition_page_compressed"]["req_per_s"]
                                                     / summary["static_same_bytes"]["req_per_s"], 3)
    summary["api_compressed_vs_plain_rate"] = round(summary["api_edition_page_compressed"]["req_per_s"]
                                                    / summary["api_edition_page"]["req_per_s"], 3)
    summary["compression_ratio"] = round(len(data) / summary["api_edition_page_compressed"]["bytes"], 2)
    if for_you is not None:
        summary["for_you_by_profile_store"] = for_you
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds per URL, alternating")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--max-requests", type=int, default=200_000, help="cap per round")
    parser.add_argument("--readers", type=int, default=200, help="seeded profiles for the For-you rounds")
    parser.add_argument("--no-postgres", action="store_true", help="For you on SQLite only")
    parser.add_argument("--no-for-you", action="store_true", help="skip the For-you rounds on the profile stores")
    parser.add_argument("--quick", action="store_true", help="2 rounds of 1 s, For you on SQLite only, 50 readers")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    parser.add_argument("--serve", nargs=2, metavar=("ROOT", "PORT"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-profiles-url", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve[0]), int(args.serve[1]), args.serve_profiles_url)
        return
    if args.quick:
        args.rounds, args.seconds = 2, 1.0
    summary = page_rounds(args)
    summary["for_you_rerank"] = {k: round(v, 4) for k, v in bench_rerank(repeats=100 if args.quick else 300).items()}
    print(json.dumps(summary) if args.json else json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
