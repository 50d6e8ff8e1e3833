"""Ingest, step 3: poll a shard's feeds, then fetch robots.txt and each new page, under per-host limits.

The read of each source is its kind's reader (:mod:`tasks.ingest.readers`); what a poll means for the feed (new items, validators, errors
and warnings, the next poll) is ``transforms.poll_outcome.settle_poll``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

import httpx
from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.http import make_client
from tasks.ingest.article import ARTICLE_WORK, NO_RESPONSE_KINDS, PageError
from tasks.ingest.budget import article_workers
from tasks.ingest.feed_job import FeedJob
from tasks.ingest.pages import fetch_article_timed, no_link_error, page_status, skipped_page
from tasks.ingest.readers import read_source
from tasks.ingest.robots import RobotsCache
from tasks.politeness import HostLimiter, HostLimits, HostStats, host_of_url, run_per_host
from tasks.settings import IngestSettings, WebSubSettings
from transforms.poll_outcome import FeedReport, PollOutcome, forget_items, settle_failed_poll, settle_poll
from transforms.polling import floor_for_tier
from transforms.records import ArticleRow, FeedState
from transforms.robots_cache import RobotsEntry

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ShardResult:
    """What one shard's poll hands the commit."""

    states: list[FeedState] = field(default_factory=list)
    articles: list[ArticleRow] = field(default_factory=list)
    reports: list[FeedReport] = field(default_factory=list)
    page_errors: list[PageError] = field(default_factory=list)
    host_stats: dict[str, HostStats] = field(default_factory=dict)
    push_keys: list[str] = field(default_factory=list)
    robots: dict[str, RobotsEntry] = field(default_factory=dict)
    """robots.txt verdicts this shard fetched, by origin; the commit merges them into the store's cache."""


def host_limits_from(settings: IngestSettings) -> HostLimits:
    return HostLimits(
        max_concurrency=settings.host_max_concurrency, rate_per_second=settings.host_rate_per_second,
        burst=settings.host_burst, min_rate_per_second=min(settings.host_min_rate_per_second,
                                                           settings.host_rate_per_second),
        slow_seconds=settings.slow_response_seconds,
    )


def _floor(job: FeedJob, settings: IngestSettings) -> int:
    return floor_for_tier(job.tier, tier1_floor_seconds=settings.tier1_min_interval_seconds,
                          default_floor_seconds=settings.min_interval_seconds)


def poll_feed(job: FeedJob, client: httpx.Client, settings: IngestSettings, now: datetime, *,
              backstop_seconds: int | None = None) -> PollOutcome:
    """Read one source with the reader of its kind (for a feed, a conditional GET and the parse of its
    body, :mod:`tasks.ingest.readers`); the outcome is :func:`settle_poll`'s.

    Never raises for anything the publisher sends: a failed request or an unusable body becomes the
    outcome's ``error_kind``. Items beyond ``max_items_per_feed`` are not marked seen.
    """
    exchange = read_source(job, client, settings)
    return settle_poll(job.state, exchange, now, feed_url=job.url, max_items=settings.max_items_per_feed,
                       floor_seconds=_floor(job, settings), ceiling_seconds=settings.max_interval_seconds,
                       backstop_seconds=backstop_seconds)


def poll_feed_safely(job: FeedJob, client: httpx.Client, settings: IngestSettings, now: datetime,
                     backstop_seconds: int | None = None) -> PollOutcome:
    """``poll_feed``, with a bug on one feed's input recorded against that feed (STYLE §11: the broad
    catch sits around the per-item loop) so one strange document never fails the whole run."""
    try:
        return poll_feed(job, client, settings, now, backstop_seconds=backstop_seconds)
    except Exception as e:  # noqa: BLE001 - per-item boundary; logged with its traceback
        log.exception("feed_poll_crashed feed_url=%s", job.url)
        return settle_failed_poll(job.state, "internal", f"internal error: {type(e).__name__}: {e}", now,
                                  feed_url=job.url, floor_seconds=_floor(job, settings),
                                  ceiling_seconds=settings.max_interval_seconds)


def _skipped_poll(job: FeedJob, settings: IngestSettings, now: datetime) -> PollOutcome:
    message = "skipped: the host kept failing this run (429/5xx/timeouts); backing off"
    return settle_failed_poll(job.state, "host_backoff", message, now, feed_url=job.url,
                              floor_seconds=_floor(job, settings), ceiling_seconds=settings.max_interval_seconds)


def _polled_status(outcome: PollOutcome) -> int | None:
    report = outcome.report
    return None if report.error_kind in NO_RESPONSE_KINDS else report.status or 200


def poll_shard(jobs: list[FeedJob], settings: IngestSettings, now: datetime,
               websub: WebSubSettings | None = None, *,
               robots_cache: Mapping[str, RobotsEntry] | None = None) -> ShardResult:
    """Poll every feed in a shard, then fetch robots.txt and each new page, under per-host limits.

    A robots.txt verdict in ``robots_cache`` (from ``load_robots_cache``) still fresh at ``now`` is
    used without a fetch; the verdicts fetched are returned in ``ShardResult.robots``.

    One limiter sees every request of the shard (feeds, robots.txt, pages), so each host gets at
    most ``host_max_concurrency`` requests in flight and its token-bucket rate, however many
    workers run. One failure never stops the rest. Pushed feeds come first in ``jobs`` (the plan's
    priority lane); with WebSub on, a feed with a live lease gets the relaxed backstop interval.
    Each fetched page's row is built in this process's article workers, under the per-article budget
    (:mod:`tasks.ingest.budget`; none with ``article_workers`` 0).
    """
    result = ShardResult()
    backstop = websub.backstop_seconds if websub is not None and websub.enabled else None
    articles = article_workers(ARTICLE_WORK, settings)  # started first: the workers load their models while feeds are polled
    limiter = HostLimiter(host_limits_from(settings))
    workers = settings.max_workers
    with make_client(settings) as client, ThreadPoolExecutor(max_workers=workers) as pool:
        robots = RobotsCache(client, settings, robots_cache, now)
        polled = run_per_host(
            jobs, host_of=lambda j: host_of_url(j.url),
            work=lambda j: poll_feed_safely(j, client, settings, now, backstop),
            status_of=_polled_status, limiter=limiter, pool=pool, max_in_flight=workers,
            skip=lambda j: _skipped_poll(j, settings, now))
        work = [(job, item) for job, outcome in zip(jobs, polled, strict=True)
                for item in outcome.new_items if item.link]
        # An item without an http(s) link has no page to fetch: recorded, once (it is marked seen).
        result.page_errors.extend(no_link_error(job, item) for job, outcome in zip(jobs, polled, strict=True)
                                  for item in outcome.new_items if not item.link)
        origins = sorted(o for o in {RobotsCache.origin_of(item.link or "") for _, item in work} if not robots.has(o))
        run_per_host(origins, host_of=host_of_url, work=robots.load, status_of=lambda _: 200,
                     limiter=limiter, pool=pool, max_in_flight=workers)
        # A page's host is judged on its answer only: the row's build and the wait for an article
        # worker are ours, and counted as a slow response they once tripped healthy hosts (issue 32).
        timed = run_per_host(
            work, host_of=lambda w: host_of_url(w[1].link or ""),
            work=lambda w: fetch_article_timed(w[0], w[1], client, robots, settings, now, articles),
            status_of=lambda t: page_status(t[0]), elapsed_of=lambda t: t[1], limiter=limiter, pool=pool,
            max_in_flight=workers, skip=lambda w: (skipped_page(w[0], w[1]), None))
        pages = [outcome for outcome, _ in timed]
    retry: dict[str, set[str]] = defaultdict(set)
    for page in pages:
        if isinstance(page, ArticleRow):
            result.articles.append(page)
            continue
        result.page_errors.append(page)
        if page.is_transient:
            retry[page.feed_id].add(page.guid)
    for job, outcome in zip(jobs, polled, strict=True):
        state, report = outcome.state, outcome.report
        if job.feed_id in retry:
            # The page failed for now (timeout, 429, 5xx): forget the item so the next poll takes it
            # again, and drop the validators so a 304 cannot hide it.
            state = forget_items(state, retry[job.feed_id])
        result.states.append(state)
        result.reports.append(report)
        if report.error_kind != "host_backoff":  # skipped feeds keep their markers for the next run
            result.push_keys.extend(job.push_keys)
        log.info("feed_polled feed_url=%s status=%s new=%d error=%s warning=%s next_in_s=%d reason=%s elapsed_ms=%.0f",
                 job.url, report.status, report.new_items, report.error_kind, report.warning_kind,
                 report.interval_seconds, report.poll_reason, report.elapsed_ms)
    result.host_stats = limiter.stats()
    result.robots = robots.fetched
    return result


@task(name="poll_shard", cache_policy=NO_CACHE)  # each request has its own wall-clock cap
def poll_shard_task(jobs: list[FeedJob], settings: IngestSettings, now: datetime, websub: WebSubSettings,
                    robots_cache: dict[str, RobotsEntry] | None = None) -> ShardResult:
    return poll_shard(jobs, settings, now, websub, robots_cache=robots_cache)
