"""The task runner for the fetch and extract fan-out: Dask when a scheduler is named, else worker
processes when asked for, else threads."""

from __future__ import annotations

from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner, ThreadPoolTaskRunner

from tasks.settings import ScaleSettings, get_scale_settings


def ingest_task_runner(settings: ScaleSettings | None = None) -> TaskRunner:  # type: ignore[type-arg]
    """Dask (``dask_scheduler_address``), else ``ingest_processes`` worker processes on this machine,
    else ``ingest_threads`` threads in the flow's process. A shard holds whole hosts, so each host's
    politeness (requests in flight, its token bucket) lives in one worker whichever runner it is."""
    settings = settings or get_scale_settings()
    if settings.dask_scheduler_address:
        from prefect_dask import DaskTaskRunner

        return DaskTaskRunner(address=settings.dask_scheduler_address)
    if settings.ingest_processes:
        return ProcessPoolTaskRunner(max_workers=settings.ingest_processes)
    return ThreadPoolTaskRunner(max_workers=settings.ingest_threads)
