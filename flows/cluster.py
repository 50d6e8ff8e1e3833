"""Cluster flow: one fenced writer per language assigns new articles to stories."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TypedDict

from prefect import Task, flow, get_run_logger

from flows.errors import LanguagesFailedError, WriterRunsFailedError
from tasks.assets import materializing
from tasks.clock import resolve_now
from tasks.cluster import cluster_language_task, languages_in_log_task
from tasks.errors import WriterFencedError
from tasks.events import ARTICLES_APPENDED
from tasks.repair import RepairInputsOnce, repair_language, repair_language_task
from tasks.reports import cluster_markdown, publish_artifact
from tasks.services import deadline_after, listening
from tasks.settings import get_freshness_settings, get_scale_settings
from tasks.storage import ObjectStore, configured_store
from tasks.writer.kept import keep_states_in_memory
from tasks.writer.run import WriterSummary
from tasks.writer.service import ServiceReport, ServiceTotals, serve_language_writers


class SessionResult(TypedDict):
    """What a writer session did: every run of every tick, and its totals."""

    ticks: int
    runs: list[WriterSummary]
    states_reused: int
    failed: int
    articles: int
    repairs: int


def run_each_language(languages: Sequence[str], run: Callable[[str], WriterSummary], job: str
                      ) -> list[WriterSummary]:
    """``run`` each language in turn, one language's failure never stopping the others.

    A fenced run (another writer of the language committed first; the next run goes on) is
    recorded as ``fenced``; any other error is logged and recorded as the summary's ``error``, as
    a run that reports one itself does. Check the result with :func:`raise_for_failed_languages`.
    """
    logger = get_run_logger()
    summaries = []
    for language in languages:
        try:
            summary = run(language)
        except WriterFencedError as e:
            summary = {"language": language, "committed": False, "fenced": str(e)}
        except Exception as e:  # noqa: BLE001 - one language's failure must not stop the others
            summary = {"language": language, "committed": False, "error": f"{type(e).__name__}: {e}"}
        if "error" in summary:
            logger.error("%s_language_failed language=%r error=%s", job, language, summary["error"])
        summaries.append(summary)
    return summaries


def raise_for_failed_languages(summaries: Sequence[WriterSummary], job: str) -> None:
    """Fail the flow run, once every language has run, if any language's run failed (naming each)."""
    failed = [s for s in summaries if "error" in s]
    if failed:
        raise LanguagesFailedError(f"{job} failed for {len(failed)} of {len(summaries)} languages: "
                                   + "; ".join(f"{s['language']!r}: {s['error']}" for s in failed),
                                   [s["language"] for s in failed])


def writer_languages(store: ObjectStore, languages: list[str] | None, except_languages: list[str] | None
                     ) -> list[str]:
    """The languages a writer flow run writes: ``languages`` (all languages in the log by default),
    less ``except_languages``.

    Two deployments split the languages between two work queues this way (``languages: [en]`` on
    ``writers-en``, ``except_languages: [en]`` on ``writers-rest``, #19), so one machine's worker can
    serve only the English writer. A language named in both groups is only written twice, never
    committed twice: the writer's fence (If-Match on its checkpoint) lets one run commit.
    """
    skipped = set(except_languages or [])
    return [language for language in (languages or languages_in_log_task(store)) if language not in skipped]


def run_language_writers(job: str, language_task: Callable[[ObjectStore, str, datetime], WriterSummary],
                         now: str | None, languages: list[str] | None,
                         report: Callable[[list[WriterSummary], datetime], None] | None = None,
                         except_languages: list[str] | None = None) -> list[WriterSummary]:
    """The body of the per-language writer flows (cluster and repair): run ``language_task`` for
    each language (all languages in the log by default, less ``except_languages``) at one stream
    time, through the writer's fence, and log one ``<job>_done`` line per language.

    One language's failure does not stop the others: its summary carries the ``error``, and the
    flow run fails once every language has run (after ``report``, if given, has the summaries).
    """
    logger = get_run_logger()
    at = resolve_now(now)
    store = configured_store()
    targets = writer_languages(store, languages, except_languages)
    if isinstance(language_task, Task):  # the commit materializes the change log, from the article log
        language_task = materializing(language_task, store, writes=("story_changes",),
                                      reads=("articles",))
    summaries = run_each_language(targets, lambda language: language_task(store, language, at), job)
    for s in summaries:
        logger.info("%s_done %s", job, " ".join(f"{k}={v}" for k, v in s.items()))
    if report is not None:
        report(summaries, at)
    raise_for_failed_languages(summaries, job)
    return summaries


def _publish_cluster_summary(summaries: list[WriterSummary], at: datetime) -> None:
    publish_artifact("cluster-summary", cluster_markdown(summaries, at.isoformat()), "cluster run summary")


@flow(name="cluster_stories")
def cluster_stories(now: str | None = None, languages: list[str] | None = None,
                    except_languages: list[str] | None = None) -> list[WriterSummary]:
    """Run the writer of each language (all languages in the log by default, less ``except_languages``:
    how the per-language-group deployments split the writers between work queues).

    One language's failure does not stop the others: its summary carries the ``error``, and the
    flow run fails once every language has run (after its summary artifact is published).

    With ``NEWSROOM_SCALE_WRITER_MODE=long_running`` the long-running writer
    (:func:`cluster_writer_service`) writes every language, and a scheduled run of this flow
    does nothing (a run given ``now``, as the command line and the demo run it, still writes).
    """
    if now is None and get_scale_settings().writer_mode == "long_running":
        get_run_logger().info("cluster_skipped writer_mode=long_running: the long-running writer commits")
        return []
    return run_language_writers("cluster", cluster_language_task, now, languages, _publish_cluster_summary,
                                except_languages)


def _service_markdown(report: ServiceReport, latest: WriterSummary) -> str:
    totals = report.totals()
    lines = ["## Long-running writer", "", "| batches | articles | segments | lag p50 s | lag p95 s | lag max s | "
             "state bytes written | compactions | states kept | fenced | failed |", "|---|---|---|---|---|---|---|---|---|---|---|",
             "| " + " | ".join(str(totals[k]) if not isinstance(totals[k], float) else f"{totals[k]:.1f}" for k in (
                 "batches", "articles", "segments", "lag_p50_seconds", "lag_p95_seconds", "lag_max_seconds",
                 "state_bytes", "compactions", "states_reused", "fenced", "failed")) + " |", "",
             f"Latest batch: {', '.join(f'{k}={v}' for k, v in latest.items() if k not in ('sizes', 'damaged'))}"]
    return "\n".join(lines) + "\n"


@flow(name="cluster_writer_service")
def cluster_writer_service(languages: list[str] | None = None, run_minutes: float | None = 60.0,
                           poll_seconds: float | None = None, repair_every_minutes: float | None = 10.0,
                           report_every_batches: int = 10) -> ServiceTotals | dict[str, str]:
    """The long-running writer: keep each language's window in memory, consume article segments
    as they land, commit each batch through the writer's If-Match fence (``tasks.writer.service``).

    Runs for ``run_minutes`` (None: until stopped); the ``cluster_writer_service-long-running``
    deployment starts one an hour, so a deploy or a crash costs at most a restart from base and
    deltas. Progress and lag go to the run's log (one ``writer_batch`` line per batch) and to a
    ``cluster-writer-service`` artifact every ``report_every_batches`` batches and at the end.
    Does nothing unless ``NEWSROOM_SCALE_WRITER_MODE=long_running``: one setting chooses between
    this and the per-minute ``cluster_stories``.
    """
    logger = get_run_logger()
    settings = get_scale_settings()
    if settings.writer_mode != "long_running":
        logger.info("writer_service_skipped writer_mode=%s: cluster_stories writes each minute", settings.writer_mode)
        return {"skipped": settings.writer_mode}
    store = configured_store()
    until = deadline_after(run_minutes)

    def on_batch(summary: WriterSummary, report: ServiceReport) -> None:
        logger.info("writer_batch %s", " ".join(f"{k}={v}" for k, v in summary.items() if k not in ("sizes", "damaged")))
        if len(report.batches) % report_every_batches == 0:
            publish_artifact("cluster-writer-service", _service_markdown(report, summary), "long-running writer progress")

    # With event-driven hand-offs the writer wakes as soon as ingest appends a segment (a
    # ``newsroom.articles.appended`` event, issue 31); its poll stays the backstop.
    with listening([ARTICLES_APPENDED], enabled=get_freshness_settings().mode == "events") as waiter:
        report = serve_language_writers(
            store, languages, clock=lambda: resolve_now(None), until=until,
            poll_seconds=poll_seconds or settings.writer_poll_seconds, compact_every=settings.writer_compact_every,
            repair_every_minutes=repair_every_minutes, repair=repair_language, on_batch=on_batch,
            sleep=time.sleep if waiter is None else waiter.wait)
    totals = report.totals()
    publish_artifact("cluster-writer-service", _service_markdown(report, report.batches[-1] if report.batches else {}),
                     "long-running writer progress")
    logger.info("writer_service_done %s", " ".join(f"{k}={v}" for k, v in totals.items()))
    return totals


@flow(name="cluster_writer_session")
def cluster_writer_session(languages: list[str] | None = None, minutes: float = 60.0, every_seconds: float = 60.0,
                           start: str | None = None, repair_every_minutes: float | None = 10.0,
                           except_languages: list[str] | None = None) -> SessionResult:
    """Run the language writers every ``every_seconds`` for ``minutes`` in this one process,
    keeping each language's state in memory between runs (``tasks.writer.kept.keep_states_in_memory``):
    a run loads its state from the store only when another writer committed since.

    For languages with tens of thousands of active stories, where loading the state is most of
    a run (bench/writer_checkpoint.py); the ``cluster_writer_session-hourly`` deployment runs one
    session an hour, in place of ``cluster_stories-every-minute``. Fencing is unchanged: every
    commit still goes through the checkpoint's If-Match.

    ``start``: replay stream time from this ISO instant, one tick per ``every_seconds``, without
    waiting (tests and backfills); by default real time, each tick on the next interval.

    ``except_languages``: languages left to another session (or deployment), as in :func:`cluster_stories`.

    ``repair_every_minutes``: the session also runs each language's repair (merges and splits)
    after its writer run this often, on the state in memory, so ``repair_stories-every-10-minutes``
    can be paused with ``cluster_stories-every-minute``; ``None`` leaves repairs to that deployment.
    """
    logger = get_run_logger()
    store = configured_store()
    ticks = max(1, int(minutes * 60 // every_seconds))
    ticks_per_repair = max(1, round(repair_every_minutes * 60 / every_seconds)) if repair_every_minutes else None
    replay_from = resolve_now(start) if start is not None else None
    runs: list[WriterSummary] = []
    with keep_states_in_memory() as kept:
        for tick in range(ticks):
            if replay_from is not None:
                at = replay_from + timedelta(seconds=tick * every_seconds)
            else:
                time.sleep(max(0.0, every_seconds - time.time() % every_seconds) if tick else 0.0)
                at = resolve_now(None)
            targets = writer_languages(store, languages, except_languages)
            repairing = ticks_per_repair is not None and tick % ticks_per_repair == ticks_per_repair - 1
            inputs = RepairInputsOnce()  # the tick's story snapshot and registry, read once for every language

            def cluster(store: ObjectStore, language: str, at: datetime) -> WriterSummary:
                return cluster_language_task(store, language, at, kept)

            def repair(store: ObjectStore, language: str, at: datetime, inputs: RepairInputsOnce = inputs
                       ) -> WriterSummary:
                return repair_language_task(store, language, at, inputs, kept)

            for language in targets:
                jobs = [("cluster", cluster)] + ([("repair", repair)] if repairing else [])
                for kind, job in jobs:
                    try:
                        summary = job(store, language, at)
                    except WriterFencedError as e:  # another writer committed first; the next tick goes on
                        summary = {"language": language, "committed": False, "fenced": str(e)}
                    except Exception as e:  # noqa: BLE001 - one language's failure must not stop the others for the hour
                        # The run took its state out before failing, so the next run loads it again.
                        logger.error("cluster_session_run_failed language=%s tick=%d kind=%s error=%r",
                                     language, tick, kind, e)
                        summary = {"language": language, "committed": False, "error": f"{type(e).__name__}: {e}"}
                    runs.append({"tick": tick, "at": at.isoformat(), "kind": kind, **summary})
        hits = kept.hits
    failed = [r for r in runs if "error" in r]
    logger.info("cluster_session_done ticks=%d runs=%d states_reused=%d failed=%d", ticks, len(runs), hits, len(failed))
    result: SessionResult = {"ticks": ticks, "runs": runs, "states_reused": hits, "failed": len(failed),
              "articles": sum(int(r.get("articles", 0)) for r in runs if r["kind"] == "cluster"),
              "repairs": sum(int(r.get("merge", 0)) + int(r.get("split", 0)) for r in runs if r["kind"] == "repair")}
    if failed:  # the session went on, but the flow run must show that runs failed
        raise WriterRunsFailedError(f"{len(failed)} of {len(runs)} writer runs failed: {failed[-1]['error']}",
                                    len(failed))
    return result
