"""One ingest pass (plan, poll, commit), shared by the minute flow and the long-running one.

It lives apart from ``flows/ingest.py`` because a deployment loads that file as a script (module
``ingest``): a function defined there and called by a flow would be pickled by reference to that
module with the flow run's context for each Dask shard, and a Dask scheduler cannot import it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

from prefect import get_run_logger, unmapped

from tasks.assets import materializing
from tasks.ingest.commit import IngestCommitSummary, commit_ingest_task
from tasks.ingest.pending import PendingSummary, poll_pending_sources_task
from tasks.ingest.plan import plan_due_feeds_task
from tasks.ingest.poll import poll_shard_task
from tasks.ingest.robots import load_robots_cache_task, robots_for_shard
from tasks.settings import get_ingest_settings, get_websub_settings
from tasks.storage import ObjectStore


class IngestSummary(IngestCommitSummary):
    """What one ingest pass did: the commit's counts, then the pending sources polled first."""

    pending_sources: PendingSummary


class IdlePass(TypedDict):
    """A long-running ingest's look with no feed due and no push: nothing polled, nothing committed."""

    feeds_polled: int
    new_articles: int
    idle: bool
    pending_sources: PendingSummary


class IngestStandby(TypedDict):
    """A minute run that left the polling to the long-running ingest."""

    standby: bool
    feeds_polled: int
    new_articles: int


def ingest_pass(store: ObjectStore, at: datetime, shards: int, *, skip_idle: bool = False
                ) -> IngestSummary | IdlePass:
    """Plan, poll (fanned out on the flow's task runner) and commit one ingest pass at ``at``.

    ``skip_idle``: with no feed due and no push, commit nothing (the long-running ingest's idle
    looks); a pass of the minute deployment always commits, as it always did.
    """
    settings, websub = get_ingest_settings(), get_websub_settings()
    # Sources readers suggested go first: a new one is polled in the run after it was suggested (issue 30).
    pending = poll_pending_sources_task(store, settings, at)
    plan = plan_due_feeds_task(store, at, shards, websub.ping_min_interval_seconds)
    if skip_idle and not plan:
        return {"feeds_polled": 0, "new_articles": 0, "idle": True, "pending_sources": pending}
    # robots.txt verdicts earlier runs fetched and still fresh go to the shards of their hosts
    # (shards may run on workers without the store); the commit writes back those fetched this run.
    robots = load_robots_cache_task(store, at, settings.robots_ttl_seconds) if plan else {}
    futures = poll_shard_task.map(plan, settings=unmapped(settings), now=unmapped(at), websub=unmapped(websub),
                                  robots_cache=[robots_for_shard(robots, jobs) for jobs in plan]) if plan else []
    results = [f.result() for f in futures]
    commit = materializing(commit_ingest_task, store, writes=("articles", "feeds"), reads=("registry",))
    summary: IngestCommitSummary = commit(store, results, at, settings, websub)
    return {**summary, "pending_sources": pending}


def log_pass(summary: IngestSummary | IdlePass, at: datetime) -> None:
    """One ``ingest_done`` line with the pass's counts (the lists and per-tier figures go to the artifact)."""
    brief = {k: v for k, v in summary.items() if k not in ("failures", "lag_seconds_by_tier", "over_budget")}
    get_run_logger().info("ingest_done now=%s %s", at.isoformat(), " ".join(f"{k}={v}" for k, v in brief.items()))
