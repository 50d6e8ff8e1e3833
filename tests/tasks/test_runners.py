"""Which runner the ingest fan-out gets: Dask when a scheduler is named, else processes, else threads."""

from __future__ import annotations

from prefect.task_runners import ProcessPoolTaskRunner, ThreadPoolTaskRunner
from prefect_dask import DaskTaskRunner

from tasks.runners import ingest_task_runner
from tasks.settings import ScaleSettings


def test_threads_by_default_processes_when_asked_dask_above_both() -> None:
    threads = ingest_task_runner(ScaleSettings(ingest_threads=3))  # type: ignore[call-arg]
    assert isinstance(threads, ThreadPoolTaskRunner) and threads._max_workers == 3
    processes = ingest_task_runner(ScaleSettings(ingest_processes=2))  # type: ignore[call-arg]
    assert isinstance(processes, ProcessPoolTaskRunner) and processes._max_workers == 2
    dask = ingest_task_runner(ScaleSettings(ingest_processes=2, dask_scheduler_address="tcp://127.0.0.1:8786"))  # type: ignore[call-arg]
    assert isinstance(dask, DaskTaskRunner)
