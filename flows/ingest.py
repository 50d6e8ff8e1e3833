"""Ingest flows: poll the due feeds, fetch and extract new articles, append them to the log.

``ingest_feeds`` is one pass (the minute deployment, the command line, the demo); ``ingest_service``
is the long-running ingest of issue 31: it polls each feed when it falls due and a pushed feed as
soon as the WebSub receiver records the push, while the minute deployment stands by.
"""

from __future__ import annotations

from datetime import datetime

from prefect import flow

from flows.ingest_pass import IdlePass, IngestStandby, IngestSummary, ingest_pass, log_pass
from tasks.events import FEED_PUSHED
from tasks.ingest.plan import next_due_at
from tasks.reports import ingest_markdown, publish_artifact
from tasks.runners import ingest_task_runner
from tasks.services import PassTotals, ServiceSkipped, ServiceSpec, run_service, scheduled_pass
from tasks.settings import get_freshness_settings, get_websub_settings
from tasks.storage import ObjectStore


@flow(name="ingest_feeds", log_prints=False, task_runner=ingest_task_runner())
def ingest_feeds(now: str | None = None, shards: int = 4) -> IngestSummary | IdlePass | IngestStandby:
    """One ingest cycle at ``now`` (ISO; default: the current time).

    With ``NEWSROOM_FRESHNESS_MODE=events``, a run on the current time stands by while the
    long-running ingest (:func:`ingest_service`) reported a pass recently, and otherwise holds the
    ingest's concurrency slot, so the two never poll side by side (``tasks.services``).
    """
    ran = scheduled_pass("ingest", now, lambda store, at: ingest_pass(store, at, shards),
                         standby="the long-running ingest polls the feeds", freshness=get_freshness_settings())
    if ran is None:
        return {"standby": True, "feeds_polled": 0, "new_articles": 0}
    at, summary = ran
    log_pass(summary, at)
    publish_artifact("ingest-summary", ingest_markdown(summary, at.isoformat()), "ingest run summary")
    return summary


@flow(name="ingest_service", log_prints=False, task_runner=ingest_task_runner())
def ingest_service(run_minutes: float | None = 60.0, shards: int = 4, report_every_passes: int = 20
                   ) -> PassTotals | ServiceSkipped:
    """The long-running ingest: poll each feed when it falls due and a pushed feed as soon as the
    receiver records the push (a ``newsroom.feed.pushed`` event), one pass at a time, for
    ``run_minutes`` (None: until stopped); the ``ingest_service-long-running`` deployment starts
    one an hour.

    Feeds falling due within ``NEWSROOM_FRESHNESS_INGEST_BATCH_SECONDS`` of each other share a
    pass; the feeds are looked at at least every ``NEWSROOM_FRESHNESS_INGEST_BACKSTOP_SECONDS``.
    Does nothing unless ``NEWSROOM_FRESHNESS_MODE=events`` (then the minute deployment polls).
    """
    freshness = get_freshness_settings()
    spec = ServiceSpec("ingest", "Long-running ingest", FEED_PUSHED, "ingest_feeds polls each minute",
                       backstop_seconds=freshness.ingest_backstop_seconds, batch_seconds=freshness.ingest_batch_seconds)

    def run_pass(store: ObjectStore, at: datetime) -> dict[str, object]:
        summary = ingest_pass(store, at, shards, skip_idle=True)
        if not summary.get("idle"):
            log_pass(summary, at)
        if summary.get("new_articles") or summary.get("errors"):  # what the minute runs reported, when it says something
            publish_artifact("ingest-summary", ingest_markdown(summary, at.isoformat()), "ingest run summary")
        return {k: v for k, v in summary.items() if k in ("feeds_polled", "new_articles", "pushed", "idle")}

    push_min_interval_seconds = get_websub_settings().ping_min_interval_seconds

    def next_due(store: ObjectStore, at: datetime) -> datetime | None:
        return next_due_at(store, at, push_min_interval_seconds=push_min_interval_seconds)

    return run_service(spec, run_pass, freshness=freshness, run_minutes=run_minutes,
                       report_every_passes=report_every_passes, next_due=next_due)
