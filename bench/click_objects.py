"""Objects written per 10,000 clicks: one object per click (before issue 19) against batched segments.

Each mode starts the real app under uvicorn in a child process on 127.0.0.1 over a temporary
local store, follows ``--clicks`` distinct signed click links (``GET /r/{token}``) from
``--connections`` keep-alive clients, stops the replica with SIGTERM, then counts the objects
under ``log/clicks/`` and the distinct click ids they hold (every click must be there: nothing is
lost on SIGTERM). Modes run in the same process one after the other:

* ``per_click``: the clicks log as it was before batching (issue 6), kept here as the baseline:
  one conditional PUT per click, before the redirect.
* ``batched``: the app's own ``BufferedClickLog`` with ``--flush-seconds`` (default 5, the
  setting's default): one segment per interval per UTC day, and one at shutdown.

Also reports each mode's redirect latency (p50, p99) and clicks/s.

    .venv/bin/python -m bench.click_objects                  # 10,000 clicks per mode
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import REPO, bench_command, percentile, run_clients

HMAC_KEY = "bench-click-objects-key-0123456789abcdef"


# -- server side (child process) -----------------------------------------------------------------


class PerClickLog:
    """The clicks log before issue 19 (serving/clicks.py ``StoreClickLog``): one object per click,
    put with If-None-Match before the redirect is answered."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def append(self, click: Any, clicked_at: datetime) -> bool:
        from serving.errors import ClickLogError
        from warehouse import layout
        from warehouse.errors import PreconditionFailedError, WarehouseError
        from warehouse.schemas import CLICKS_SCHEMA
        from warehouse.tables import check_schema, rows_to_table, table_to_parquet_bytes

        at = clicked_at.astimezone(UTC)
        key = layout.click_segment_key(at, click.click_id)
        row = {"click_id": click.click_id, "article_id": click.article_id, "story_id": click.story_id,
               "reader_hash": click.reader_hash, "surface": click.surface, "position": click.position,
               "clicked_at": at}
        table = check_schema(rows_to_table([row], CLICKS_SCHEMA), CLICKS_SCHEMA, key=key)
        try:
            self._store.put(key, table_to_parquet_bytes(table), if_none_match=True)
        except PreconditionFailedError:
            return False
        except (OSError, WarehouseError) as e:
            raise ClickLogError(f"click not stored: {type(e).__name__}") from e
        return True

    def flush(self) -> int:
        return 0

    def close(self) -> None:
        pass


def serve(root: Path, port: int, mode: str, flush_seconds: float) -> None:
    import uvicorn

    from serving.app import create_app
    from serving.settings import ServingSettings
    from warehouse.store import LocalStore

    store = LocalStore(root / "store")
    settings = ServingSettings(refresh_seconds=3600, profiles_path=str(root / "profiles.sqlite3"),
                               hmac_key=HMAC_KEY, click_flush_seconds=flush_seconds)  # type: ignore[arg-type]
    click_log = PerClickLog(store) if mode == "per_click" else None
    app = create_app(store, settings, click_log=click_log)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# -- client side --------------------------------------------------------------------------------


def mint(n: int) -> list[tuple[str, str]]:
    """``n`` distinct anonymous click tokens and their click ids."""
    from serving.signing import Signer

    signer = Signer(HMAC_KEY.encode(), click_ttl_seconds=86400, session_ttl_seconds=86400)
    out = []
    for i in range(n):
        token = signer.issue_click(article_id=f"a{i}", story_id=f"s{i % 300}", url=f"https://pub.example/{i}",
                                   reader_hash="", surface="top", position=i % 20)
        out.append((token, signer.verify_click(token).click_id))
    return out


def follow(port: int, tokens: list[str], connections: int) -> tuple[list[float], float]:
    """Follow every token once, split over ``connections`` keep-alive clients; latencies in ms."""
    latencies: list[list[float]] = [[] for _ in range(connections)]

    def run(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for token in tokens[k::connections]:
            t0 = time.perf_counter()
            conn.request("GET", f"/r/{token}")
            response = conn.getresponse()
            response.read()
            latencies[k].append((time.perf_counter() - t0) * 1000)
            if response.status != 302 or response.getheader("X-Click-Logged") == "false":
                raise RuntimeError(f"click not taken: {response.status} {response.getheader('X-Click-Logged')}")
        conn.close()

    elapsed = run_clients(run, connections)
    return [x for xs in latencies for x in xs], elapsed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_up(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/v1/editions")
            conn.getresponse().read()
            return
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def run_mode(mode: str, clicks: list[tuple[str, str]], connections: int, flush_seconds: float) -> dict[str, Any]:
    from warehouse import layout
    from warehouse.schemas import CLICKS_SCHEMA
    from warehouse.store import LocalStore
    from warehouse.tables import list_segments, read_segments

    with tempfile.TemporaryDirectory(prefix=f"newsroom-clicks-{mode}-") as tmp:
        root = Path(tmp)
        port = _free_port()
        server = subprocess.Popen(bench_command("click_objects", "--serve", str(root), str(port), mode,
                                                str(flush_seconds)), cwd=REPO)
        try:
            _wait_up(port, server)
            latencies, elapsed = follow(port, [t for t, _ in clicks], connections)
        finally:
            server.send_signal(signal.SIGTERM)  # the batched log writes its buffer on the way out
            server.wait(60)
        store = LocalStore(root / "store")
        keys = list_segments(store, layout.CLICKS_PREFIX)
        ids = set(read_segments(store, keys, CLICKS_SCHEMA).column("click_id").to_pylist())
        missing = len({c for _, c in clicks} - ids)
        size = sum(os.path.getsize(root / "store" / k) for k in keys)
    return {
        "clicks": len(clicks), "objects": len(keys), "objects_per_10k_clicks": round(len(keys) * 10_000 / len(clicks), 1),
        "clicks_missing_after_sigterm": missing, "bytes": size, "seconds": round(elapsed, 2),
        "clicks_per_s": round(len(clicks) / elapsed, 1),
        "redirect_p50_ms": round(statistics.median(latencies), 3),
        "redirect_p99_ms": round(percentile(latencies, 0.99), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--flush-seconds", type=float, default=5.0, help="the batched mode's interval")
    parser.add_argument("--serve", nargs=4, metavar=("ROOT", "PORT", "MODE", "FLUSH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve[0]), int(args.serve[1]), args.serve[2], float(args.serve[3]))
        return
    clicks = mint(args.clicks)
    summary: dict[str, Any] = {"connections": args.connections, "flush_seconds": args.flush_seconds}
    for mode in ("per_click", "batched"):
        summary[mode] = run_mode(mode, clicks, args.connections, args.flush_seconds)
    summary["objects_ratio_per_click_vs_batched"] = round(
        summary["per_click"]["objects"] / max(summary["batched"]["objects"], 1), 1)
    summary["redirect_p50_ratio_per_click_vs_batched"] = round(
        summary["per_click"]["redirect_p50_ms"] / summary["batched"]["redirect_p50_ms"], 2)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
