"""Ingest: poll due feeds with conditional GET, fetch and extract new pages, write articles.

The plain functions here do the work; the Prefect tasks at the bottom are thin wrappers. Bodies are
read in memory, turned into a snippet and signatures, and dropped: no article body is ever written.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import threading
import zlib
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.crashpoints import crash_point
from tasks.errors import FetchError
from tasks.http import fetch_url, make_client
from tasks.identity import assign_identities, commit_identities
from tasks.politeness import HostLimiter, HostLimits, HostStats, host_of_url, run_per_host
from tasks.registry import load_registry
from tasks.sections import guess_sections
from tasks.settings import IngestSettings, WebSubSettings, get_ingest_settings, get_websub_settings
from tasks.websub import (
    SubscriptionTarget,
    delete_push_markers,
    lease_of,
    list_push_markers,
    maintain_subscriptions,
    retire_subscriptions,
    subscribed_feed_ids,
)
from transforms.canonical_url import article_id_from_url, canonicalize_url, choose_canonical_url
from transforms.embedding import embed_articles
from transforms.errors import FeedRejectedError, TransformError
from transforms.extraction import charset_from_content_type, extract_page
from transforms.features import features_from_text, features_to_row
from transforms.feeds import FeedItem, ParsedFeed, is_plausible_published_at, parse_feed, truncate_title
from transforms.polling import PollResponse, PollState, decide_next_poll, floor_for_tier
from transforms.robots import (
    ROBOTS_MAX_BYTES,
    RobotsPolicy,
    RobotsRules,
    is_allowed,
    parse_robots,
    robots_policy_for_status,
)
from transforms.text import snippet_from_text
from transforms.websub import PUSH_MIN_INTERVAL_SECONDS, is_lease_live, is_push_due
from warehouse import layout
from warehouse.damage import collect_damage, describe_error, record_damage
from warehouse.errors import ObjectNotFoundError, PreconditionFailedError
from warehouse.schemas import ARTICLES_SCHEMA, FEED_STATE_SCHEMA, SNIPPET_MAX_CHARS
from warehouse.store import ObjectStore
from warehouse.tables import content_segment_id, read_table, rows_to_table, write_segment, write_table

log = logging.getLogger(__name__)

RECENT_GUIDS = 200
FUTURE_DATE_SLACK = timedelta(days=1)
# Longest ETag / Last-Modified kept and sent back; real ones are a few dozen characters.
VALIDATOR_MAX_CHARS = 256
_NO_RESPONSE_KINDS = frozenset({"timeout", "connect", "protocol", "dns", "host_backoff"})
# A robots.txt fetch failing this way says the host cannot be reached, not what its publisher allows.
_HOST_REFUSAL_KINDS = frozenset({"blocked_address", "dns"})
# RFC 9309 §2.4: a cached robots.txt SHOULD NOT be used for more than 24 hours, whatever the setting.
ROBOTS_CACHE_MAX_AGE_SECONDS = 86_400
# A 5xx/unreachable robots.txt means "disallow all" (§2.3.1.4); kept only this long, so a short
# outage does not shut a host out for the whole TTL.
ROBOTS_UNREACHABLE_TTL_SECONDS = 600
ROBOTS_CACHE_WRITE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class FeedJob:
    feed_id: str
    url: str
    publisher_id: str
    language: str
    region: str
    section_hint: str
    state: dict[str, Any]
    tier: int = 2
    push_keys: tuple[str, ...] = ()
    """Push markers (WebSub delivery, publisher ping) that put this feed in the priority lane."""
    site_languages: tuple[str, ...] = ()
    """The languages the registry's publishers declare: a page declaring none is guessed among these only."""


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
    interval_seconds: int = 0
    poll_reason: str = ""
    warning_kind: str | None = None
    warning: str | None = None
    is_parked: bool = False
    hub_url: str | None = None
    topic_url: str | None = None


@dataclass(slots=True)
class ShardResult:
    states: list[dict[str, Any]] = field(default_factory=list)
    articles: list[dict[str, Any]] = field(default_factory=list)
    reports: list[FeedReport] = field(default_factory=list)
    page_errors: list[dict[str, Any]] = field(default_factory=list)
    host_stats: dict[str, HostStats] = field(default_factory=dict)
    push_keys: list[str] = field(default_factory=list)
    robots: dict[str, RobotsEntry] = field(default_factory=dict)
    """robots.txt verdicts this shard fetched, by origin; the commit merges them into the store's cache."""


# A Breaking boost polls a publisher's feeds faster, but never sooner than the publisher asked
# (Retry-After) or than a failing or parked feed is due.
BOOST_NEVER_OVERRIDES = frozenset({"retry_after", "backoff", "parked", "gone"})


def empty_state(feed_id: str) -> dict[str, Any]:
    """A feed never polled: every FEED_STATE_SCHEMA column, with neutral values."""
    state: dict[str, Any] = dict.fromkeys(FEED_STATE_SCHEMA.names)
    state.update(feed_id=feed_id, recent_guids=[], error_streak=0, last_new_items=0, rate_counts=[],
                 rate_observed_seconds=0.0, validator_miss_streak=0, is_validators_useless=False,
                 is_parked=False)
    return state


def load_feed_states(store: ObjectStore) -> tuple[dict[str, dict[str, Any]], str | None]:
    """Feed states by id and the object's ETag (for the conditional put).

    A state file written before a column existed is read with that column null (``read_table``
    evolves it), and nulls take ``empty_state``'s values, so adding state columns never strands a store.
    """
    table, etag = read_table(store, layout.FEED_STATE_KEY, FEED_STATE_SCHEMA)
    states = {}
    for row in table.to_pylist():
        state = empty_state(row["feed_id"])
        state.update({k: v for k, v in row.items() if v is not None})
        states[row["feed_id"]] = state
    return states, etag


def load_feed_boosts(store: ObjectStore) -> dict[str, datetime]:
    """``{publisher_id: until}`` from the boosts rank writes for Breaking stories (empty if none)."""
    try:
        raw = json.loads(store.get(layout.FEED_BOOSTS_KEY).data)
    except ObjectNotFoundError:
        return {}
    except (ValueError, RecursionError) as e:
        record_damage(layout.FEED_BOOSTS_KEY, f"corrupt: {describe_error(e)}", "read as empty")
        return {}
    if not isinstance(raw, dict):
        record_damage(layout.FEED_BOOSTS_KEY, "corrupt: not a JSON object", "read as empty")
        return {}
    boosts = {}
    for publisher_id, until in raw.items():
        try:
            boosts[str(publisher_id)] = datetime.fromisoformat(str(until).replace("Z", "+00:00"))
        except ValueError:
            continue
    return boosts


def plan_due_feeds(store: ObjectStore, now: datetime, shards: int, *,
                   push_min_interval_seconds: int = PUSH_MIN_INTERVAL_SECONDS,
                   boost_interval_seconds: int = 60) -> list[list[FeedJob]]:
    """Due feeds of publishers that have not opted out, sharded by host so a host stays in one shard.

    Pushed feeds (a push marker under ``state/push/``, issue 3) form a priority lane: they are
    taken whatever their ``next_poll_at`` and come first in their shard, unless they were polled
    less than ``push_min_interval_seconds`` ago (their markers then wait for the next run).
    """
    registry = load_registry(store)
    states, _ = load_feed_states(store)
    pushed = list_push_markers(store)
    subscribed = subscribed_feed_ids(store)
    boosted = load_feed_boosts(store)
    site_languages = tuple(sorted({p["language"] for p in registry.publishers.values()} - {"und", ""}))
    buckets: dict[int, list[FeedJob]] = defaultdict(list)
    for feed in registry.read_feeds():
        publisher = registry.publishers[feed["publisher_id"]]
        state = states.get(feed["feed_id"]) or empty_state(feed["feed_id"])
        if feed["feed_id"] in subscribed:
            # The receiver keeps the lease on the subscription record; the state takes a copy.
            state = {**state, "lease_expires_at": lease_of(store, feed["feed_id"], state.get("hub_url"))}
        push_keys = tuple(pushed.get(feed["feed_id"], ()))
        if push_keys and not is_push_due(state["last_polled_at"], now, push_min_interval_seconds):
            push_keys = ()
        due_at = state["next_poll_at"]
        if boosted.get(feed["publisher_id"], now) > now and is_push_due(state["last_polled_at"], now,
                                                                       boost_interval_seconds) \
                and not state["is_parked"] and state.get("poll_reason") not in BOOST_NEVER_OVERRIDES:
            due_at = None  # a Breaking story's publishers are polled faster for an hour (issue 5)
        if not push_keys and due_at is not None and due_at > now:
            continue
        job = FeedJob(feed["feed_id"], feed["url"], feed["publisher_id"], publisher["language"],
                      publisher["region"], feed["section_hint"] or "", state, int(publisher["tier"] or 2),
                      push_keys, site_languages)
        host = host_of_url(feed["url"])
        buckets[int(hashlib.blake2b(host.encode(), digest_size=4).hexdigest(), 16) % max(1, shards)].append(job)
    return [sorted(jobs, key=lambda j: (not j.push_keys, j.feed_id)) for _, jobs in sorted(buckets.items())]


_RobotsVerdict = RobotsRules | Literal["allow_all", "disallow_all"]


@dataclass(frozen=True, slots=True)
class RobotsEntry:
    """One origin's robots.txt as fetched at ``fetched_at``: its verdict from the HTTP status and, for
    ``parse``, the body as fetched (at most 500 KiB and one byte, so a cut last line stays cut)."""

    verdict: RobotsPolicy
    fetched_at: datetime
    body: bytes = b""


def is_robots_entry_fresh(entry: RobotsEntry, now: datetime, ttl_seconds: int) -> bool:
    """Whether a cached verdict may still be used at ``now``: younger than the TTL (at most
    :data:`ROBOTS_UNREACHABLE_TTL_SECONDS` for a disallow-all, never over 24 hours), and not from the future.

    >>> at = datetime(2026, 1, 1, tzinfo=UTC)
    >>> is_robots_entry_fresh(RobotsEntry("parse", at, b""), at + timedelta(minutes=59), 3600)
    True
    >>> is_robots_entry_fresh(RobotsEntry("disallow_all", at), at + timedelta(minutes=10), 3600)
    False
    """
    ttl = min(ttl_seconds, ROBOTS_CACHE_MAX_AGE_SECONDS)
    if entry.verdict == "disallow_all":
        ttl = min(ttl, ROBOTS_UNREACHABLE_TTL_SECONDS)
    age = (now - entry.fetched_at).total_seconds()
    return 0 <= age < ttl


def robots_cache_to_bytes(entries: Mapping[str, RobotsEntry]) -> bytes:
    """The cache object: gzip JSON ``{"version": 1, "entries": {origin: {verdict, fetched_at, body}}}``,
    the body as latin-1 text (one character per byte)."""
    doc = {"version": 1, "entries": {
        origin: {"verdict": e.verdict, "fetched_at": e.fetched_at.isoformat(), "body": e.body.decode("latin-1")}
        for origin, e in sorted(entries.items())}}
    return gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), mtime=0)


def robots_cache_from_bytes(data: bytes, key: str | None = None) -> dict[str, RobotsEntry]:
    """Entries of a cache object. Never raises: a corrupt object reads as empty and a bad entry is
    left out, so either only costs a fetch of that robots.txt. With ``key``, a corrupt object is
    named in a recorded error (issue 16); the next write replaces it."""
    try:
        doc = json.loads(gzip.decompress(data))
    except (OSError, EOFError, ValueError, RecursionError, zlib.error) as e:
        if key is not None:
            record_damage(key, f"corrupt: {describe_error(e)}", "read as empty; the next write replaces it")
        return {}
    raw = doc.get("entries") if isinstance(doc, dict) and doc.get("version") == 1 else None
    if not isinstance(raw, dict):
        if key is not None:
            record_damage(key, "corrupt: not a robots.txt cache", "read as empty; the next write replaces it")
        return {}
    entries = {}
    for origin, value in raw.items():
        entry = _robots_entry_from_json(value)
        if entry is not None:
            entries[origin] = entry
    return entries


def _robots_entry_from_json(value: object) -> RobotsEntry | None:
    if not isinstance(value, dict):
        return None
    verdict, fetched_at, body = value.get("verdict"), value.get("fetched_at"), value.get("body", "")
    if verdict not in ("parse", "allow_all", "disallow_all") or not isinstance(fetched_at, str) \
            or not isinstance(body, str):
        return None
    try:
        at = datetime.fromisoformat(fetched_at)
        data = body.encode("latin-1")
    except (ValueError, UnicodeError):
        return None
    if at.tzinfo is None or len(data) > ROBOTS_MAX_BYTES + 1:
        return None
    return RobotsEntry(verdict, at.astimezone(UTC), data)


def load_robots_cache(store: ObjectStore, now: datetime, ttl_seconds: int) -> dict[str, RobotsEntry]:
    """The robots.txt verdicts still fresh at ``now``, by origin; none if the object is missing or corrupt."""
    try:
        data = store.get(layout.ROBOTS_CACHE_KEY).data
    except ObjectNotFoundError:
        return {}
    return {origin: entry for origin, entry in robots_cache_from_bytes(data, layout.ROBOTS_CACHE_KEY).items()
            if is_robots_entry_fresh(entry, now, ttl_seconds)}


def save_robots_cache(store: ObjectStore, fetched: Mapping[str, RobotsEntry], now: datetime) -> bool:
    """Merge the verdicts fetched this run into the cache object; False if none were written.

    The object is replaced with If-Match: a concurrent run's write makes this one re-read and merge
    again. A fetched entry replaces the stored one (both are real fetches, so either verdict is
    right), and entries 24 hours away from ``now`` are dropped. After
    :data:`ROBOTS_CACHE_WRITE_ATTEMPTS` lost races this run's entries are given up: that only costs
    one more fetch of those robots.txt files.
    """
    if not fetched:
        return False
    for _ in range(ROBOTS_CACHE_WRITE_ATTEMPTS):
        try:
            current = store.get(layout.ROBOTS_CACHE_KEY)
            entries, etag = robots_cache_from_bytes(current.data, layout.ROBOTS_CACHE_KEY), current.etag
        except ObjectNotFoundError:
            entries, etag = {}, None
        entries.update(fetched)
        kept = {origin: entry for origin, entry in entries.items()
                if abs((now - entry.fetched_at).total_seconds()) < ROBOTS_CACHE_MAX_AGE_SECONDS}
        try:
            store.put(layout.ROBOTS_CACHE_KEY, robots_cache_to_bytes(kept), if_match=etag,
                      if_none_match=etag is None, content_type="application/gzip")
        except PreconditionFailedError:
            continue
        return True
    log.warning("robots_cache_write_lost origins=%d", len(fetched))
    return False


def _policy_of(entry: RobotsEntry) -> _RobotsVerdict:
    return parse_robots(entry.body) if entry.verdict == "parse" else entry.verdict


class RobotsCache:
    """robots.txt per origin for one run (RFC 9309 §2.3.1: 4xx allows all, 5xx/unreachable denies all).

    ``cached`` holds the verdicts earlier runs fetched (:func:`load_robots_cache`); those still fresh
    at ``now`` under ``robots_ttl_seconds`` are used instead of a fetch, and parsed on first use.
    What this run fetches is in :attr:`fetched`, stamped with ``now`` (the run's clock).
    """

    def __init__(self, client: httpx.Client, settings: IngestSettings,
                 cached: Mapping[str, RobotsEntry] | None = None, now: datetime | None = None) -> None:
        self._client = client
        self._settings = settings
        self._now = now or datetime.now(UTC)
        self._cached = {origin: entry for origin, entry in (cached or {}).items()
                        if is_robots_entry_fresh(entry, self._now, settings.robots_ttl_seconds)}
        self._rules: dict[str, _RobotsVerdict] = {}
        self._fetched: dict[str, RobotsEntry] = {}
        self._refusals: dict[str, FetchError] = {}
        self._lock = threading.Lock()

    @staticmethod
    def origin_of(url: str) -> str:
        """``scheme://host[:port]`` as sent on the wire (lower case, IDNA host, default port dropped),
        so the robots.txt preloaded for a feed's links is the one found for each hop.

        >>> RobotsCache.origin_of("http://LOCALHOST:80/a"), RobotsCache.origin_of("https://bücher.example:8443/")
        ('http://localhost', 'https://xn--bcher-kva.example:8443')
        """
        try:
            wire = httpx.URL(url)
        except httpx.InvalidURL:
            parts = urlsplit(url)
            return f"{parts.scheme}://{parts.netloc}"
        host = wire.raw_host.decode("ascii")
        host = f"[{host}]" if ":" in host else host
        return f"{wire.scheme}://{host}" + (f":{wire.port}" if wire.port else "")

    def has(self, origin: str) -> bool:
        """Whether ``origin``'s verdict is known without a fetch (fetched this run, or cached)."""
        with self._lock:
            return origin in self._rules or origin in self._cached

    @property
    def fetched(self) -> dict[str, RobotsEntry]:
        """The verdicts fetched this run, by origin, for the store's cache."""
        with self._lock:
            return dict(self._fetched)

    def _known(self, origin: str) -> _RobotsVerdict | None:
        with self._lock:
            policy = self._rules.get(origin)
            entry = self._cached.get(origin)
        if policy is None and entry is not None:
            policy = _policy_of(entry)
            with self._lock:
                policy = self._rules.setdefault(origin, policy)
        return policy

    def allows(self, url: str) -> bool:
        origin = self.origin_of(url)
        policy = self._known(origin)
        if policy is None:
            policy = self.load(origin)
        if isinstance(policy, str):
            return policy == "allow_all"
        return bool(is_allowed(policy, self._settings.user_agent, url))

    def load(self, origin: str) -> _RobotsVerdict:
        """Fetch and remember ``origin``'s robots.txt; returns the policy."""
        try:
            # RFC 9309 §2.5: parse the first 500 KiB and ignore the rest. One byte more than that
            # tells parse_robots the body was cut, so it drops the partial last line.
            result = fetch_url(self._client, f"{origin}/robots.txt", self._settings,
                               max_bytes=ROBOTS_MAX_BYTES + 1, is_truncating=True)
        except FetchError as e:
            entry = RobotsEntry("disallow_all", self._now)
            if e.kind in _HOST_REFUSAL_KINDS:
                with self._lock:
                    self._refusals[origin] = e
                if e.kind == "blocked_address":
                    # Refused for its address, not by the publisher: nothing to remember across runs.
                    with self._lock:
                        self._rules[origin] = "disallow_all"
                    return "disallow_all"
        else:
            verdict = robots_policy_for_status(result.status)
            entry = RobotsEntry(verdict, self._now, result.body if verdict == "parse" else b"")
        policy = _policy_of(entry)
        with self._lock:
            self._rules[origin] = policy
            self._fetched[origin] = entry
        return policy

    def check(self, url: str) -> None:
        """Refuse ``url`` unless its origin's robots.txt allows it, naming the real reason (#16).

        A host whose robots.txt could not be fetched because of its address (refused, or no DNS
        answer) is reported as that, since the page would fail the same way: only a robots.txt the
        publisher served makes a ``robots_disallowed``.

        Raises:
            FetchError: ``robots_disallowed``, or the kind the robots.txt fetch failed with.
        """
        if self.allows(url):
            return
        with self._lock:
            refusal = self._refusals.get(self.origin_of(url))
        if refusal is not None:
            raise FetchError(refusal.kind, str(refusal).removeprefix(f"{refusal.kind}: "), url=url)
        raise FetchError("robots_disallowed", "robots.txt disallows this page", url=url)


def _poll_state(state: dict[str, Any]) -> PollState:
    return PollState(
        interval_seconds=state.get("interval_seconds"), last_polled_at=state.get("last_polled_at"),
        rate_counts=tuple(state.get("rate_counts") or ()),
        rate_observed_seconds=float(state.get("rate_observed_seconds") or 0.0),
        error_streak=int(state.get("error_streak") or 0),
        validator_miss_streak=int(state.get("validator_miss_streak") or 0),
        is_validators_useless=bool(state.get("is_validators_useless")),
    )


def _bad_date_count(items: tuple[FeedItem, ...] | list[FeedItem], now: datetime) -> int:
    return sum(1 for i in items if i.published_at is None and i.updated_at is None
               or (i.published_at is not None and not is_plausible_published_at(i.published_at, now)))


def clean_validator(value: object) -> str | None:
    """``value`` if it can be stored and sent back as ``If-None-Match``/``If-Modified-Since``, else None.

    Only printable ASCII (visible characters and spaces, RFC 9110 §8.8.3 ``etagc`` and §5.6.7
    HTTP-date) of at most :data:`VALIDATOR_MAX_CHARS` characters is kept: httpx refuses to encode
    anything else, and a stored one would then fail every later poll of the feed.

    >>> clean_validator('W/"v1"'), clean_validator('"caf\\u00e9"'), clean_validator("a\\r\\nb")
    ('W/"v1"', None, None)
    """
    if not isinstance(value, str) or len(value) > VALIDATOR_MAX_CHARS or not value.strip():
        return None
    return value if value.isascii() and value.isprintable() else None


def poll_feed(job: FeedJob, client: httpx.Client, settings: IngestSettings, now: datetime, *,
              backstop_seconds: int | None = None) -> tuple[dict[str, Any], list[FeedItem], FeedReport]:
    """Conditional GET of one feed; returns its next state, its new items and a report.

    Never raises for anything the publisher sends: failures become ``error_kind``/``error`` in the
    report and the state, and a usable but flawed feed (wrong charset, broken XML, garbage dates)
    is ingested with a ``warning``. Items beyond ``max_items_per_feed`` are not marked seen, and the
    old validators are kept so the next poll gets them.

    The feed's WebSub hub (``link rel=hub``) is recorded in the state; while a lease is live the
    next poll is only a backstop, at least ``backstop_seconds`` away (issue 3).
    """
    state = {**empty_state(job.feed_id), **job.state}
    # A stored validator that cannot be sent back (stored before they were checked) is dropped here,
    # whatever this poll brings, so it can never fail the request.
    state["etag"], state["last_modified"] = clean_validator(state["etag"]), clean_validator(state["last_modified"])
    headers = {}
    if not state["is_validators_useless"]:
        if state.get("etag"):
            headers["If-None-Match"] = state["etag"]
        if state.get("last_modified"):
            headers["If-Modified-Since"] = state["last_modified"]
    status: int | None = None
    new: list[FeedItem] = []
    error_kind = error = warning_kind = warning = None
    response_headers: Mapping[str, str] = {}
    parsed: ParsedFeed | None = None
    validators_changed = False
    elapsed = 0.0
    try:
        result = fetch_url(client, job.url, settings, max_bytes=settings.max_feed_bytes, headers=headers)
        status, response_headers, elapsed = result.status, result.headers, result.elapsed_ms
        if 200 <= status < 300:
            parsed = parse_feed(result.body, result.final_url, headers=result.headers,
                                max_items=RECENT_GUIDS, max_bytes=settings.max_feed_bytes)
            if parsed.items or not parsed.is_malformed:
                state["hub_url"] = parsed.hub_url
            if parsed.is_malformed and not parsed.items:
                error_kind, error = "parse", f"not a usable feed: {parsed.error or 'no items'}"
            else:
                seen = set(state.get("recent_guids") or [])
                fresh = [item for item in parsed.items if item.guid not in seen]
                new = fresh[: settings.max_items_per_feed]
                taken = {item.guid for item in new}
                marked = [item.guid for item in parsed.items if item.guid in seen or item.guid in taken]
                state["recent_guids"] = (marked + [g for g in state.get("recent_guids") or []
                                                   if g not in set(marked)])[:RECENT_GUIDS]
                raw_etag, raw_last_modified = result.headers.get("etag"), result.headers.get("last-modified")
                etag, last_modified = clean_validator(raw_etag), clean_validator(raw_last_modified)
                validators_changed = bool(headers) and (
                    bool(etag) and etag != state.get("etag")
                    or bool(last_modified) and last_modified != state.get("last_modified"))
                if len(fresh) == len(new):  # items left over: keep the old validators, so no 304 hides them
                    # Validators change only on 2xx; a response without Last-Modified keeps the old one.
                    # One sent but unusable (non-ASCII, too long) clears it: the old one is stale.
                    state["etag"] = etag if raw_etag else state.get("etag")
                    state["last_modified"] = last_modified if raw_last_modified else state.get("last_modified")
                bad_dates = _bad_date_count(parsed.items, now)
                if parsed.is_malformed:
                    warning_kind, warning = "malformed", f"feed used as is: {parsed.error}"
                elif bad_dates:
                    warning_kind, warning = "bad_dates", f"{bad_dates} of {len(parsed.items)} items have no usable date"
        elif status != 304:
            error_kind, error = "http_status", f"HTTP {status}" + (
                f" (Retry-After: {result.headers['retry-after']})" if "retry-after" in result.headers else "")
    except FetchError as e:
        error_kind, error, status = e.kind, str(e), e.status
    except FeedRejectedError as e:
        error_kind, error = "rejected", str(e)
    except TransformError as e:
        error_kind, error = "parse", f"{type(e).__name__}: {e}"
    is_error = error_kind is not None
    # Implausible dates (1900, 9999) say nothing of the feed's rate (#16).
    usable_times = tuple(i.published_at if i.published_at is not None
                         and is_plausible_published_at(i.published_at, now) else None for i in new)
    dated = [i.published_at for i in (parsed.items if parsed else ()) if i.published_at is not None
             and is_plausible_published_at(i.published_at, now)]
    response = PollResponse(
        status=status, is_error=is_error, new_item_times=usable_times,
        oldest_item_at=min(dated) if dated else None,
        retry_after=response_headers.get("retry-after"), cache_control=response_headers.get("cache-control"),
        expires=response_headers.get("expires"),
        ttl_minutes=parsed.ttl_minutes if parsed else None,
        skip_hours=parsed.skip_hours if parsed else frozenset(),
        skip_days=parsed.skip_days if parsed else frozenset(),
        sent_validators=bool(headers), validators_changed=validators_changed,
    )
    floor = floor_for_tier(job.tier, tier1_floor_seconds=settings.tier1_min_interval_seconds,
                           default_floor_seconds=settings.min_interval_seconds)
    is_live = bool(state.get("hub_url")) and is_lease_live(state.get("lease_expires_at"), now)
    decision = decide_next_poll(_poll_state(state), response, now, floor_seconds=floor,
                                ceiling_seconds=max(floor, settings.max_interval_seconds),
                                backstop_seconds=backstop_seconds if is_live else None)
    state.update(
        last_polled_at=now, last_status=status, interval_seconds=decision.interval_seconds,
        next_poll_at=decision.next_poll_at, poll_reason=decision.reason, last_new_items=len(new),
        error_streak=decision.error_streak, rate_counts=list(decision.rate_counts),
        rate_observed_seconds=decision.rate_observed_seconds,
        validator_miss_streak=decision.validator_miss_streak,
        is_validators_useless=decision.is_validators_useless,
        is_parked=decision.is_parked, parked_reason=decision.parked_reason,
    )
    if error_kind or warning_kind:
        state.update(last_error_kind=error_kind or warning_kind, last_error=error or warning, last_error_at=now)
    if parsed is not None and (parsed.items or not parsed.is_malformed):
        state["topic_url"] = parsed.self_url or job.url  # the WebSub topic (rel=self), read with hub_url
    # A 304 (or an error) says nothing new of rel=hub or rel=self: the ones last read stand.
    report = FeedReport(job.feed_id, job.url, status, len(new), error_kind, error, decision.next_poll_at, elapsed,
                        decision.interval_seconds, decision.reason, warning_kind, warning, decision.is_parked,
                        hub_url=state.get("hub_url"), topic_url=state.get("topic_url") or job.url)
    return state, new, report


def build_article_row(job: FeedJob, item: FeedItem, html: bytes, fetched_url: str, now: datetime, *,
                      embed: bool = True, http_charset: str | None = None) -> dict[str, Any]:
    """Extract one fetched page into an ``ArticleRow``: a capped headline, the snippet, signatures and
    (with ``embed``) the sentence embedding of the title and lede; never the body. ``http_charset`` is
    the response's Content-Type charset, which decides the page's decoding over its ``<meta>``."""
    page = extract_page(html, fetched_url, http_charset=http_charset,
                        languages=frozenset(job.site_languages) or None)
    canonical = canonicalize_url(choose_canonical_url(fetched_url, page.canonical_url, None))
    title = truncate_title(page.title or item.title or "")
    body = page.text or item.summary or ""
    # Declarations first (page, feed, publisher); a guess from the text only when none declares one,
    # and only among the site's languages: the stopword guess once made every Malay page Indonesian (#16).
    declared = None if page.is_language_guessed else page.language
    publisher_language = job.language if job.language and job.language != "und" else None
    language = declared or item.language or publisher_language or page.language or "und"
    embedding = embed_articles([(title, body, language)])[0] if embed else None
    section_guess = guess_sections([embedding])[0]  # the same call as `newsroom classify-sections` (issue 21)
    features = features_from_text(article_id_from_url(canonical), title, body, language, now, job.publisher_id,
                                  embedding=embedding)
    content_hash = hashlib.blake2b(f"{title}\n{body}".encode(), digest_size=16).hexdigest()
    row: dict[str, Any] = {
        "article_id": features.article_id, "version": 1, "content_hash": content_hash,
        "url": item.link or fetched_url, "canonical_url": canonical, "feed_id": job.feed_id,
        "publisher_id": job.publisher_id, "language": language, "region": job.region, "title": title,
        "snippet": snippet_from_text(body, page.description or item.summary, SNIPPET_MAX_CHARS, title=title),
        "image_url": page.image_url or item.image_url, "author": page.author or item.author,
        "section": page.section or job.section_hint or None, "categories": list(item.categories),
        "is_opinion": bool(page.is_opinion), "first_seen_at": now, "section_guess": section_guess,
        **_published_times(page.published_at, item.published_at, now),
    }
    row.update(features_to_row(features))
    return row


def _published_times(page_says: datetime | None, feed_says: datetime | None, now: datetime) -> dict[str, Any]:
    """``published_at``: the page's stated time, else the feed's, whichever is plausible (see
    :func:`~transforms.feeds.is_plausible_published_at`); ``implausible_published_at``: the first
    stated time when it is not, so the claim is kept without skewing lag or polling (#16)."""
    stated = [t for t in (page_says, feed_says) if t is not None]
    plausible = [t for t in stated if is_plausible_published_at(t, now)]
    implausible = stated[0] if stated and not is_plausible_published_at(stated[0], now) else None
    return {"published_at": plausible[0] if plausible else None, "implausible_published_at": implausible}


def _poll_feed_safely(job: FeedJob, client: httpx.Client, settings: IngestSettings, now: datetime,
                      backstop_seconds: int | None = None) -> tuple[dict[str, Any], list[FeedItem], FeedReport]:
    """``poll_feed``, with a bug on one feed's input recorded against that feed (STYLE §11: the broad
    catch sits around the per-item loop) so one strange document never fails the whole run."""
    try:
        return poll_feed(job, client, settings, now, backstop_seconds=backstop_seconds)
    except Exception as e:  # noqa: BLE001 - per-item boundary; logged with its traceback
        log.exception("feed_poll_crashed feed_url=%s", job.url)
        return _failed_without_response(job, settings, now, "internal", f"internal error: {type(e).__name__}: {e}")


def _skipped_poll(job: FeedJob, settings: IngestSettings, now: datetime
                  ) -> tuple[FeedJob, dict[str, Any], list[FeedItem], FeedReport]:
    message = "skipped: the host kept failing this run (429/5xx/timeouts); backing off"
    return (job, *_failed_without_response(job, settings, now, "host_backoff", message))


def _failed_without_response(job: FeedJob, settings: IngestSettings, now: datetime, kind: str, message: str
                             ) -> tuple[dict[str, Any], list[FeedItem], FeedReport]:
    """A failure with no usable response, through the same decision as any other failure."""
    state = {**empty_state(job.feed_id), **job.state}
    floor = floor_for_tier(job.tier, tier1_floor_seconds=settings.tier1_min_interval_seconds,
                           default_floor_seconds=settings.min_interval_seconds)
    decision = decide_next_poll(_poll_state(state), PollResponse(status=None, is_error=True), now,
                                floor_seconds=floor, ceiling_seconds=max(floor, settings.max_interval_seconds))
    message = message[:500]
    state.update(last_polled_at=now, last_status=None, error_streak=decision.error_streak,
                 next_poll_at=decision.next_poll_at, poll_reason=decision.reason,
                 interval_seconds=decision.interval_seconds, is_parked=decision.is_parked,
                 parked_reason=decision.parked_reason, last_new_items=0, last_error_kind=kind,
                 last_error=message, last_error_at=now)
    return state, [], FeedReport(job.feed_id, job.url, None, 0, kind, message, decision.next_poll_at, 0.0,
                                 decision.interval_seconds, decision.reason, is_parked=decision.is_parked)


def host_limits_from(settings: IngestSettings) -> HostLimits:
    return HostLimits(
        max_concurrency=settings.host_max_concurrency, rate_per_second=settings.host_rate_per_second,
        burst=settings.host_burst, min_rate_per_second=min(settings.host_min_rate_per_second,
                                                           settings.host_rate_per_second),
        slow_seconds=settings.slow_response_seconds,
    )


def poll_shard(jobs: list[FeedJob], settings: IngestSettings, now: datetime,
               websub: WebSubSettings | None = None, *,
               robots_cache: Mapping[str, RobotsEntry] | None = None) -> ShardResult:
    """Poll every feed in a shard, then fetch robots.txt and each new page, under per-host limits.

    A robots.txt verdict in ``robots_cache`` (from :func:`load_robots_cache`) still fresh at ``now`` is
    used without a fetch; the verdicts fetched are returned in ``ShardResult.robots``.

    One limiter sees every request of the shard (feeds, robots.txt, pages), so each host gets at
    most ``host_max_concurrency`` requests in flight and its token-bucket rate, however many
    workers run. One failure never stops the rest. Pushed feeds come first in ``jobs`` (the plan's
    priority lane); with WebSub on, a feed with a live lease gets the relaxed backstop interval.
    """
    result = ShardResult()
    backstop = websub.backstop_seconds if websub is not None and websub.enabled else None
    limiter = HostLimiter(host_limits_from(settings))
    workers = settings.max_workers

    def polled_status(polled: tuple[FeedJob, dict[str, Any], list[FeedItem], FeedReport]) -> int | None:
        report = polled[3]
        return None if report.error_kind in _NO_RESPONSE_KINDS else report.status or 200

    with make_client(settings) as client, ThreadPoolExecutor(max_workers=workers) as pool:
        robots = RobotsCache(client, settings, robots_cache, now)
        polled = run_per_host(
            jobs, host_of=lambda j: host_of_url(j.url), work=lambda j: (j, *_poll_feed_safely(j, client, settings, now, backstop)),
            status_of=polled_status, limiter=limiter, pool=pool, max_in_flight=workers,
            skip=lambda j: _skipped_poll(j, settings, now))
        work = [(job, item) for job, _, items, _ in polled for item in items if item.link]
        # An item without an http(s) link has no page to fetch: recorded, once (it is marked seen).
        result.page_errors.extend(_no_link_error(job, item) for job, _, items, _ in polled
                                  for item in items if not item.link)
        origins = sorted(o for o in {RobotsCache.origin_of(item.link or "") for _, item in work} if not robots.has(o))
        run_per_host(origins, host_of=host_of_url, work=robots.load, status_of=lambda _: 200,
                     limiter=limiter, pool=pool, max_in_flight=workers)
        pages = run_per_host(
            work, host_of=lambda w: host_of_url(w[1].link or ""),
            work=lambda w: _fetch_article(w[0], w[1], client, robots, settings, now),
            status_of=lambda row: row.get("status", 200) if "article_id" not in row else 200,
            limiter=limiter, pool=pool, max_in_flight=workers,
            skip=lambda w: {"feed_id": w[0].feed_id, "guid": w[1].guid, "url": w[1].link or "",
                            "error_kind": "host_backoff", "status": None,
                            "error": "skipped: the host kept failing this run; retried next poll"})
    retry: dict[str, set[str]] = defaultdict(set)
    for row_or_error in pages:
        (result.articles if "article_id" in row_or_error else result.page_errors).append(row_or_error)
        if "article_id" not in row_or_error and _is_transient(row_or_error):
            retry[row_or_error["feed_id"]].add(row_or_error["guid"])
    for job, state, _, report in polled:
        if job.feed_id in retry:
            # The page failed for now (timeout, 429, 5xx): forget the item so the next poll takes it
            # again, and drop the validators so a 304 cannot hide it.
            state["recent_guids"] = [g for g in state["recent_guids"] if g not in retry[job.feed_id]]
            state["etag"] = state["last_modified"] = None
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


def _no_link_error(job: FeedJob, item: FeedItem) -> dict[str, Any]:
    """The page error of a feed item without a usable link (none, or not http(s)); not retried."""
    return {"feed_id": job.feed_id, "guid": item.guid, "url": "", "error_kind": "no_link", "status": None,
            "error": f"item has no http(s) link, so no page to fetch: {item.title[:80]!r}"}


def _is_transient(page_error: dict[str, Any]) -> bool:
    status = page_error.get("status")
    return page_error["error_kind"] in _NO_RESPONSE_KINDS or (
        page_error["error_kind"] == "http_status" and isinstance(status, int) and (status == 429 or status >= 500))


def _fetch_article(job: FeedJob, item: FeedItem, client: httpx.Client, robots: RobotsCache,
                   settings: IngestSettings, now: datetime) -> dict[str, Any]:
    url = item.link or ""

    try:
        # Every hop, redirects included, matched as sent: robots patterns are percent-encoded (RFC 9309 §2.2.2).
        fetched = fetch_url(client, url, settings, max_bytes=settings.max_page_bytes, allow=robots.check)
        if not 200 <= fetched.status < 300:
            raise FetchError("http_status", f"HTTP {fetched.status}", url=url, status=fetched.status)
        return build_article_row(job, item, fetched.body, fetched.final_url, now, embed=settings.embeddings,
                                 http_charset=charset_from_content_type(fetched.headers.get("content-type")))
    except FetchError as e:
        status = None if e.kind in _NO_RESPONSE_KINDS else e.status or 200
        return {"feed_id": job.feed_id, "guid": item.guid, "url": url, "error_kind": e.kind, "error": str(e),
                "status": status}
    except (TransformError, ValueError, UnicodeError) as e:
        return {"feed_id": job.feed_id, "guid": item.guid, "url": url, "error_kind": "extract",
                "error": f"{type(e).__name__}: {e}"}
    except Exception as e:  # noqa: BLE001 - per-item boundary: one strange page never fails the run
        log.exception("page_fetch_crashed url=%s", url)
        return {"feed_id": job.feed_id, "guid": item.guid, "url": url, "error_kind": "internal",
                "error": f"{type(e).__name__}: {e}"}


def commit_ingest(store: ObjectStore, shards: list[ShardResult], now: datetime, *,
                  ingest: IngestSettings | None = None, websub: WebSubSettings | None = None) -> dict[str, Any]:
    """Write the new articles as one content-keyed segment, then the feed states, then WebSub upkeep.

    ``damaged`` in the summary names the objects it could not read and what it did instead (a
    corrupt feed state or robots.txt cache read as empty and replaced, issue 16).
    """
    with collect_damage() as damaged:
        summary = _commit_ingest(store, shards, now, ingest=ingest, websub=websub)
    if damaged:
        summary["damaged"] = [asdict(d) for d in damaged]
    return summary


def _commit_ingest(store: ObjectStore, shards: list[ShardResult], now: datetime, *,
                   ingest: IngestSettings | None = None, websub: WebSubSettings | None = None) -> dict[str, Any]:
    """See :func:`commit_ingest`.

    Order matters for crash safety: a crash after the segment and before the state makes the rerun
    fetch the same items again, and consumers drop an (article_id, content_hash) they have seen.
    Push markers are deleted after the states (a crash in between only polls those feeds once more),
    then the robots.txt verdicts fetched are merged into the cache (a lost write only costs a fetch),
    and subscriptions are requested or renewed last, when ``websub`` is enabled (issue 3).
    """
    crash_point("ingest.after_fetch")
    articles: dict[tuple[str, str], dict[str, Any]] = {}
    for shard in shards:
        for row in shard.articles:
            articles.setdefault((row["article_id"], row["content_hash"]), row)
    identity = assign_identities(store, list(articles.values()), now)
    rows = sorted(identity.rows, key=lambda r: (r["first_seen_at"], r["article_id"]))
    written = False
    if rows:
        table = rows_to_table(rows, ARTICLES_SCHEMA)
        written = write_segment(store, layout.article_segment_key(now, content_segment_id(table)), table,
                                ARTICLES_SCHEMA)
    crash_point("ingest.after_segment")
    commit_identities(store, identity, now)
    states, etag = load_feed_states(store)
    for shard in shards:
        for state in shard.states:
            states[state["feed_id"]] = state
    state_rows = [states[k] for k in sorted(states)]
    table = rows_to_table(state_rows, FEED_STATE_SCHEMA)
    write_table(store, layout.FEED_STATE_KEY, table, FEED_STATE_SCHEMA, if_match=etag, if_none_match=etag is None)
    pushed = delete_push_markers(store, [k for s in shards for k in s.push_keys])
    robots_fetched = {origin: entry for s in shards for origin, entry in s.robots.items()}
    save_robots_cache(store, robots_fetched, now)
    reports = [r for s in shards for r in s.reports]
    subscriptions: dict[str, int] = {}
    if websub is not None and websub.enabled and ingest is not None:
        targets = [SubscriptionTarget(r.feed_id, r.topic_url or r.url, r.hub_url) for r in reports
                   if r.hub_url and r.error_kind is None]
        subscriptions = maintain_subscriptions(store, targets, ingest, websub, now)
        read = {f["feed_id"] for f in load_registry(store).read_feeds()}
        retired = retire_subscriptions(store, read, ingest, websub, now)
        subscriptions.update({f"retire_{k}": v for k, v in retired.items()})
    errors: dict[str, int] = defaultdict(int)
    warnings: dict[str, int] = defaultdict(int)
    for r in reports:
        if r.error_kind:
            errors[r.error_kind] += 1
        if r.warning_kind:
            warnings[r.warning_kind] += 1
    for s in shards:
        for e in s.page_errors:
            errors[f"page_{e['error_kind']}"] += 1
    return {
        "feeds_polled": len(reports),
        "not_modified": sum(1 for r in reports if r.status == 304),
        "new_items": sum(r.new_items for r in reports),
        "new_articles": len(rows),
        "identity": identity.counts,
        "segment_written": written,
        "errors": dict(sorted(errors.items())),
        "warnings": dict(sorted(warnings.items())),
        "parked": sum(1 for r in reports if r.is_parked),
        "pushed": pushed,
        "robots_fetched": len(robots_fetched),
        "websub": subscriptions,
        "lag_seconds_by_tier": discovery_lag_by_tier(store, rows),
        "failures": [
            {"feed_id": r.feed_id, "url": r.url, "status": r.status, "kind": r.error_kind or r.warning_kind,
             "error": r.error or r.warning, "is_error": r.error_kind is not None,
             "next_poll_at": r.next_poll_at.isoformat(), "interval_seconds": r.interval_seconds,
             "reason": r.poll_reason}
            for r in sorted(reports, key=lambda r: r.feed_id) if r.error_kind or r.warning_kind
        ],
    }


def discovery_lag_by_tier(store: ObjectStore, rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Publish -> first-seen lag (p50, p95 seconds) of new articles per publisher tier.

    Only articles whose page states a publication time no later than first sight are counted; the
    claimed time is used for this measurement only, never for ranking.
    """
    tiers = {p["publisher_id"]: p["tier"] for p in load_registry(store).publishers.values()}
    lags: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        published, seen = row.get("published_at"), row["first_seen_at"]
        if published is not None and published <= seen:
            lags[str(tiers.get(row["publisher_id"], "?"))].append((seen - published).total_seconds())
    return {tier: {"p50": _quantile(v, 0.5), "p95": _quantile(v, 0.95), "articles": float(len(v))}
            for tier, v in sorted(lags.items())}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


# Prefect tasks: thin wrappers. Network work is never cached.
@task(name="plan_due_feeds", retries=2, retry_delay_seconds=2, timeout_seconds=120, cache_policy=NO_CACHE)
def plan_due_feeds_task(store: ObjectStore, now: datetime, shards: int) -> list[list[FeedJob]]:
    interval = get_websub_settings().ping_min_interval_seconds
    return plan_due_feeds(store, now, shards, push_min_interval_seconds=interval)


@task(name="load_robots_cache", retries=2, retry_delay_seconds=2, timeout_seconds=60, cache_policy=NO_CACHE)
def load_robots_cache_task(store: ObjectStore, now: datetime) -> dict[str, RobotsEntry]:
    return load_robots_cache(store, now, get_ingest_settings().robots_ttl_seconds)


def robots_for_shard(entries: Mapping[str, RobotsEntry], jobs: list[FeedJob]) -> dict[str, RobotsEntry]:
    """The cached verdicts of the hosts a shard's feeds are on, where nearly all their links point:
    each shard gets its part, not the whole cache (a link to another host is fetched, as uncached).

    >>> at = datetime(2026, 1, 1, tzinfo=UTC)
    >>> cache = {"https://a.example": RobotsEntry("allow_all", at), "https://b.example": RobotsEntry("allow_all", at)}
    >>> job = FeedJob("f", "https://a.example/rss", "p", "en", "US", "", {}, 2)
    >>> sorted(robots_for_shard(cache, [job]))
    ['https://a.example']
    """
    hosts = {host_of_url(job.url) for job in jobs}
    return {origin: entry for origin, entry in entries.items() if host_of_url(origin) in hosts}


@task(name="poll_feeds", cache_policy=NO_CACHE)  # each request has its own wall-clock cap
def poll_shard_task(jobs: list[FeedJob], settings: IngestSettings, now: datetime,
                    robots_cache: dict[str, RobotsEntry] | None = None) -> ShardResult:
    return poll_shard(jobs, settings, now, get_websub_settings(), robots_cache=robots_cache)


@task(name="write_articles", retries=3, retry_delay_seconds=2, timeout_seconds=300, cache_policy=NO_CACHE)
def commit_ingest_task(store: ObjectStore, shards: list[ShardResult], now: datetime) -> dict[str, Any]:
    return commit_ingest(store, shards, now, ingest=get_ingest_settings(), websub=get_websub_settings())

