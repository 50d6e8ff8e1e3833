"""A reader's own sources: suggested through ``POST /v1/subscriptions``, pending until an operator takes them (issue 30).

The operator's registry (``registry/``) stays the authority on what newsroom reads and lists. A
source a reader suggests goes elsewhere:

1. the address is checked (shape, then every connection under ingest's address rule) and its feed
   found (``serving/discovery.py``); anything wrong is a 4xx and nothing is written;
2. the reader's limits are checked before anything is fetched and again, atomically, when the
   suggestion is recorded in the reader's profile (``subscriptions``: at most ``sources_per_day`` a
   day and ``sources_max`` in all; past either, 429 and nothing written);
3. the feed is queued as a pending source, ``pending/sources/<feed_id>/request.json`` (the feed,
   the site, its title; no reader: the store holds nothing personal). Ingest's next run polls
   pending sources first (``tasks/ingest/pending.py``) and writes what it found beside it
   (``poll.json``: the feed's latest items, or its error); it fetches no article of it and nothing
   of it reaches a page;
4. ``GET /v1/subscriptions`` shows the reader, and only that reader, their sources with that poll;
   once an operator imports the feed into the registry (``newsroom publishers import``), ingest
   marks it ``accepted`` and reads it like any other.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from typing import NotRequired, TypedDict

from serving.discovery import check_source_url, discover_feed
from serving.errors import TooManyError
from serving.profiles import SUBSCRIPTION_DAY_SECONDS, ProfileStore, Subscription
from serving.settings import ServingSettings
from warehouse import layout
from warehouse.errors import ObjectNotFoundError, PreconditionFailedError
from warehouse.snapshots import dump_snapshot
from warehouse.store import ObjectStore

logger = logging.getLogger(__name__)

PENDING_SOURCE_SCHEMA = "newsroom.pending_source/1"
USER_AGENT = "newsroom-sources/1 (a reader's suggested source; https://github.com/newsroom)"


def pending_feed_id(feed_url: str) -> str:
    """A pending source's id: a hash of its feed's address.

    >>> pending_feed_id("https://example.com/feed.xml")
    'p566c6413ba0edaa395'
    """
    return "p" + hashlib.blake2b(feed_url.encode(), digest_size=9).hexdigest()


class PendingSourceJson(TypedDict):
    """``pending/sources/<feed_id>/request.json``: a reader's suggested source, as ingest reads it."""

    schema: str
    feed_id: str
    feed_url: str
    site_url: str | None
    title: str | None
    kind: str
    requested_at: str


class SubscriptionJson(TypedDict):
    """One of a reader's sources as ``/v1/subscriptions`` answers it; the poll's fields (as ingest
    wrote them, passed on unchecked) once ingest has polled it."""

    feed_id: str
    feed_url: str
    site_url: str | None
    title: str | None
    created_at: int
    status: str
    polled_at: NotRequired[object]
    error: NotRequired[object]
    items: NotRequired[list[Mapping[str, object]]]


def _public(subscription: Subscription, status: str, poll: Mapping[str, object] | None = None) -> SubscriptionJson:
    out: SubscriptionJson = {
        "feed_id": subscription.feed_id, "feed_url": subscription.feed_url, "site_url": subscription.site_url,
        "title": subscription.title, "created_at": int(subscription.created_at), "status": status,
    }
    if poll is not None:
        out["polled_at"] = poll.get("polled_at")
        out["error"] = poll.get("error")
        items = poll.get("items")
        out["items"] = [i for i in items if isinstance(i, dict)][:20] if isinstance(items, list) else []
    return out


def subscribe(store: ObjectStore, profiles: ProfileStore, reader_hash: str, url: str,
              settings: ServingSettings) -> tuple[int, SubscriptionJson]:
    """Take a reader's suggested source (module docstring); returns the HTTP status and the answer.

    Raises:
        SourceRefusedError: The address, its host or what it serves cannot be taken (nothing written).
        TooManyError: The reader is at a limit (nothing written).
    """
    check_source_url(url)
    now = time.time()
    day, total = profiles.subscription_counts(reader_hash, now)
    _check_limits(day, total, settings)
    found = discover_feed(url, private_networks=settings.source_networks(),
                          deadline_seconds=settings.sources_fetch_seconds, user_agent=USER_AGENT)
    subscription = Subscription(pending_feed_id(found.feed_url), found.feed_url, found.site_url, found.title, now)
    outcome = profiles.add_subscription(reader_hash, subscription, per_day=settings.sources_per_day,
                                        in_all=settings.sources_max)
    if outcome == "exists":
        return 200, _public(subscription, "pending")
    if outcome == "over_total_limit":
        _check_limits(0, settings.sources_max, settings)
    if outcome == "over_daily_limit":
        _check_limits(settings.sources_per_day, 0, settings)
    request: PendingSourceJson = {
        "schema": PENDING_SOURCE_SCHEMA, "feed_id": subscription.feed_id, "feed_url": found.feed_url,
        "site_url": found.site_url, "title": found.title, "kind": found.kind,
        "requested_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
    }
    try:
        store.put(layout.pending_source_key(subscription.feed_id, "request.json"), dump_snapshot(request),
                  if_none_match=True, content_type="application/json")
    except PreconditionFailedError:
        pass  # another reader suggested it first: it is pending already
    except Exception:
        profiles.remove_subscription(reader_hash, subscription.feed_id)  # nothing is left half written
        raise
    logger.info("source_suggested feed_id=%s kind=%s", subscription.feed_id, found.kind)
    return 201, _public(subscription, "pending")


def _check_limits(day: int, total: int, settings: ServingSettings) -> None:
    if total >= settings.sources_max:
        raise TooManyError(f"you have suggested {settings.sources_max} sources, the most one reader may")
    if day >= settings.sources_per_day:
        raise TooManyError(f"you have suggested {settings.sources_per_day} sources in the last 24 hours; "
                           "try again later", retry_after_seconds=SUBSCRIPTION_DAY_SECONDS // 24)


def list_subscriptions(store: ObjectStore, profiles: ProfileStore, reader_hash: str) -> list[SubscriptionJson]:
    """The reader's sources with ingest's latest poll of each (``pending``, ``accepted`` or ``failing``)."""
    out = []
    for subscription in profiles.subscriptions(reader_hash):
        poll = _read_poll(store, subscription.feed_id)
        status = "pending"  # polled fine ("ok") or not yet: still waiting for an operator
        if poll is not None and poll.get("status") in ("accepted", "failing"):
            status = str(poll["status"])
        out.append(_public(subscription, status, poll))
    return out


def _read_poll(store: ObjectStore, feed_id: str) -> Mapping[str, object] | None:
    """Ingest's latest poll of a source, parsed, its fields not checked (they are passed on as is)."""
    try:
        data = store.get(layout.pending_source_key(feed_id, "poll.json")).data
    except ObjectNotFoundError:
        return None
    except Exception as e:  # the store failed: the source shows as pending
        logger.warning("pending_poll_unreadable feed_id=%s error=%s", feed_id, e)
        return None
    try:
        poll = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return poll if isinstance(poll, dict) else None


def unsubscribe(profiles: ProfileStore, reader_hash: str, feed_id: str) -> None:
    profiles.remove_subscription(reader_hash, feed_id)
