"""Ingest flows: poll the due feeds, fetch and extract new articles, append them to the log.

``ingest_feeds`` is one pass (the minute deployment, the command line, the demo); ``ingest_service``
is the long-running ingest of issue 31: it polls each feed when it falls due and a pushed feed as
soon as the WebSub receiver records the push, while the minute deployment stands by.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from datetime import datetime
from typing import Any

from prefect import flow, get_run_logger

from flows.ingest_pass import ingest_pass, log_pass
from tasks.clock import resolve_now
from tasks.events import FEED_PUSHED, EventWaiter
from tasks.ingest.plan import next_due_at
from tasks.reports import ingest_markdown, publish_artifact
from tasks.runners import ingest_task_runner
from tasks.services import (
    PassReport,
    is_service_alive,
    one_pass_at_a_time,
    serve_passes,
    service_markdown,
    stop_requested,
    write_heartbeat,
)
from tasks.settings import get_freshness_settings, get_websub_settings
from tasks.storage import configured_store


@flow(name="ingest_feeds", log_prints=False, task_runner=ingest_task_runner())
def ingest_feeds(now: str | None = None, shards: int = 4) -> dict[str, Any]:
    """One ingest cycle at ``now`` (ISO; default: the current time).

    With ``NEWSROOM_FRESHNESS_MODE=events``, a run on the current time stands by while the
    long-running ingest (:func:`ingest_service`) reported a pass recently, and otherwise holds the
    ingest's concurrency slot, so the two never poll side by side (``tasks.services``).
    """
    at = resolve_now(now)
    store = configured_store()
    freshness = get_freshness_settings()
    on_events = now is None and freshness.mode == "events"
    if on_events and is_service_alive(store, "ingest", at, freshness.service_stale_seconds):
        get_run_logger().info("ingest_standby: the long-running ingest polls the feeds")
        return {"standby": True, "feeds_polled": 0, "new_articles": 0}
    with one_pass_at_a_time("ingest") if on_events else nullcontext():
        if on_events:
            at = resolve_now(None)  # when it got the slot: after the pass it waited for
        summary = ingest_pass(store, at, shards)
    log_pass(summary, at)
    publish_artifact("ingest-summary", ingest_markdown(summary, at.isoformat()), "ingest run summary")
    return summary


@flow(name="ingest_service", log_prints=False, task_runner=ingest_task_runner())
def ingest_service(run_minutes: float | None = 60.0, shards: int = 4, report_every_passes: int = 20) -> dict[str, Any]:
    """The long-running ingest: poll each feed when it falls due and a pushed feed as soon as the
    receiver records the push (a ``newsroom.feed.pushed`` event), one pass at a time, for
    ``run_minutes`` (None: until stopped); the ``ingest_service-long-running`` deployment starts
    one an hour.

    Feeds falling due within ``NEWSROOM_FRESHNESS_INGEST_BATCH_SECONDS`` of each other share a
    pass; the feeds are looked at at least every ``NEWSROOM_FRESHNESS_INGEST_BACKSTOP_SECONDS``.
    Does nothing unless ``NEWSROOM_FRESHNESS_MODE=events`` (then the minute deployment polls).
    """
    logger = get_run_logger()
    freshness = get_freshness_settings()
    if freshness.mode != "events":
        logger.info("ingest_service_skipped mode=%s: ingest_feeds polls each minute", freshness.mode)
        return {"skipped": freshness.mode}
    store = configured_store()
    deadline = None if run_minutes is None else time.monotonic() + run_minutes * 60
    stop_requested("ingest", reset=True)
    push_interval = get_websub_settings().ping_min_interval_seconds
    waiter = EventWaiter([FEED_PUSHED])
    waiter.start()

    def run_pass(at: datetime) -> dict[str, Any]:
        summary = ingest_pass(store, at, shards, skip_idle=True)
        if not summary.get("idle"):
            log_pass(summary, at)
        if summary.get("new_articles") or summary.get("errors"):  # what the minute runs reported, when it says something
            publish_artifact("ingest-summary", ingest_markdown(summary, at.isoformat()), "ingest run summary")
        return {k: v for k, v in summary.items() if k in ("feeds_polled", "new_articles", "pushed", "idle")}

    def on_pass(summary: dict[str, Any], report: PassReport) -> None:
        if len(report.passes) % report_every_passes == 0:
            publish_artifact("ingest-service", service_markdown("Long-running ingest", report), "long-running ingest")

    try:
        report = serve_passes(
            "ingest", run_pass, clock=lambda: resolve_now(None),
            until=lambda: stop_requested("ingest") or (deadline is not None and time.monotonic() > deadline), waiter=waiter,
            backstop_seconds=freshness.ingest_backstop_seconds, next_due=lambda at: next_due_at(store, at, push_min_interval_seconds=push_interval),
            batch_seconds=freshness.ingest_batch_seconds, exclusive=lambda: one_pass_at_a_time("ingest"),
            heartbeat=lambda passes: write_heartbeat(store, "ingest", passes), on_pass=on_pass)
    finally:
        waiter.stop()
        write_heartbeat(store, "ingest", 0, stopped=True)  # the minute deployment takes over at once
    publish_artifact("ingest-service", service_markdown("Long-running ingest", report), "long-running ingest")
    totals = report.totals()
    logger.info("ingest_service_done %s", " ".join(f"{k}={v}" for k, v in totals.items()))
    return totals
