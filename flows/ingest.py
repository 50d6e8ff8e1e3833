"""Ingest flow: poll the due feeds, fetch and extract new articles, append them to the log."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, unmapped

from tasks.clock import resolve_now
from tasks.ingest.commit import commit_ingest_task
from tasks.ingest.pending import poll_pending_sources_task
from tasks.ingest.plan import plan_due_feeds_task
from tasks.ingest.poll import poll_shard_task
from tasks.ingest.robots import load_robots_cache_task, robots_for_shard
from tasks.reports import ingest_markdown, publish_artifact
from tasks.runners import ingest_task_runner
from tasks.settings import get_ingest_settings
from tasks.storage import configured_store


@flow(name="ingest_feeds", log_prints=False, task_runner=ingest_task_runner())
def ingest_feeds(now: str | None = None, shards: int = 4) -> dict[str, Any]:
    """One ingest cycle at ``now`` (ISO; default: the current time)."""
    logger = get_run_logger()
    at = resolve_now(now)
    store = configured_store()
    settings = get_ingest_settings()
    # Sources readers suggested go first: a new one is polled in the run after it was suggested (issue 30).
    pending = poll_pending_sources_task(store, settings, at)
    plan = plan_due_feeds_task(store, at, shards)
    # robots.txt verdicts earlier runs fetched and still fresh go to the shards of their hosts
    # (shards may run on workers without the store); the commit writes back those fetched this run.
    robots = load_robots_cache_task(store, at) if plan else {}
    futures = poll_shard_task.map(plan, settings=unmapped(settings), now=unmapped(at),
                                  robots_cache=[robots_for_shard(robots, jobs) for jobs in plan]) if plan else []
    results = [f.result() for f in futures]
    summary = commit_ingest_task(store, results, at)
    summary["pending_sources"] = pending
    brief = {k: v for k, v in summary.items() if k not in ("failures", "lag_seconds_by_tier", "over_budget")}
    logger.info("ingest_done now=%s %s", at.isoformat(), " ".join(f"{k}={v}" for k, v in brief.items()))
    publish_artifact("ingest-summary", ingest_markdown(summary, at.isoformat()), "ingest run summary")
    return summary
