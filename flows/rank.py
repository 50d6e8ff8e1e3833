"""Rank & publish flow: score stories per edition and publish validated page snapshots."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from tasks.clock import resolve_now
from tasks.rank import publish_all_task
from tasks.reports import publish_artifact, rank_markdown
from tasks.settings import get_rank_settings
from tasks.storage import configured_store


@flow(name="rank_and_publish")
def rank_and_publish(now: str | None = None) -> dict[str, Any]:
    """Publish every edition page whose content changed as of ``now``."""
    logger = get_run_logger()
    at = resolve_now(now)
    summary = publish_all_task(configured_store(), at, get_rank_settings())
    logger.info("rank_done pages=%s published=%d refused=%d not_published=%d stories=%s breaking=%d",
                summary["pages"], len(summary["published"]), len(summary["refused"]),
                len(summary["not_published"]), summary["stories"], len(summary["breaking"]))
    for page, reason in sorted(summary["not_published"].items()):
        logger.warning("page_not_published page=%s reason=%s", page, reason)
    publish_artifact("rank-summary", rank_markdown(summary, at.isoformat()), "rank run summary")
    return summary
