"""Scale-out: one ingest cycle on a local Dask cluster with 2 worker processes, and one on 2 worker
processes of this machine (``NEWSROOM_SCALE_INGEST_PROCESSES``), get the same articles as the run on
threads."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from pipeline_harness import START, pipeline_env, replay_site

from flows.ingest import ingest_feeds
from tasks.registry import import_publishers
from tasks.replay_control import download_publishers_csv
from tasks.runners import ingest_task_runner
from tasks.settings import ScaleSettings
from warehouse.duck import connect

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COLUMNS = "article_id, version, content_hash, canonical_url, publisher_id, title, snippet, first_seen_at, simhash"


def test_dask_run_matches_in_process_run(prefect_harness: None, tmp_path: Path) -> None:
    from distributed import LocalCluster
    from prefect_dask import DaskTaskRunner

    now = START + timedelta(minutes=90)
    articles: dict[str, list[tuple[object, ...]]] = {}
    wall: dict[str, float] = {}
    with replay_site(limit=80) as site, LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                                      host="127.0.0.1", dashboard_address=None) as cluster:
        site.set_clock(now)
        runs = {"in_process": ingest_feeds,
                "dask": ingest_feeds.with_options(task_runner=DaskTaskRunner(address=cluster.scheduler_address)),
                "processes": ingest_feeds.with_options(
                    task_runner=ingest_task_runner(ScaleSettings(ingest_processes=2)))}  # type: ignore[call-arg]
        for mode, flow in runs.items():
            with pipeline_env({"NEWSROOM_WAREHOUSE_ROOT": str(tmp_path / mode)}) as store:
                import_publishers(store, download_publishers_csv(site.control_url, tmp_path / "p.csv"))
                started = time.perf_counter()
                summary = flow(now=now.isoformat())
                wall[mode] = time.perf_counter() - started
                assert not summary["errors"], summary["errors"]
                con = connect(store)
                articles[mode] = con.sql(f"select {COLUMNS} from articles order by article_id").fetchall()
                con.close()
    print(f"ingest wall time: in-process {wall['in_process']:.2f}s, dask 2 workers {wall['dask']:.2f}s, "
          f"2 processes {wall['processes']:.2f}s")
    assert articles["in_process"], "the cycle found no articles"
    assert articles["dask"] == articles["in_process"]
    assert articles["processes"] == articles["in_process"]
