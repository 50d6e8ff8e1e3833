"""Ingest, step 5: write what the shards polled, in the order that makes a crash harmless."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import NotRequired, TypedDict

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks import events
from tasks.crashpoints import crash_point
from tasks.identity import (
    assign_identities,
    clear_pending,
    commit_identities,
    mark_pending,
    roll_forward_pending,
)
from tasks.ingest.article import BUDGET_KINDS
from tasks.ingest.plan import load_feed_states
from tasks.ingest.poll import ShardResult
from tasks.ingest.robots import save_robots_cache
from tasks.politeness import host_of_url
from tasks.registry import load_registry
from tasks.sections import store_taught_sections, teach_sections
from tasks.settings import IngestSettings, WebSubSettings
from tasks.websub import SubscriptionTarget, delete_push_markers, maintain_subscriptions, retire_subscriptions
from transforms.poll_outcome import FeedReport
from transforms.records import ArticleRow
from warehouse import layout
from warehouse.damage import collect_damage
from warehouse.schemas import ARTICLES_SCHEMA, FEED_STATE_SCHEMA, FETCHES_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import content_segment_id, rows_to_table, write_segment, write_table


class OverBudgetPage(TypedDict):
    """A page whose own work went past the per-article budget (issue 32)."""

    feed_id: str
    url: str
    kind: str
    error: str


class FeedFailure(TypedDict):
    """A feed whose poll failed or warned this run, for the run report."""

    feed_id: str
    url: str
    status: int | None
    kind: str | None
    error: str | None
    is_error: bool
    next_poll_at: str
    interval_seconds: int
    reason: str


class TierLag(TypedDict):
    """Publish -> first-seen lag of one publisher tier's new articles (seconds; ``articles`` counted)."""

    p50: float
    p95: float
    articles: float


class DamageNote(TypedDict):
    """An object the commit could not read and what it did instead (``warehouse.damage.DamagedObject``)."""

    key: str
    kind: str
    problem: str
    action: str


class IngestCommitSummary(TypedDict):
    """What an ingest commit wrote and found, in the order the run's log line shows it."""

    feeds_polled: int
    not_modified: int
    new_items: int
    new_articles: int
    identity: dict[str, int]
    rolled_forward: int
    segment_written: bool
    sections_taught: int
    errors: dict[str, int]
    warnings: dict[str, int]
    parked: int
    pushed: int
    robots_fetched: int
    websub: dict[str, int]
    lag_seconds_by_tier: dict[str, TierLag]
    over_budget: list[OverBudgetPage]
    failures: list[FeedFailure]
    damaged: NotRequired[list[DamageNote]]


@dataclass(frozen=True, slots=True)
class _Appended:
    """What the article half of a commit did: the rows appended and what they taught."""

    rows: list[ArticleRow]
    identity_counts: dict[str, int]
    rolled_forward: int
    segment_written: bool
    sections_taught: int


def commit_ingest(store: ObjectStore, shards: list[ShardResult], now: datetime, *,
                  ingest: IngestSettings | None = None, websub: WebSubSettings | None = None) -> IngestCommitSummary:
    """Write the new articles as one content-keyed segment, then the feed states, then WebSub upkeep.

    ``damaged`` in the summary names the objects it could not read and what it did instead (a
    corrupt feed state or robots.txt cache read as empty and replaced, issue 16).
    """
    with collect_damage() as damaged:
        summary = _commit_ingest(store, shards, now, ingest=ingest, websub=websub)
    if damaged:
        summary["damaged"] = [DamageNote(key=d.key, kind=d.kind, problem=d.problem, action=d.action) for d in damaged]
    return summary


def _commit_ingest(store: ObjectStore, shards: list[ShardResult], now: datetime, *,
                   ingest: IngestSettings | None = None, websub: WebSubSettings | None = None) -> IngestCommitSummary:
    """See :func:`commit_ingest`.

    Order matters for crash safety: the articles first (:func:`_append_articles`), then the feed
    states, then the fetches. Push markers are deleted after the states (a crash in between only
    polls those feeds once more), then the robots.txt verdicts fetched are merged into the cache (a
    lost write only costs a fetch), and subscriptions are requested or renewed last, when
    ``websub`` is enabled (issue 3).
    """
    crash_point("ingest.after_fetch")
    appended = _append_articles(store, shards, now)
    _write_feed_states(store, shards)
    record_fetches(store, shards, now)
    pushed = delete_push_markers(store, [k for s in shards for k in s.push_keys])
    robots_fetched = {origin: entry for s in shards for origin, entry in s.robots.items()}
    save_robots_cache(store, robots_fetched, now)
    reports = [r for s in shards for r in s.reports]
    subscriptions = _keep_subscriptions(store, reports, now, ingest, websub)
    errors, warnings = _count_problems(shards, reports)
    return {
        "feeds_polled": len(reports),
        "not_modified": sum(1 for r in reports if r.status == 304),
        "new_items": sum(r.new_items for r in reports),
        "new_articles": len(appended.rows),
        "identity": appended.identity_counts,
        "rolled_forward": appended.rolled_forward,
        "segment_written": appended.segment_written,
        "sections_taught": appended.sections_taught,
        "errors": errors,
        "warnings": warnings,
        "parked": sum(1 for r in reports if r.is_parked),
        "pushed": pushed,
        "robots_fetched": len(robots_fetched),
        "websub": subscriptions,
        "lag_seconds_by_tier": discovery_lag_by_tier(store, appended.rows),
        "over_budget": _over_budget(shards),
        "failures": [_failure(r) for r in sorted(reports, key=lambda r: r.feed_id) if r.error_kind or r.warning_kind],
    }


def _append_articles(store: ObjectStore, shards: list[ShardResult], now: datetime) -> _Appended:
    """Append the shards' new article versions to the log and commit their identities.

    The segment is named in a pending marker before it is written, and the marker is dropped once
    the identity shards are committed; a crash in between makes the next run commit that segment's
    identities first (:func:`tasks.identity.roll_forward_pending`), so the same items fetched again
    are known and the log holds each article version once. A crash after the shards and before the
    feed state makes the rerun fetch the same items again, which the identity index then drops.
    """
    rolled_forward = roll_forward_pending(store, now)
    articles: dict[tuple[str, str], ArticleRow] = {}
    for shard in shards:
        for row in shard.articles:
            articles.setdefault((row.article_id, row.content_hash), row)
    identity = assign_identities(store, list(articles.values()), now)
    rows = sorted(identity.rows, key=lambda r: (r.first_seen_at, r.article_id))
    # Sections: guessed with what the articles naming theirs taught, then those folded in (issue 33).
    rows, taught = teach_sections(store, rows, now)
    written = False
    if rows:
        table = rows_to_table([row.to_row() for row in rows], ARTICLES_SCHEMA)
        key = layout.article_segment_key(now, content_segment_id(table))
        mark_pending(store, key)
        written = write_segment(store, key, table, ARTICLES_SCHEMA)
    crash_point("ingest.after_segment")
    commit_identities(store, identity, now)
    if rows:
        clear_pending(store)
        # The writers consume segments from the moment they exist; the event wakes them now (issue 31).
        events.emit(events.ARTICLES_APPENDED, events.resource_id("log", "articles"),
                    {"segment": key, "articles": len(rows), "languages": sorted({r.language for r in rows})})
    # After the rows: a crash before this only loses what they taught (a rerun folds them again).
    sections_taught = store_taught_sections(store, taught)
    return _Appended(rows, identity.counts, rolled_forward, written, len(taught.rows) if sections_taught else 0)


def _write_feed_states(store: ObjectStore, shards: list[ShardResult]) -> None:
    """Fold the shards' feed states into the stored ones, written through the stored etag (If-Match)."""
    states, etag = load_feed_states(store)
    for shard in shards:
        for state in shard.states:
            states[state.feed_id] = state
    state_rows = [states[k].to_row() for k in sorted(states)]
    table = rows_to_table(state_rows, FEED_STATE_SCHEMA)
    write_table(store, layout.FEED_STATE_KEY, table, FEED_STATE_SCHEMA, if_match=etag, if_none_match=etag is None)


def _keep_subscriptions(store: ObjectStore, reports: list[FeedReport], now: datetime,
                        ingest: IngestSettings | None, websub: WebSubSettings | None) -> dict[str, int]:
    """Request or renew the WebSub subscriptions of the feeds polled with a hub, retire those of feeds
    no longer read; counts by outcome (nothing unless ``websub`` is enabled)."""
    if websub is None or not websub.enabled or ingest is None:
        return {}
    targets = [SubscriptionTarget(r.feed_id, r.topic_url or r.url, r.hub_url) for r in reports
               if r.hub_url and r.error_kind is None]
    subscriptions = maintain_subscriptions(store, targets, ingest, websub, now)
    read = {f["feed_id"] for f in load_registry(store).read_feeds()}
    retired = retire_subscriptions(store, read, ingest, websub, now)
    subscriptions.update({f"retire_{k}": v for k, v in retired.items()})
    return subscriptions


def _count_problems(shards: list[ShardResult], reports: list[FeedReport]) -> tuple[dict[str, int], dict[str, int]]:
    """Feed errors and page errors (``page_<kind>``) by kind, and feed warnings by kind, each sorted."""
    errors: dict[str, int] = defaultdict(int)
    warnings: dict[str, int] = defaultdict(int)
    for r in reports:
        if r.error_kind:
            errors[r.error_kind] += 1
        if r.warning_kind:
            warnings[r.warning_kind] += 1
    for s in shards:
        for e in s.page_errors:
            errors[f"page_{e.error_kind}"] += 1
    return dict(sorted(errors.items())), dict(sorted(warnings.items()))


def _over_budget(shards: list[ShardResult]) -> list[OverBudgetPage]:
    """Pages whose own work went past the per-article budget, named, not only counted (issue 32);
    log/fetches has every page error with its URL."""
    return sorted((OverBudgetPage(feed_id=e.feed_id, url=e.url, kind=e.error_kind, error=e.error)
                   for s in shards for e in s.page_errors if e.error_kind in BUDGET_KINDS),
                  key=lambda f: (f["feed_id"], f["url"]))


def _failure(r: FeedReport) -> FeedFailure:
    return {"feed_id": r.feed_id, "url": r.url, "status": r.status, "kind": r.error_kind or r.warning_kind,
            "error": r.error or r.warning, "is_error": r.error_kind is not None,
            "next_poll_at": r.next_poll_at.isoformat(), "interval_seconds": r.interval_seconds,
            "reason": r.poll_reason}


def _fetch_id(now: datetime, kind: str, url: str, feed_id: str) -> str:
    return hashlib.blake2b(f"{now.isoformat()}|{kind}|{feed_id}|{url}".encode(), digest_size=12).hexdigest()


@dataclass(frozen=True, slots=True)
class FetchRow:
    """One row of ``log/fetches/`` (``FETCHES_SCHEMA``): a feed poll or an article page of a run."""

    fetch_id: str
    fetched_at: datetime
    kind: str
    feed_id: str
    publisher_id: str | None
    host: str | None
    url: str
    status: int | None
    is_conditional: bool
    error_kind: str | None
    elapsed_ms: float | None
    interval_seconds: int | None
    poll_reason: str | None

    def to_row(self) -> dict[str, object]:
        """The row for ``FETCHES_SCHEMA``."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def fetch_rows(shards: list[ShardResult], now: datetime, publisher_of: Mapping[str, str]) -> list[FetchRow]:
    """One ``FETCHES_SCHEMA`` row per feed poll and per article page of a run (successes and failures).

    ``publisher_of`` maps feed ids to publishers. A page that was never requested (no link, robots.txt
    said no, the host was backing off) is recorded with its error kind and no status.
    """
    rows: list[FetchRow] = []
    for shard in shards:
        for r in shard.reports:
            rows.append(FetchRow(_fetch_id(now, "feed", r.url, r.feed_id), now, "feed", r.feed_id,
                                 publisher_of.get(r.feed_id), host_of_url(r.url), r.url, r.status, r.sent_validators,
                                 r.error_kind, r.elapsed_ms, r.interval_seconds, r.poll_reason))
        pages: list[tuple[str, str, str | None, int | None]] = [(a.url, a.feed_id, None, 200) for a in shard.articles]
        pages += [(e.url or "", e.feed_id, e.error_kind, e.status) for e in shard.page_errors]
        for url, feed_id, error_kind, status in pages:
            rows.append(FetchRow(_fetch_id(now, "page", url, feed_id), now, "page", feed_id, publisher_of.get(feed_id),
                                 host_of_url(url) if url else None, url, status, False, error_kind, None, None, None))
    return sorted(rows, key=lambda r: (r.kind, r.feed_id, r.url, r.fetch_id))


def record_fetches(store: ObjectStore, shards: list[ShardResult], now: datetime) -> int:
    """Append the run's fetches to ``log/fetches/`` (one content-keyed segment); returns the rows written.

    Metrics for the dashboards, written after the feed states: a crash before it loses one run's
    metrics, never an article; a rerun at the same instant writes the same ``fetch_id`` again,
    which the ``fetches`` view counts once.
    """
    publisher_of = {f["feed_id"]: f["publisher_id"] for f in load_registry(store).feeds}
    rows = fetch_rows(shards, now, publisher_of)
    if not rows:
        return 0
    table = rows_to_table([row.to_row() for row in rows], FETCHES_SCHEMA)
    write_segment(store, layout.fetch_segment_key(now, content_segment_id(table)), table, FETCHES_SCHEMA)
    return len(rows)


def discovery_lag_by_tier(store: ObjectStore, rows: list[ArticleRow]) -> dict[str, TierLag]:
    """Publish -> first-seen lag (p50, p95 seconds) of new articles per publisher tier.

    Only articles whose page states a publication time no later than first sight are counted; the
    claimed time is used for this measurement only, never for ranking.
    """
    tiers = {p["publisher_id"]: p["tier"] for p in load_registry(store).publishers.values()}
    lags: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        published, seen = row.published_at, row.first_seen_at
        if published is not None and published <= seen:
            lags[str(tiers.get(row.publisher_id, "?"))].append((seen - published).total_seconds())
    return {tier: {"p50": _quantile(v, 0.5), "p95": _quantile(v, 0.95), "articles": float(len(v))}
            for tier, v in sorted(lags.items())}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@task(name="commit_ingest", retries=3, retry_delay_seconds=2, timeout_seconds=300, cache_policy=NO_CACHE)
def commit_ingest_task(store: ObjectStore, shards: list[ShardResult], now: datetime, ingest: IngestSettings,
                       websub: WebSubSettings) -> IngestCommitSummary:
    return commit_ingest(store, shards, now, ingest=ingest, websub=websub)
