"""Ingest, step 2: robots.txt per origin (RFC 9309), cached across runs in ``state/robots/``.

The verdict rules, the cache's format and its freshness are pure (``transforms/robots.py``,
``transforms/robots_cache.py``); this module fetches robots.txt files and reads and writes the cache object.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx
from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.errors import FetchError
from tasks.http import fetch_url
from tasks.ingest.feed_job import FeedJob
from tasks.politeness import host_of_url
from tasks.settings import IngestSettings
from transforms.robots import ROBOTS_MAX_BYTES, is_allowed, robots_policy_for_status
from transforms.robots_cache import (
    RobotsEntry,
    RobotsVerdict,
    fresh_robots_entries,
    merge_robots_entries,
    read_robots_cache,
    robots_cache_to_bytes,
    robots_verdict_of,
)
from warehouse import layout
from warehouse.damage import record_damage
from warehouse.errors import ObjectNotFoundError, PreconditionFailedError
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)

ROBOTS_CACHE_WRITE_ATTEMPTS = 3
# A robots.txt fetch failing this way says the host cannot be reached, not what its publisher allows.
_HOST_REFUSAL_KINDS = frozenset({"blocked_address", "dns"})


def _cached_entries(data: bytes) -> dict[str, RobotsEntry]:
    """The stored cache's entries; a corrupt object is named in a recorded error (issue 16) and read
    as empty, and the next write replaces it."""
    entries, problem = read_robots_cache(data)
    if problem is not None:
        record_damage(layout.ROBOTS_CACHE_KEY, problem, "read as empty; the next write replaces it")
    return entries


def load_robots_cache(store: ObjectStore, now: datetime, ttl_seconds: int) -> dict[str, RobotsEntry]:
    """The robots.txt verdicts still fresh at ``now``, by origin; none if the object is missing or corrupt."""
    try:
        data = store.get(layout.ROBOTS_CACHE_KEY).data
    except ObjectNotFoundError:
        return {}
    return fresh_robots_entries(_cached_entries(data), now, ttl_seconds)


def save_robots_cache(store: ObjectStore, fetched: Mapping[str, RobotsEntry], now: datetime) -> bool:
    """Merge the verdicts fetched this run into the cache object; False if none were written.

    The object is replaced with If-Match: a concurrent run's write makes this one re-read and merge
    again (``merge_robots_entries``). After :data:`ROBOTS_CACHE_WRITE_ATTEMPTS` lost races this
    run's entries are given up: that only costs one more fetch of those robots.txt files.
    """
    if not fetched:
        return False
    for _ in range(ROBOTS_CACHE_WRITE_ATTEMPTS):
        try:
            current = store.get(layout.ROBOTS_CACHE_KEY)
            entries, etag = _cached_entries(current.data), current.etag
        except ObjectNotFoundError:
            entries, etag = {}, None
        kept = merge_robots_entries(entries, fetched, now)
        try:
            store.put(layout.ROBOTS_CACHE_KEY, robots_cache_to_bytes(kept), if_match=etag,
                      if_none_match=etag is None, content_type="application/gzip")
        except PreconditionFailedError:
            continue
        return True
    log.warning("robots_cache_write_lost origins=%d", len(fetched))
    return False


def robots_for_shard(entries: Mapping[str, RobotsEntry], jobs: list[FeedJob]) -> dict[str, RobotsEntry]:
    """The cached verdicts of the hosts a shard's feeds are on, where nearly all their links point:
    each shard gets its part, not the whole cache (a link to another host is fetched, as uncached).

    >>> from transforms.records import FeedState
    >>> at = datetime(2026, 1, 1, tzinfo=UTC)
    >>> cache = {"https://a.example": RobotsEntry("allow_all", at), "https://b.example": RobotsEntry("allow_all", at)}
    >>> job = FeedJob("f", "https://a.example/rss", "p", "en", "US", "", FeedState("f"), 2)
    >>> sorted(robots_for_shard(cache, [job]))
    ['https://a.example']
    """
    hosts = {host_of_url(job.url) for job in jobs}
    return {origin: entry for origin, entry in entries.items() if host_of_url(origin) in hosts}


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
        self._cached = fresh_robots_entries(cached or {}, self._now, settings.robots_ttl_seconds)
        self._rules: dict[str, RobotsVerdict] = {}
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

    def _known(self, origin: str) -> RobotsVerdict | None:
        with self._lock:
            policy = self._rules.get(origin)
            entry = self._cached.get(origin)
        if policy is None and entry is not None:
            policy = robots_verdict_of(entry)
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

    def load(self, origin: str) -> RobotsVerdict:
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
        policy = robots_verdict_of(entry)
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


@task(name="load_robots_cache", retries=2, retry_delay_seconds=2, timeout_seconds=60, cache_policy=NO_CACHE)
def load_robots_cache_task(store: ObjectStore, now: datetime, ttl_seconds: float) -> dict[str, RobotsEntry]:
    return load_robots_cache(store, now, ttl_seconds)
