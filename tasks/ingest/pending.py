"""Ingest, first of all: the sources readers suggested, polled before the registry's feeds (issue 30).

A reader suggests a site or feed through ``POST /v1/subscriptions``; serving checks it, finds its
feed and queues it as ``pending/sources/<feed_id>/request.json``, outside the operator's
``registry/``. Each ingest run, before its due feeds, polls every pending source not polled in the
last ``PENDING_POLL_SECONDS`` (a new one: at once) and writes what it found beside the request,
``poll.json``: ``status`` ``ok`` with the feed's title and latest items (title, link, published),
or ``failing`` with the error. That is what the reader who suggested it sees
(``GET /v1/subscriptions``); no article of a pending source is fetched or stored, so nothing of it
reaches a shared page. When an operator imports the feed into the registry (the same URL, in
``normalize_feed_url``'s one spelling), the run marks it ``accepted`` with its publisher, polls it
no more as pending, and ingest reads it as any other feed.

The same rules as any poll: the address check at every connection (``make_client``), robots.txt
is not asked (one GET of a feed a person pointed at, as a feed reader does), the feed body cap,
the parser's caps.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypedDict

import httpx
from prefect import task
from prefect.cache_policies import NO_CACHE

from newsroom.times import parse_iso_datetime
from tasks.errors import FetchError
from tasks.http import fetch_url, make_client
from tasks.registry import load_registry
from tasks.settings import IngestSettings
from transforms.canonical_url import normalize_feed_url
from transforms.errors import TransformError
from transforms.feeds import parse_feed
from warehouse import layout
from warehouse.damage import record_damage
from warehouse.errors import ObjectNotFoundError
from warehouse.snapshots import dump_snapshot
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)

PENDING_POLL_SECONDS = 3600
"""A pending source is polled again this long after its last poll (its reader sees fresh items)."""
MAX_PENDING_PER_RUN = 50
"""Pending sources polled in one run at most, the oldest polls first; the rest wait for the next run."""
ITEMS_KEPT = 20


@dataclass(frozen=True, slots=True)
class PendingRequest:
    """A reader's suggestion as serving queued it (``request.json``): the feed ingest is to poll."""

    feed_id: str
    feed_url: str

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> PendingRequest | None:
        """The request in ``raw``; None when it names no feed id and URL (a damaged request is skipped)."""
        feed_id, feed_url = raw.get("feed_id"), raw.get("feed_url")
        if not isinstance(feed_id, str) or not isinstance(feed_url, str):
            return None
        return cls(feed_id, feed_url)


class PollItem(TypedDict):
    """One of a pending feed's latest items, as its reader sees it."""

    title: str | None
    link: str | None
    published_at: str | None


@dataclass(frozen=True, slots=True)
class PendingPoll:
    """What ingest last found of a pending source (``poll.json``, read by serving's ``GET /v1/subscriptions``).

    ``ok`` carries the feed's title and latest items, ``failing`` the error, ``accepted`` the
    publisher the registry now files it under (and the items last seen).
    """

    status: str
    polled_at: str | None
    items: Sequence[object] = ()
    """Each a :class:`PollItem` as ingest writes them; carried through as read when the source is accepted."""
    feed_url: str | None = None
    title: str | None = None
    error: str | None = None
    publisher_id: str | None = None

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> PendingPoll:
        """The poll in ``raw`` as far as ingest reads it back (status, when, items); lenient, as the file
        only decides when the source is polled next."""
        status, polled_at, items = raw.get("status"), raw.get("polled_at"), raw.get("items")
        return cls(status if isinstance(status, str) else "", polled_at if isinstance(polled_at, str) else None,
                   items if isinstance(items, list) else ())

    def to_json(self) -> dict[str, object]:
        """The object ``poll.json`` holds: the fields of its status only (serving reads ``error`` and
        ``title`` as they are, ``publisher_id`` only on an accepted source)."""
        if self.status == "accepted":
            return {"status": self.status, "publisher_id": self.publisher_id, "polled_at": self.polled_at,
                    "items": list(self.items)}
        out: dict[str, object] = {"polled_at": self.polled_at, "feed_url": self.feed_url, "status": self.status,
                                  "error": self.error, "items": list(self.items)}
        if self.status == "ok":
            out["title"] = self.title
        return out


class PendingCounts(TypedDict):
    """What a run did with the pending sources."""

    pending: int
    polled: int
    failing: int
    accepted: int
    errors: int


class PendingFailed(TypedDict):
    """The pending sources could not even be listed this run."""

    error: str


PendingSummary = PendingCounts | PendingFailed


def _read_json(store: ObjectStore, key: str) -> Mapping[str, object] | None:
    try:
        data = store.get(key).data
    except ObjectNotFoundError:
        return None
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as e:
        record_damage(key, f"corrupt: {e}", "skipped")
        return None
    if not isinstance(value, dict):
        record_damage(key, "corrupt: not a JSON object", "skipped")
        return None
    return value


def list_pending_sources(store: ObjectStore) -> list[tuple[PendingRequest, PendingPoll | None]]:
    """Every pending source's request and its last poll (None before the first)."""
    out = []
    for key in store.list(layout.PENDING_SOURCES_PREFIX):
        if not key.endswith("/request.json"):
            continue
        raw = _read_json(store, key)
        request = PendingRequest.from_json(raw) if raw is not None else None
        if request is None:
            continue
        poll = _read_json(store, layout.pending_source_key(request.feed_id, "poll.json"))
        out.append((request, PendingPoll.from_json(poll) if poll is not None else None))
    return out


def _spelled(url: str) -> str:
    try:
        return normalize_feed_url(url)
    except (ValueError, TransformError):
        return url


def poll_pending_sources(store: ObjectStore, settings: IngestSettings, now: datetime) -> PendingSummary:
    """Poll the pending sources that are due, accept those the registry now holds; returns a summary.

    Never fails the run: a source that cannot be polled or recorded is counted in ``errors`` and
    tried again next run, and a store that cannot even list them is named in ``error``.
    """
    try:
        return _poll_pending_sources(store, settings, now)
    except Exception as e:  # the registry's feeds come next whatever happened here
        log.warning("pending_sources_failed error=%s: %s", type(e).__name__, e)
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def _poll_pending_sources(store: ObjectStore, settings: IngestSettings, now: datetime) -> PendingCounts:
    registry = load_registry(store)
    accepted_by_url = {_spelled(f["url"]): f["publisher_id"] for f in registry.feeds}
    due: list[tuple[str, PendingRequest]] = []
    summary: PendingCounts = {"pending": 0, "polled": 0, "failing": 0, "accepted": 0, "errors": 0}
    for request, poll in list_pending_sources(store):
        summary["pending"] += 1
        publisher_id = accepted_by_url.get(_spelled(request.feed_url))
        if publisher_id is not None:
            if poll is None or poll.status != "accepted":
                _write_poll(store, request.feed_id, PendingPoll("accepted", _iso(now), poll.items if poll else (),
                                                                publisher_id=publisher_id))
                summary["accepted"] += 1
            continue
        last = parse_iso_datetime(poll.polled_at if poll else None)
        if last is None or now - last >= timedelta(seconds=PENDING_POLL_SECONDS):
            due.append(((poll.polled_at if poll else None) or "", request))
    due.sort(key=lambda d: (d[0], d[1].feed_id))  # never polled first, then the oldest polls
    if not due:
        return summary
    with make_client(settings) as client:
        for _, request in due[:MAX_PENDING_PER_RUN]:
            try:
                outcome = _poll_one(client, settings, request, now)
                _write_poll(store, request.feed_id, outcome)
            except Exception as e:  # one source's failure is not the others': next run tries it again
                log.warning("pending_source_failed feed_id=%s error=%s: %s", request.feed_id, type(e).__name__, e)
                summary["errors"] += 1
                continue
            summary["polled"] += 1
            summary["failing"] += outcome.status == "failing"
    log.info("pending_sources_polled %s", " ".join(f"{k}={v}" for k, v in summary.items()))
    return summary


def _poll_one(client: httpx.Client, settings: IngestSettings, request: PendingRequest, now: datetime) -> PendingPoll:
    url = request.feed_url

    def failing(error: str) -> PendingPoll:
        return PendingPoll("failing", _iso(now), feed_url=url, error=error[:300])

    try:
        result = fetch_url(client, url, settings, max_bytes=settings.max_feed_bytes)
    except FetchError as e:
        return failing(f"{e.kind}: {e}")
    if result.status != 200:
        return failing(f"HTTP {result.status}")
    try:
        feed = parse_feed(result.body, result.final_url, headers=result.headers, max_bytes=settings.max_feed_bytes)
    except (TransformError, ValueError) as e:
        return failing(f"not a feed: {e}")
    if feed.is_malformed and not feed.items:
        return failing(f"not a feed: {feed.error}")
    items = [PollItem(title=item.title, link=item.link, published_at=_iso(item.published_at))
             for item in feed.items[:ITEMS_KEPT]]
    return PendingPoll("ok", _iso(now), items, feed_url=url, title=feed.title)


def _write_poll(store: ObjectStore, feed_id: str, poll: PendingPoll) -> None:
    store.put(layout.pending_source_key(feed_id, "poll.json"), dump_snapshot(poll.to_json()),
              content_type="application/json")


def _iso(at: datetime | None) -> str | None:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ") if at is not None else None


@task(name="poll_pending_sources", retries=1, retry_delay_seconds=2, timeout_seconds=300, cache_policy=NO_CACHE)
def poll_pending_sources_task(store: ObjectStore, settings: IngestSettings, now: datetime) -> PendingSummary:
    return poll_pending_sources(store, settings, now)
