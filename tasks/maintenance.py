"""The maintenance job: compact small segments, fold writers' state deltas into a new base, apply
retention, prune old page versions."""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import TypedDict, cast

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.writer.state import compact_writer_state
from warehouse import layout
from warehouse.damage import collect_damage
from warehouse.errors import ObjectNotFoundError
from warehouse.maintenance import (
    apply_retention,
    compact_logs,
    delete_stale_temporaries,
    merge_closed_days,
    prune_page_versions,
    prune_rank_aggregates,
    prune_writer_states,
)
from warehouse.state_blobs import StateBlobError
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)


def fold_writer_chains(store: ObjectStore) -> list[str]:
    """Fold every language writer's chain of state deltas into a new base (issue 15), off the
    writers' critical path: each writer adopts its new base at its next commit. A language whose
    objects cannot be read is left as it is (its writer, health and the doctor name them).

    Returns:
        The languages folded.
    """
    folded = []
    for key in store.list(layout.STORY_STATE_PREFIX):
        if not key.endswith("/checkpoint.json"):
            continue
        language = key[len(layout.STORY_STATE_PREFIX):].split("/", 1)[0]
        try:
            if compact_writer_state(store, language) is not None:
                folded.append(language)
        except (ObjectNotFoundError, StateBlobError) as e:
            log.warning("writer_fold_skipped language=%s error=%s", language, e)
    return folded


class MaintenanceReportJson(TypedDict):
    """A :class:`MaintenanceReport` as the flow returns it."""

    compacted_segments: int
    written_segments: int
    deleted_for_retention: int
    pruned_page_versions: int
    pruned_writer_states: int
    pruned_rank_aggregates: int
    deleted_temporaries: int
    notes: list[str]
    damaged: list[dict[str, str]]


def run_maintenance(store: ObjectStore, now: datetime, *, article_days: int = 30, click_days: int = 90,
                    keep_page_versions: int = 20, keep_page_hours: float = 48.0) -> MaintenanceReportJson:
    """Compact, expire, prune, and delete what killed puts left; objects it could not read are
    skipped (never merged or deleted on a guess) and named in ``damaged`` (issue 16)."""
    with collect_damage() as damaged:
        report = compact_logs(store, now)
        merge_closed_days(store, now, report=report)
        folded = fold_writer_chains(store)
        if folded:
            report.notes.append(f"writer states folded into a new base: {', '.join(folded)}")
        apply_retention(store, now, article_days=article_days, click_days=click_days, report=report)
        prune_page_versions(store, now, keep=keep_page_versions, keep_for=timedelta(hours=keep_page_hours),
                            report=report)
        prune_writer_states(store, report=report)
        prune_rank_aggregates(store, report=report)
        delete_stale_temporaries(store, report=report)
    report.damaged = [{"key": d.key, "problem": d.problem, "action": d.action} for d in damaged]
    return cast("MaintenanceReportJson", asdict(report))


@task(name="run_maintenance", retries=1, retry_delay_seconds=5, timeout_seconds=1800, cache_policy=NO_CACHE)
def run_maintenance_task(store: ObjectStore, now: datetime, keep_page_versions: int, keep_page_hours: float
                         ) -> MaintenanceReportJson:
    return run_maintenance(store, now, keep_page_versions=keep_page_versions, keep_page_hours=keep_page_hours)
