"""One whole pipeline cycle (ingest, cluster, repair, rank) as a parent flow, as the demo runs it."""

from __future__ import annotations

from typing import Any

from prefect import flow

from flows.cluster import cluster_stories
from flows.ingest import ingest_feeds
from flows.rank import rank_and_publish
from flows.repair import repair_stories
from tasks.clock import resolve_now


@flow(name="pipeline_cycle")
def pipeline_cycle(now: str | None = None) -> dict[str, Any]:
    """Ingest, then cluster, then repair, then rank, all at the same ``now``.

    Deployed, repair runs every 10 minutes on its own schedule; a cycle runs it every time, and
    each story is still repaired at most once per 30 minutes.
    """
    now = resolve_now(now).isoformat()
    return {
        "ingest": ingest_feeds(now=now),
        "cluster": cluster_stories(now=now),
        "repair": repair_stories(now=now),
        "rank": rank_and_publish(now=now),
    }
