"""The task runner for the fetch and extract fan-out: Dask when a scheduler is named, else threads."""

from __future__ import annotations

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from tasks.settings import ScaleSettings, get_scale_settings


def ingest_task_runner(settings: ScaleSettings | None = None) -> TaskRunner:  # type: ignore[type-arg]
    settings = settings or get_scale_settings()
    if settings.dask_scheduler_address:
        from prefect_dask import DaskTaskRunner

        return DaskTaskRunner(address=settings.dask_scheduler_address)
    return ThreadPoolTaskRunner(max_workers=settings.ingest_threads)
