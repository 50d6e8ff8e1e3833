"""The maintenance job: compact small segments, apply retention, prune old page versions."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from warehouse.damage import collect_damage
from warehouse.maintenance import (
    apply_retention,
    compact_logs,
    delete_stale_temporaries,
    prune_page_versions,
    prune_rank_aggregates,
    prune_writer_states,
)
from warehouse.store import ObjectStore


def run_maintenance(store: ObjectStore, now: datetime, *, article_days: int = 30, click_days: int = 90,
                    keep_page_versions: int = 20, keep_page_hours: float = 48.0) -> dict[str, Any]:
    """Compact, expire, prune, and delete what killed puts left; objects it could not read are
    skipped (never merged or deleted on a guess) and named in ``damaged`` (issue 16)."""
    with collect_damage() as damaged:
        report = compact_logs(store, now)
        apply_retention(store, now, article_days=article_days, click_days=click_days, report=report)
        prune_page_versions(store, now, keep=keep_page_versions, keep_for=timedelta(hours=keep_page_hours),
                            report=report)
        prune_writer_states(store, report=report)
        prune_rank_aggregates(store, report=report)
        delete_stale_temporaries(store, report=report)
    report.damaged = [{"key": d.key, "problem": d.problem, "action": d.action} for d in damaged]
    return asdict(report)


@task(name="run_maintenance", retries=1, retry_delay_seconds=5, timeout_seconds=1800, cache_policy=NO_CACHE)
def run_maintenance_task(store: ObjectStore, now: datetime, keep_page_versions: int, keep_page_hours: float
                         ) -> dict[str, Any]:
    return run_maintenance(store, now, keep_page_versions=keep_page_versions, keep_page_hours=keep_page_hours)
