"""The task runner for the fetch and extract fan-out: Dask when a scheduler is named, else worker
processes when asked for, else threads."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner, ThreadPoolTaskRunner

from tasks.settings import ScaleSettings, get_scale_settings

ORPHAN_CHECK_SECONDS = 0.5
"""How often a worker process checks that the process that started it is still alive."""


def exit_with_parent() -> None:
    """Make this worker process exit as soon as the process that started it dies (issue 32).

    A pool's workers wait for work on a pipe they also hold the writing end of, so a flow process
    killed with SIGKILL used to leave them (and multiprocessing's resource tracker) running for
    good. The kernel's parent-death signal is no fit here: it follows the thread that forked the
    worker, and a pool starts workers from whichever thread submits. So a daemon thread watches
    for this process being handed to another parent instead. It starts with the pool's
    initializer, after the worker's start-up (its imports): a worker still starting when the flow
    dies exits as soon as that is done.
    """
    parent = multiprocessing.parent_process()
    parent_pid = parent.pid if parent is not None and parent.pid is not None else os.getppid()

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(ORPHAN_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def ingest_task_runner(settings: ScaleSettings | None = None) -> TaskRunner:  # type: ignore[type-arg]
    """Dask (``dask_scheduler_address``), else ``ingest_processes`` worker processes on this machine
    (each exits when the flow's process dies, :func:`exit_with_parent`), else ``ingest_threads``
    threads in the flow's process. A shard holds whole hosts, so each host's politeness (requests
    in flight, its token bucket) lives in one worker whichever runner it is."""
    settings = settings or get_scale_settings()
    if settings.dask_scheduler_address:
        from prefect_dask import DaskTaskRunner

        return DaskTaskRunner(address=settings.dask_scheduler_address)
    if settings.ingest_processes:
        return ProcessPoolTaskRunner(max_workers=settings.ingest_processes, initializer=exit_with_parent)
    return ThreadPoolTaskRunner(max_workers=settings.ingest_threads)
