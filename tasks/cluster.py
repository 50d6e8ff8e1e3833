"""The cluster tasks: each language's writer run (``tasks.writer.run``) as a Prefect task."""

from __future__ import annotations

from datetime import datetime

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.errors import WriterFencedError
from tasks.writer.kept import KeptStates
from tasks.writer.run import WriterSummary, cluster_language, languages_in_log
from warehouse.store import ObjectStore


@task(name="cluster_language", retries=1, retry_delay_seconds=2, timeout_seconds=900, cache_policy=NO_CACHE,
      retry_condition_fn=lambda task, run, state: not isinstance(state.result(raise_on_failure=False), WriterFencedError))
def cluster_language_task(store: ObjectStore, language: str, now: datetime,
                          kept: KeptStates | None = None) -> WriterSummary:
    return cluster_language(store, language, now, kept=kept)


@task(name="languages_in_log", retries=2, retry_delay_seconds=2, timeout_seconds=120, cache_policy=NO_CACHE)
def languages_in_log_task(store: ObjectStore) -> list[str]:
    return languages_in_log(store)
