"""An unattended replay of one simulated hour: every cycle under Prefect, maintenance as scheduled.

Reports, per 10 cycles, the store's object count (which compaction must keep bounded), then runs
`newsroom health` and every documented example query at the end.

    python -m bench.soak_replay --minutes 60 [--limit 300] [--store var/soak/store]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.harness import REPO, import_checkout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--limit", type=int, default=None, help="corpus articles released (default: all)")
    parser.add_argument("--warmup", type=int, default=30,
                        help="minutes run before the measured hour, so feeds learn their publishing rates")
    parser.add_argument("--history", type=int, default=60,
                        help="simulated minutes the publishers have already published when polling starts "
                        "(real feeds are never empty at the first poll; their history seeds the rates)")
    parser.add_argument("--maintenance-every", type=int, default=15, help="cycles between maintenance runs")
    parser.add_argument("--keep-page-hours", type=float, default=0.25,
                        help="page versions kept for time travel (production default 48)")
    parser.add_argument("--store", default=None)
    args = parser.parse_args()

    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="soak-prefect-"))
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    store_dir = Path(args.store or tempfile.mkdtemp(prefix="soak-store-"))
    shutil.rmtree(store_dir, ignore_errors=True)

    # The pipeline test harness and the helpers it imports by their basenames, from tests/.
    import_checkout(REPO / "tests", ("pipeline_harness", "corpus_paths", "s3server"))
    from pipeline_harness import CORPORA, pipeline_env

    from flows.cycle import pipeline_cycle
    from flows.maintenance import maintain_store
    from replay.site import ReplaySite
    from tasks.health import check_health, health_report
    from tasks.progress import terminal_progress
    from tasks.registry import import_publishers
    from tasks.replay_control import download_publishers_csv
    from warehouse.duck import EXAMPLE_QUERIES, connect, load_example_sql

    start = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
    total = args.warmup + args.minutes
    site = ReplaySite.from_corpora(CORPORA, seed=7, start=start, span_hours=(args.history + total) / 60,
                                   limit=args.limit)
    site.start(port=0)
    counts = []
    began = time.perf_counter()
    try:
        with pipeline_env({"NEWSROOM_WAREHOUSE_ROOT": str(store_dir)}) as store:
            import_publishers(store, download_publishers_csv(site.control_url, store_dir.parent / "soak.csv"))
            with terminal_progress() as progress:
                advance = progress.stage("simulated minutes", total)
                for minute in range(1, total + 1):
                    now = start + timedelta(minutes=args.history + minute)
                    site.set_clock(now)
                    pipeline_cycle(now=now.isoformat())
                    if minute % args.maintenance_every == 0:
                        maintain_store(now=now.isoformat(), keep_page_hours=args.keep_page_hours)
                    if minute % 10 == 0:
                        counts.append((minute, len(store.list(""))))
                        print(f"minute {minute:>3}: {counts[-1][1]} objects, {time.perf_counter() - began:.0f}s",
                              flush=True)
                    advance(1)
            report = health_report(check_health(store, now))
            con = connect(store)
            rows = {name: len(con.sql(load_example_sql(name)).fetchall()) for name in EXAMPLE_QUERIES}
            con.close()
    finally:
        site.stop()
    print("health:", json.dumps(report))
    print("example queries (rows):", json.dumps(rows))
    print("object counts (minute, objects):", counts)
    return 0 if report["healthy"] and all(rows.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
