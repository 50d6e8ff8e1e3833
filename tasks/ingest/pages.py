"""Ingest, step 4: fetch each new item's page and build its article row, never keeping the body.

The body is read in memory, turned into a snippet and signatures, and dropped: no article body is
ever written. The fetch runs in the polling thread; the row (:func:`tasks.ingest.article.article_or_error`:
extraction, features, embedding) is built in an article worker under a time and memory budget
(:mod:`tasks.ingest.budget`), so one hostile page fails alone, by name (issue 32).
"""

from __future__ import annotations

import logging
from datetime import datetime

import httpx

from tasks.errors import ArticleBudgetError, FetchError
from tasks.http import fetch_url
from tasks.ingest.article import NO_RESPONSE_KINDS, PageError, article_or_error
from tasks.ingest.budget import ArticleRequest, ArticleWorkers
from tasks.ingest.feed_job import FeedJob
from tasks.ingest.robots import RobotsCache
from tasks.settings import IngestSettings
from transforms.feeds import FeedItem
from transforms.html_tree import charset_from_content_type
from transforms.records import ArticleRow

log = logging.getLogger(__name__)


def no_link_error(job: FeedJob, item: FeedItem) -> PageError:
    """The page error of a feed item without a usable link (none, or not http(s)); not retried."""
    return PageError(job.feed_id, item.guid, "", "no_link",
                     f"item has no http(s) link, so no page to fetch: {item.title[:80]!r}")


def skipped_page(job: FeedJob, item: FeedItem) -> PageError:
    """A page not fetched because its host kept failing this run; retried next poll."""
    return PageError(job.feed_id, item.guid, item.link or "", "host_backoff",
                     "skipped: the host kept failing this run; retried next poll")


def page_status(outcome: ArticleRow | PageError) -> int | None:
    """The HTTP status an outcome stands for, for the host's rate (None: no response)."""
    return outcome.status if isinstance(outcome, PageError) else 200


def fetch_article(job: FeedJob, item: FeedItem, client: httpx.Client, robots: RobotsCache,
                  settings: IngestSettings, now: datetime,
                  workers: ArticleWorkers | None = None) -> ArticleRow | PageError:
    """Fetch one item's page (robots.txt checked on every hop) and build its row; never raises for
    what the publisher sends. With ``workers``, the row is built in one of them, under its budget;
    without, in this thread (the caps on every text still hold)."""
    return fetch_article_timed(job, item, client, robots, settings, now, workers)[0]


def fetch_article_timed(job: FeedJob, item: FeedItem, client: httpx.Client, robots: RobotsCache,
                        settings: IngestSettings, now: datetime,
                        workers: ArticleWorkers | None = None) -> tuple[ArticleRow | PageError, float | None]:
    """:func:`fetch_article`, and the seconds the page's host took to answer (None when it did not):
    the host's rate is adapted on that alone, not on the row's build or the wait for a worker."""
    url = item.link or ""
    answered: float | None = None
    try:
        # Every hop, redirects included, matched as sent: robots patterns are percent-encoded (RFC 9309 §2.2.2).
        fetched = fetch_url(client, url, settings, max_bytes=settings.max_page_bytes, allow=robots.check)
        answered = fetched.elapsed_ms / 1000
        if not 200 <= fetched.status < 300:
            raise FetchError("http_status", f"HTTP {fetched.status}", url=url, status=fetched.status)
        request = ArticleRequest(job, item, fetched.body, fetched.final_url, now, settings.embeddings,
                                 charset_from_content_type(fetched.headers.get("content-type")))
        del fetched  # the body travels in the request only
        if workers is None:
            return article_or_error(request), answered
        outcome = workers.build(request)
        assert isinstance(outcome, ArticleRow | PageError), type(outcome)  # what article_or_error returns
        return outcome, answered
    except FetchError as e:
        status = None if e.kind in NO_RESPONSE_KINDS else e.status or 200
        return PageError(job.feed_id, item.guid, url, e.kind, str(e), status), answered
    except ArticleBudgetError as e:
        log.warning("page_over_budget url=%s kind=%s", url, e.kind)
        return PageError(job.feed_id, item.guid, url, e.kind, str(e), 200), answered
    except Exception as e:  # noqa: BLE001 - per-item boundary: one strange page never fails the run
        log.exception("page_fetch_crashed url=%s", url)
        return PageError(job.feed_id, item.guid, url, "internal", f"{type(e).__name__}: {e}", 200), answered
