"""Cluster flow: one fenced writer per language assigns new articles to stories."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from tasks.clock import resolve_now
from tasks.cluster import cluster_language_task, languages_in_log_task
from tasks.reports import cluster_markdown, publish_artifact
from tasks.storage import configured_store


@flow(name="cluster_stories")
def cluster_stories(now: str | None = None, languages: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the writer of each language (all languages in the log by default)."""
    logger = get_run_logger()
    at = resolve_now(now)
    store = configured_store()
    targets = languages or languages_in_log_task(store)
    summaries = [cluster_language_task(store, language, at) for language in targets]
    for s in summaries:
        logger.info("cluster_done %s", " ".join(f"{k}={v}" for k, v in s.items()))
    publish_artifact("cluster-summary", cluster_markdown(summaries, at.isoformat()), "cluster run summary")
    return summaries
