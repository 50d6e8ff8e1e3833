"""Repair flow: every 10 minutes, merge and split the stories active in the last six hours."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from flows.cluster import raise_for_failed_languages, run_each_language
from tasks.clock import resolve_now
from tasks.cluster import languages_in_log_task
from tasks.repair import repair_language_task
from tasks.storage import configured_store


@flow(name="repair_stories")
def repair_stories(now: str | None = None, languages: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the repair of each language (all languages in the log by default), through its writer's fence.

    One language's failure does not stop the others: its summary carries the ``error``, and the
    flow run fails once every language has run.
    """
    logger = get_run_logger()
    at = resolve_now(now)
    store = configured_store()
    targets = languages or languages_in_log_task(store)
    summaries = run_each_language(targets, lambda language: repair_language_task(store, language, at), "repair")
    for s in summaries:
        logger.info("repair_done %s", " ".join(f"{k}={v}" for k, v in s.items()))
    raise_for_failed_languages(summaries, "repair")
    return summaries
