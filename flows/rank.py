"""Rank & publish flows: score stories per edition and publish validated page snapshots.

``rank_and_publish`` is one pass (the minute deployment, the command line, the demo);
``rank_service`` is the long-running rank of issue 31: it ranks as soon as a writer commits,
while the minute deployment stands by as the fallback.
"""

from __future__ import annotations

from datetime import datetime

from prefect import flow, get_run_logger

from tasks.assets import materializing
from tasks.events import STORIES_COMMITTED
from tasks.rank.compute import compute_rank_pages_task
from tasks.rank.extract import extract_rank_inputs_task
from tasks.rank.publish import RankSummary, publish_rank_pages_task
from tasks.reports import publish_artifact, rank_markdown
from tasks.services import PassTotals, ServiceSkipped, ServiceSpec, run_service, scheduled_pass
from tasks.settings import get_freshness_settings, get_rank_settings
from tasks.storage import ObjectStore


def rank_pass(store: ObjectStore, at: datetime) -> RankSummary:
    """Rank and publish every edition as of ``at``: extract → transform → load."""
    settings = get_rank_settings()
    inputs = extract_rank_inputs_task(store, at, settings)  # the story aggregates, folded; the pages live before
    ranked = compute_rank_pages_task(store, inputs, settings)  # scores, ranked editions, pages: a pure function
    load = materializing(publish_rank_pages_task, store, writes=("pages",), reads=("story_changes", "articles", "registry"))
    summary: RankSummary = load(store, ranked, settings)
    get_run_logger().info(
        "rank_done pages=%s published=%d refused=%d not_published=%d stories=%s breaking=%d", summary["pages"],
        len(summary["published"]), len(summary["refused"]), len(summary["not_published"]), summary["stories"],
        len(summary["breaking"]))
    for page, reason in sorted(summary["not_published"].items()):
        get_run_logger().warning("page_not_published page=%s reason=%s", page, reason)
    return summary


@flow(name="rank_and_publish")
def rank_and_publish(now: str | None = None) -> RankSummary:
    """Publish every edition page whose content changed as of ``now``.

    With ``NEWSROOM_FRESHNESS_MODE=events``, a run on the current time stands by while the
    long-running rank (:func:`rank_service`) reported a pass recently, and otherwise holds rank's
    concurrency slot, so two rank passes never run side by side (``tasks.services``).
    """
    ran = scheduled_pass("rank", now, rank_pass, standby="the long-running rank publishes",
                         freshness=get_freshness_settings())
    if ran is None:
        return RankSummary(standby=True, pages=0, published=[], refused={}, not_published={}, stories=0, breaking=[])
    at, summary = ran
    publish_artifact("rank-summary", rank_markdown(summary, at.isoformat()), "rank run summary")
    return summary


@flow(name="rank_service")
def rank_service(run_minutes: float | None = 60.0, report_every_passes: int = 20) -> PassTotals | ServiceSkipped:
    """The long-running rank: rank and publish as soon as a writer commits (a
    ``newsroom.stories.committed`` event; commits arriving within
    ``NEWSROOM_FRESHNESS_RANK_DEBOUNCE_SECONDS`` of each other share a pass), and at least every
    ``NEWSROOM_FRESHNESS_RANK_BACKSTOP_SECONDS``, one pass at a time, for ``run_minutes`` (None: until
    stopped); the ``rank_service-long-running`` deployment starts one an hour.

    Each pass holds rank's concurrency slot, so a minute run of ``rank_and_publish`` never runs
    beside it. Does nothing unless ``NEWSROOM_FRESHNESS_MODE=events``.
    """
    freshness = get_freshness_settings()
    spec = ServiceSpec("rank", "Long-running rank", STORIES_COMMITTED, "rank_and_publish ranks each minute",
                       backstop_seconds=freshness.rank_backstop_seconds,
                       debounce_seconds=freshness.rank_debounce_seconds)

    def run_pass(store: ObjectStore, at: datetime) -> dict[str, int]:
        summary = rank_pass(store, at)
        if summary["published"]:
            publish_artifact("rank-summary", rank_markdown(summary, at.isoformat()), "rank run summary")
        return {"published": len(summary["published"]), "stories": summary["stories"],
                "breaking": len(summary["breaking"])}

    return run_service(spec, run_pass, freshness=freshness, run_minutes=run_minutes,
                       report_every_passes=report_every_passes)
