"""Ingest: poll due feeds with conditional GET, fetch and extract new pages, write articles.

The plain functions here do the work; the Prefect tasks at the bottom are thin wrappers. Bodies are
read in memory, turned into a snippet and signatures, and dropped: no article body is ever written.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.errors import FetchError
from tasks.http import fetch_url, make_client
from tasks.registry import load_registry
from tasks.settings import IngestSettings
from transforms.canonical_url import article_id_from_url, canonicalize_url, choose_canonical_url
from transforms.errors import TransformError
from transforms.extraction import extract_page
from transforms.features import features_from_text, features_to_row
from transforms.feeds import FeedItem, parse_feed
from transforms.polling import PollOutcome, next_poll_interval
from transforms.robots import is_allowed, parse_robots, robots_policy_for_status
from transforms.text import snippet_from_text
from warehouse import layout
from warehouse.schemas import ARTICLES_SCHEMA, FEED_STATE_SCHEMA, SNIPPET_MAX_CHARS
from warehouse.store import ObjectStore
from warehouse.tables import content_segment_id, read_table, rows_to_table, write_segment, write_table

log = logging.getLogger(__name__)

RECENT_GUIDS = 200


@dataclass(frozen=True, slots=True)
class FeedJob:
    feed_id: str
    url: str
    publisher_id: str
    language: str
    region: str
    section_hint: str
    state: dict[str, Any]


@dataclass(slots=True)
class FeedReport:
    feed_id: str
    url: str
    status: int | None
    new_items: int
    error_kind: str | None
    error: str | None
    next_poll_at: datetime
    elapsed_ms: float


@dataclass(slots=True)
class ShardResult:
    states: list[dict[str, Any]] = field(default_factory=list)
    articles: list[dict[str, Any]] = field(default_factory=list)
    reports: list[FeedReport] = field(default_factory=list)
    page_errors: list[dict[str, str]] = field(default_factory=list)


def empty_state(feed_id: str) -> dict[str, Any]:
    return {"feed_id": feed_id, "next_poll_at": None, "last_polled_at": None, "last_status": None,
            "etag": None, "last_modified": None, "recent_guids": [], "interval_seconds": None,
            "error_streak": 0, "last_error": None, "last_new_items": 0}


def load_feed_states(store: ObjectStore) -> tuple[dict[str, dict[str, Any]], str | None]:
    table, etag = read_table(store, layout.FEED_STATE_KEY, FEED_STATE_SCHEMA)
    return {row["feed_id"]: row for row in table.to_pylist()}, etag


def plan_due_feeds(store: ObjectStore, now: datetime, shards: int) -> list[list[FeedJob]]:
    """Due feeds of publishers that have not opted out, sharded by host so a host stays in one shard."""
    registry = load_registry(store)
    states, _ = load_feed_states(store)
    buckets: dict[int, list[FeedJob]] = defaultdict(list)
    for feed in registry.feeds:
        publisher = registry.publishers.get(feed["publisher_id"])
        if publisher is None or publisher["is_opted_out"]:
            continue
        state = states.get(feed["feed_id"]) or empty_state(feed["feed_id"])
        due_at = state["next_poll_at"]
        if due_at is not None and due_at > now:
            continue
        job = FeedJob(feed["feed_id"], feed["url"], feed["publisher_id"], publisher["language"],
                      publisher["region"], feed["section_hint"] or "", state)
        host = urlsplit(feed["url"]).netloc.lower()
        buckets[int(hashlib.blake2b(host.encode(), digest_size=4).hexdigest(), 16) % max(1, shards)].append(job)
    return [sorted(jobs, key=lambda j: j.feed_id) for _, jobs in sorted(buckets.items())]


class RobotsCache:
    """robots.txt per host for one run (RFC 9309 §2.3.1: 4xx allows all, 5xx/unreachable denies all)."""

    def __init__(self, client: httpx.Client, settings: IngestSettings) -> None:
        self._client = client
        self._settings = settings
        self._rules: dict[str, Any] = {}

    def allows(self, url: str) -> bool:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in self._rules:
            self._rules[origin] = self._load(origin)
        policy = self._rules[origin]
        if isinstance(policy, str):
            return policy == "allow_all"
        return bool(is_allowed(policy, self._settings.user_agent, url))

    def _load(self, origin: str) -> Any:
        try:
            result = fetch_url(self._client, f"{origin}/robots.txt", self._settings, max_bytes=512_000)
        except FetchError:
            return "disallow_all"
        policy = robots_policy_for_status(result.status)
        return parse_robots(result.body) if policy == "parse" else policy


def poll_feed(job: FeedJob, client: httpx.Client, settings: IngestSettings, now: datetime
              ) -> tuple[dict[str, Any], list[FeedItem], FeedReport]:
    """Conditional GET of one feed; returns its next state, its new items and a report."""
    state = dict(job.state)
    headers = {}
    if state.get("etag"):
        headers["If-None-Match"] = state["etag"]
    if state.get("last_modified"):
        headers["If-Modified-Since"] = state["last_modified"]
    status: int | None = None
    new: list[FeedItem] = []
    error_kind = error = None
    outcome_headers: dict[str, str] = {}
    ttl = None
    elapsed = 0.0
    try:
        result = fetch_url(client, job.url, settings, max_bytes=settings.max_feed_bytes, headers=headers)
        status, outcome_headers, elapsed = result.status, dict(result.headers), result.elapsed_ms
        if status == 304:
            pass
        elif 200 <= status < 300:
            parsed = parse_feed(result.body, result.final_url, headers=result.headers)
            ttl = parsed.ttl_minutes
            seen = set(state.get("recent_guids") or [])
            new = [item for item in parsed.items if item.guid not in seen][: settings.max_items_per_feed]
            guids = [item.guid for item in parsed.items]
            state["recent_guids"] = (guids + [g for g in state.get("recent_guids") or [] if g not in set(guids)])[:RECENT_GUIDS]
            # Validators change only on 2xx; a response without Last-Modified keeps the old one.
            state["etag"] = result.headers.get("etag") or state.get("etag")
            state["last_modified"] = result.headers.get("last-modified") or state.get("last_modified")
        else:
            error_kind, error = "http_status", f"HTTP {status}"
    except FetchError as e:
        error_kind, error, status = e.kind, str(e), e.status
    except TransformError as e:
        error_kind, error = "parse", f"{type(e).__name__}: {e}"
    is_error = error_kind is not None
    state["error_streak"] = (state.get("error_streak") or 0) + 1 if is_error else 0
    outcome = PollOutcome(status, len(new), is_error, outcome_headers.get("retry-after"),
                          outcome_headers.get("cache-control"), ttl)
    interval = next_poll_interval(state.get("interval_seconds") or settings.min_interval_seconds, outcome,
                                  state["error_streak"], now, floor_seconds=settings.min_interval_seconds,
                                  ceiling_seconds=settings.max_interval_seconds)
    state.update(last_polled_at=now, last_status=status, interval_seconds=interval,
                 next_poll_at=now + timedelta(seconds=interval), last_new_items=len(new),
                 last_error=error if is_error else state.get("last_error"))
    report = FeedReport(job.feed_id, job.url, status, len(new), error_kind, error, state["next_poll_at"], elapsed)
    return state, new, report


def build_article_row(job: FeedJob, item: FeedItem, html: bytes, fetched_url: str, now: datetime) -> dict[str, Any]:
    """Extract one fetched page into an ``ArticleRow``: snippet and signatures, never the body."""
    page = extract_page(html, fetched_url)
    canonical = canonicalize_url(choose_canonical_url(fetched_url, page.canonical_url, None))
    title = page.title or item.title or ""
    body = page.text or item.summary or ""
    language = page.language or item.language or job.language
    features = features_from_text(article_id_from_url(canonical), title, body, language, now, job.publisher_id)
    content_hash = hashlib.blake2b(f"{title}\n{body}".encode(), digest_size=16).hexdigest()
    row: dict[str, Any] = {
        "article_id": features.article_id, "version": 1, "content_hash": content_hash,
        "url": item.link or fetched_url, "canonical_url": canonical, "feed_id": job.feed_id,
        "publisher_id": job.publisher_id, "language": language, "region": job.region, "title": title,
        "snippet": snippet_from_text(body, page.description or item.summary, SNIPPET_MAX_CHARS),
        "image_url": page.image_url or item.image_url, "author": page.author or item.author,
        "section": page.section or job.section_hint or None, "categories": list(item.categories),
        "is_opinion": bool(page.is_opinion), "published_at": page.published_at or item.published_at,
        "first_seen_at": now,
    }
    row.update(features_to_row(features))
    return row


def poll_shard(jobs: list[FeedJob], settings: IngestSettings, now: datetime) -> ShardResult:
    """Poll every feed in a shard, then fetch and extract each new page. One failure never stops the rest."""
    result = ShardResult()
    with make_client(settings) as client:
        robots = RobotsCache(client, settings)
        with ThreadPoolExecutor(max_workers=settings.max_workers) as pool:
            polled = list(pool.map(lambda j: (j, *poll_feed(j, client, settings, now)), jobs))
            work = [(job, item) for job, _, items, _ in polled for item in items if item.link]
            for row_or_error in pool.map(lambda w: _fetch_article(w[0], w[1], client, robots, settings, now), work):
                (result.articles if "article_id" in row_or_error else result.page_errors).append(row_or_error)
    for job, state, _, report in polled:
        result.states.append(state)
        result.reports.append(report)
        log.info("feed_polled feed_url=%s status=%s new=%d error=%s elapsed_ms=%.0f",
                 job.url, report.status, report.new_items, report.error_kind, report.elapsed_ms)
    return result


def _fetch_article(job: FeedJob, item: FeedItem, client: httpx.Client, robots: RobotsCache,
                   settings: IngestSettings, now: datetime) -> dict[str, Any]:
    url = item.link or ""
    try:
        if not robots.allows(url):
            raise FetchError("robots_disallowed", "robots.txt disallows this page", url=url)
        fetched = fetch_url(client, url, settings, max_bytes=settings.max_page_bytes)
        if not 200 <= fetched.status < 300:
            raise FetchError("http_status", f"HTTP {fetched.status}", url=url, status=fetched.status)
        return build_article_row(job, item, fetched.body, fetched.final_url, now)
    except FetchError as e:
        return {"feed_id": job.feed_id, "url": url, "error_kind": e.kind, "error": str(e)}
    except (TransformError, ValueError, UnicodeError) as e:
        return {"feed_id": job.feed_id, "url": url, "error_kind": "extract", "error": f"{type(e).__name__}: {e}"}


def commit_ingest(store: ObjectStore, shards: list[ShardResult], now: datetime) -> dict[str, Any]:
    """Write the new articles as one content-keyed segment, then the feed states.

    Order matters for crash safety: a crash after the segment and before the state makes the rerun
    fetch the same items again, and consumers drop an (article_id, content_hash) they have seen.
    """
    articles: dict[tuple[str, str], dict[str, Any]] = {}
    for shard in shards:
        for row in shard.articles:
            articles.setdefault((row["article_id"], row["content_hash"]), row)
    rows = sorted(articles.values(), key=lambda r: (r["first_seen_at"], r["article_id"]))
    written = False
    if rows:
        table = rows_to_table(rows, ARTICLES_SCHEMA)
        written = write_segment(store, layout.article_segment_key(now, content_segment_id(table)), table,
                                ARTICLES_SCHEMA)
    states, etag = load_feed_states(store)
    for shard in shards:
        for state in shard.states:
            states[state["feed_id"]] = state
    state_rows = [states[k] for k in sorted(states)]
    table = rows_to_table(state_rows, FEED_STATE_SCHEMA)
    write_table(store, layout.FEED_STATE_KEY, table, FEED_STATE_SCHEMA, if_match=etag, if_none_match=etag is None)
    reports = [r for s in shards for r in s.reports]
    errors: dict[str, int] = defaultdict(int)
    for r in reports:
        if r.error_kind:
            errors[r.error_kind] += 1
    for s in shards:
        for e in s.page_errors:
            errors[f"page_{e['error_kind']}"] += 1
    return {
        "feeds_polled": len(reports),
        "not_modified": sum(1 for r in reports if r.status == 304),
        "new_items": sum(r.new_items for r in reports),
        "new_articles": len(rows),
        "segment_written": written,
        "errors": dict(sorted(errors.items())),
    }


# Prefect tasks: thin wrappers. Network work is never cached.
@task(name="plan_due_feeds", retries=2, retry_delay_seconds=2, timeout_seconds=120, cache_policy=NO_CACHE)
def plan_due_feeds_task(store: ObjectStore, now: datetime, shards: int) -> list[list[FeedJob]]:
    return plan_due_feeds(store, now, shards)


@task(name="poll_feeds", cache_policy=NO_CACHE)  # each request has its own wall-clock cap
def poll_shard_task(jobs: list[FeedJob], settings: IngestSettings, now: datetime) -> ShardResult:
    return poll_shard(jobs, settings, now)


@task(name="write_articles", retries=3, retry_delay_seconds=2, timeout_seconds=300, cache_policy=NO_CACHE)
def commit_ingest_task(store: ObjectStore, shards: list[ShardResult], now: datetime) -> dict[str, Any]:
    return commit_ingest(store, shards, now)

