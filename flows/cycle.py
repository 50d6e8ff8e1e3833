"""One whole pipeline cycle (ingest, cluster, repair, rank) as a parent flow, as the demo runs it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict, cast

from prefect import flow, get_run_logger

from flows.cluster import cluster_stories
from flows.errors import CycleStepsFailedError
from flows.ingest import ingest_feeds
from flows.ingest_pass import IdlePass, IngestStandby, IngestSummary
from flows.rank import rank_and_publish
from flows.repair import repair_stories
from tasks.clock import resolve_now
from tasks.rank.publish import RankSummary
from tasks.writer.run import WriterSummary


class CycleSummary(TypedDict, total=False):
    """What one pipeline cycle did, step by step (a failed step's entry is empty)."""

    ingest: IngestSummary | IdlePass | IngestStandby
    cluster: list[WriterSummary]
    repair: list[WriterSummary]
    rank: RankSummary


@flow(name="pipeline_cycle")
def pipeline_cycle(now: str | None = None) -> CycleSummary:
    """Ingest, then cluster, then repair, then rank, all at the same ``now``.

    Deployed, repair runs every 10 minutes on its own schedule; a cycle runs it every time, and
    each story is still repaired at most once per 30 minutes. A step that fails (a language whose
    writer raised, say) does not stop the steps after it, as separate deployments would not: the
    pages of every other language are still ranked, and the cycle fails at the end, naming it.
    """
    logger = get_run_logger()
    now = resolve_now(now).isoformat()
    steps: dict[str, Callable[..., Any]] = {"ingest": ingest_feeds, "cluster": cluster_stories,
                                            "repair": repair_stories, "rank": rank_and_publish}
    summary: dict[str, object] = {}
    failed: list[str] = []
    failed_steps: list[str] = []
    for name, step in steps.items():
        try:
            summary[name] = step(now=now)
        except Exception as e:  # noqa: BLE001 - the later steps still run; the cycle fails below
            logger.error("cycle_step_failed step=%s error=%s: %s", name, type(e).__name__, e)
            failed.append(f"{name}: {type(e).__name__}: {e}")
            failed_steps.append(name)
            summary[name] = [] if name in ("cluster", "repair") else {}
    if failed:
        raise CycleStepsFailedError("pipeline cycle steps failed: " + "; ".join(failed), failed_steps)
    return cast("CycleSummary", summary)
