"""Rank & publish: score stories per edition in DuckDB, assemble pages, validate, publish."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.settings import RankSettings
from transforms.pages import PageLimits, build_pages, validate_page
from warehouse.duck import connect, load_sql
from warehouse.snapshots import publish_page, publish_stories
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)


def compute_pages(store: ObjectStore, now: datetime, settings: RankSettings
                  ) -> tuple[dict[tuple[str, str], dict[str, Any]], dict[str, Any]]:
    """Every edition page and the story snapshot as of ``now``, from the logs alone."""
    con = connect(store)
    try:
        params = {"now": now, "coverage_window_hours": settings.coverage_window_hours,
                  "half_life_hours": settings.freshness_half_life_hours,
                  "regional_weight": settings.regional_weight, "active_hours": settings.active_hours}
        scores = con.sql(load_sql("story_scores"), params=params).to_arrow_table().to_pylist()
        members = con.sql(load_sql("story_members"), params={"now": now}).to_arrow_table().to_pylist()
    finally:
        con.close()
    limits = PageLimits(settings.top_stories, settings.section_stories, settings.min_section_stories)
    return build_pages(scores, members, now, limits)


def publish_all(store: ObjectStore, now: datetime, settings: RankSettings) -> dict[str, Any]:
    """Publish every page whose content changed; a refused version leaves the live one in place."""
    pages, stories = compute_pages(store, now, settings)

    def validate(new: dict[str, Any], previous: dict[str, Any] | None) -> str | None:
        return validate_page(new, previous, min_stories=settings.min_page_stories, max_loss=settings.max_story_loss)

    results = {}
    # The story snapshot goes first, so every story a new page lists can already be opened.
    story_result = publish_stories(store, stories, now=now, validate=lambda new, prev: None)
    for (edition, section), payload in sorted(pages.items()):
        result = publish_page(store, edition, section, payload, now=now, validate=validate)
        results[f"{edition}/{section}"] = result
        if result.reason.startswith("invalid"):
            log.warning("page_refused edition=%s section=%s reason=%s", edition, section, result.reason)
    return {
        "pages": len(pages),
        "published": sorted(k for k, r in results.items() if r.published),
        "refused": {k: r.reason for k, r in results.items() if r.reason.startswith("invalid")},
        "stories": len(stories["stories"]),
        "stories_version": story_result.version,
    }


@task(name="publish_snapshot", retries=2, retry_delay_seconds=2, timeout_seconds=600, cache_policy=NO_CACHE)
def publish_all_task(store: ObjectStore, now: datetime, settings: RankSettings) -> dict[str, Any]:
    return publish_all(store, now, settings)
