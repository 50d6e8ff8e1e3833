"""The per-article budget: an article past its time or memory budget, or whose worker dies, fails alone,
named, and the run goes on (issue 32; ``tasks/ingest/budget.py``).

The work the workers run here misbehaves on request (``budget_work.py``); every other item is built
as ingest builds it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from budget_work import WORK
from corpus_paths import CLUSTERING_CORPORA

from replay.site import ReplaySite
from tasks.errors import ArticleBudgetError
from tasks.http import make_client
from tasks.ingest.article import PageError
from tasks.ingest.budget import ArticleBudget, ArticleRequest, ArticleWorkers
from tasks.ingest.commit import commit_ingest
from tasks.ingest.feed_job import FeedJob
from tasks.ingest.pages import fetch_article
from tasks.ingest.poll import ShardResult
from tasks.ingest.robots import RobotsCache
from tasks.reports import ingest_markdown
from tasks.settings import IngestSettings
from transforms.feeds import FeedItem
from transforms.records import ArticleRow, FeedState
from warehouse.store import LocalStore
from warehouse.tables import parquet_bytes_to_table

pytestmark = pytest.mark.integration

START = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
NOW = START + timedelta(hours=1)


@pytest.fixture(scope="module")
def site() -> Iterator[ReplaySite]:
    replay = ReplaySite.from_corpora(CLUSTERING_CORPORA, seed=7, start=START, limit=30, span_hours=1.0)
    replay.start(port=0)
    replay.set_clock(NOW)
    try:
        yield replay
    finally:
        replay.stop()


def _pool(**budget: Any) -> ArticleWorkers:
    values = {"work": WORK, "workers": 1, "seconds": 30.0, "memory_bytes": 256 * 2**20, "embed": False} | budget
    return ArticleWorkers(ArticleBudget(**values))


def _request(site: ReplaySite, guid: str) -> ArticleRequest:
    publisher = max(site.publishers, key=lambda p: len(site.released(p.publisher_id, NOW)))
    article = site.released(publisher.publisher_id, NOW)[0]
    job = FeedJob("f1", publisher.rss_url, publisher.publisher_id, "en", "US", "", FeedState("f1"))
    page = (b"<html><head><title>Budget vote</title></head><body><article><h1>Budget vote</h1><p>"
            + b"The council met on Monday to vote on the budget for the schools of the city. " * 5
            + b"</p></article></body></html>")
    return ArticleRequest(job, FeedItem(guid, article.url, "Budget vote", "", None, None, (), None, None, None),
                          page, article.url, NOW, False, None)


@pytest.mark.parametrize(("guid", "budget", "kind"), [
    ("sleep", {"seconds": 3.0}, "time_budget"),
    ("allocate", {}, "memory_budget"),
    ("die", {}, "worker_lost"),
], ids=["past-the-deadline", "past-the-memory-cap", "worker-killed"])
def test_an_article_past_its_budget_fails_alone_and_the_next_one_is_built(
        site: ReplaySite, guid: str, budget: dict[str, Any], kind: str) -> None:
    pool = _pool(**budget)
    try:
        assert isinstance(pool.build(_request(site, "first")), ArticleRow)
        with pytest.raises(ArticleBudgetError) as failed:
            pool.build(_request(site, guid))
        assert failed.value.kind == kind
        assert isinstance(pool.build(_request(site, "next")), ArticleRow)  # in a worker started afresh
    finally:
        pool.close()


def test_a_worker_that_died_while_idle_is_started_again_without_failing_the_next_article(site: ReplaySite) -> None:
    pool = _pool()
    try:
        assert isinstance(pool.build(_request(site, "first")), ArticleRow)
        (slot,) = pool._slots
        assert slot._process is not None
        slot._process.kill()  # as the OOM killer would, between two articles
        slot._process.wait()
        assert isinstance(pool.build(_request(site, "next")), ArticleRow)
    finally:
        pool.close()


def test_a_page_past_its_budget_is_a_named_page_error_and_the_run_goes_on(site: ReplaySite) -> None:
    """Through ``fetch_article``: the page is fetched, its row overruns, the page error names the kind
    (not retried: the page would do it again), and the next page of the run is stored."""
    settings = IngestSettings(allow_private_addresses=True)  # type: ignore[call-arg]
    pool = _pool(seconds=5.0)
    publisher = max(site.publishers, key=lambda p: len(site.released(p.publisher_id, NOW)))
    first, second = site.released(publisher.publisher_id, NOW)[:2]
    job = FeedJob("f1", publisher.rss_url, publisher.publisher_id, "en", "US", "", FeedState("f1"))
    try:
        with make_client(settings) as client:
            robots = RobotsCache(client, settings, None, NOW)
            slow = fetch_article(job, FeedItem("sleep", first.url, "", "", None, None, (), None, None, None),
                                 client, robots, settings, NOW, pool)
            fine = fetch_article(job, FeedItem("fine", second.url, "", "", None, None, (), None, None, None),
                                 client, robots, settings, NOW, pool)
    finally:
        pool.close()
    assert isinstance(slow, PageError) and slow.error_kind == "time_budget" and slow.url == first.url
    assert "not done in 5 s" in slow.error and not slow.is_transient and slow.status == 200
    assert isinstance(fine, ArticleRow) and fine.url == second.url


def test_a_worker_that_cannot_start_leaves_the_page_for_the_next_poll(site: ReplaySite) -> None:
    pool = _pool(work="budget_work:no_such_function")
    try:
        with pytest.raises(ArticleBudgetError) as failed:
            pool.build(_request(site, "first"))
    finally:
        pool.close()
    assert failed.value.kind == "worker_start"
    error = PageError("f1", "first", "http://x.example/a", failed.value.kind, str(failed.value), 200)
    assert error.is_transient


def test_the_run_summary_names_the_pages_past_their_budget(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    url = "http://x.example/a"
    shard = ShardResult(page_errors=[PageError("f1", "g1", url, "memory_budget", "memory_budget: more than 512 MB", 200),
                                     PageError("f1", "g2", "http://x.example/b", "too_large", "too large", 200)])
    summary = commit_ingest(store, [shard], NOW)
    assert summary["errors"] == {"page_memory_budget": 1, "page_too_large": 1}
    assert summary["over_budget"] == [{"feed_id": "f1", "url": url, "kind": "memory_budget",
                                       "error": "memory_budget: more than 512 MB"}]
    assert f"| {url} | memory_budget |" in ingest_markdown(summary, NOW.isoformat())
    fetches = {r["url"]: r["error_kind"] for key in store.list("log/fetches/")
               for r in parquet_bytes_to_table(store.get(key).data).to_pylist()}
    assert fetches == {url: "memory_budget", "http://x.example/b": "too_large"}
