"""WebSub subscriptions (issue 3): the records, subscribe/renew/unsubscribe, and push markers.

The ingest side of WebSub, a job the ingest runs after its polls (``maintain_subscriptions`` and
``retire_subscriptions``, called from ``commit_ingest``): it writes a pending record at
``state/websub/{feed_id}.json`` and then asks the hub, with a per-feed secret
``HMAC(master, feed_id)``. The records and the push markers under ``state/push/`` are kept here
too, because both sides use them: the ingest reads and deletes markers, and the receiver (the
web-facing half, :mod:`websub.receiver`, run by ``newsroom websub``) confirms the records and
writes the markers. The receiver lives above tasks, beside serving; this module never imports it.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

import httpx

from tasks import events
from tasks.errors import FetchError
from tasks.http import FetchResult, make_client, post_form
from tasks.settings import IngestSettings, WebSubSettings
from transforms.websub import (
    Subscription,
    SubscriptionMode,
    decide_subscription,
    derive_secret,
    should_unsubscribe,
    subscription_from_dict,
    subscription_to_dict,
)
from warehouse import layout
from warehouse.errors import ObjectNotFoundError, PreconditionFailedError
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)

_CAS_ATTEMPTS = 5
HUB_ANSWER_MAX_BYTES = 1024
"""Raw bytes read of a hub's answer: it only goes into an error message."""


# --- records ---------------------------------------------------------------------------------


def load_subscription(store: ObjectStore, feed_id: str) -> tuple[Subscription | None, str | None]:
    """A feed's subscription record and its ETag; (None, None) when there is none or it is unreadable."""
    try:
        obj = store.get(layout.subscription_key(feed_id))
    except ObjectNotFoundError:
        return None, None
    try:
        return subscription_from_dict(json.loads(obj.data)), obj.etag
    except (ValueError, TypeError) as e:
        log.warning("websub_record_unreadable feed_id=%s error=%s", feed_id, e)
        return None, obj.etag


def save_subscription(store: ObjectStore, subscription: Subscription, etag: str | None) -> str:
    """Replace the record only if it is still the one read (If-Match), or create it (If-None-Match).

    Raises:
        PreconditionFailedError: someone else wrote it since.
    """
    data = json.dumps(subscription_to_dict(subscription), sort_keys=True).encode("utf-8")
    return store.put(layout.subscription_key(subscription.feed_id), data, if_match=etag,
                     if_none_match=etag is None, content_type="application/json")


def update_subscription(store: ObjectStore, feed_id: str,
                        change: Callable[[Subscription | None], Subscription | None]) -> Subscription | None:
    """Read-modify-write a record with a conditional put, retrying a lost race a few times.

    ``change`` returns the new record, or None to leave it as it is.

    Raises:
        PreconditionFailedError: the race was lost every time.
    """
    for attempt in range(_CAS_ATTEMPTS):
        current, etag = load_subscription(store, feed_id)
        updated = change(current)
        if updated is None:
            return current
        try:
            save_subscription(store, updated, etag)
            return updated
        except PreconditionFailedError:
            if attempt == _CAS_ATTEMPTS - 1:
                raise
            time.sleep(0.01 * (attempt + 1))
    return None  # pragma: no cover - the loop returns or raises


def write_push_marker(store: ObjectStore, feed_id: str, source: str, received_at: datetime,
                      detail: Mapping[str, object] | None = None) -> str:
    """Ask the ingest to poll ``feed_id`` now; returns the marker's key. Never holds pushed content."""
    marker_id = f"{received_at:%Y%m%dT%H%M%S%f}-{secrets.token_hex(4)}"
    key = layout.push_marker_key(feed_id, marker_id)
    payload = {"feed_id": feed_id, "source": source, "received_at": received_at.isoformat(), **(detail or {})}
    store.put(key, json.dumps(payload, sort_keys=True).encode("utf-8"), if_none_match=True,
              content_type="application/json")
    return key


def announce_push(feed_id: str, source: str, marker: str) -> None:
    """Tell Prefect a push was recorded, so the long-running ingest polls the feed now (issue 31);
    without the event the marker still puts the feed first in the next ingest pass."""
    events.emit(events.FEED_PUSHED, events.resource_id("feed", feed_id),
                {"feed_id": feed_id, "source": source, "marker": marker})


def list_push_markers(store: ObjectStore) -> dict[str, list[str]]:
    """Push marker keys by feed id (one LIST over ``state/push/``)."""
    markers: dict[str, list[str]] = {}
    for key in store.list(layout.PUSH_PREFIX):
        try:
            markers.setdefault(layout.feed_id_of_push_marker(key), []).append(key)
        except ValueError:
            continue
    return markers


def delete_push_markers(store: ObjectStore, keys: Iterable[str]) -> int:
    """Delete exactly the markers a run acted on; pushes that landed since stay for the next run."""
    count = 0
    for key in keys:
        store.delete(key)
        count += 1
    return count


# --- the subscriber's requests ---------------------------------------------------------------


def _answer_text(answer: FetchResult) -> str:
    """The start of a hub's answer for the record; an encoded body is not decoded."""
    encoding = answer.headers.get("content-encoding", "identity").strip().lower()
    if encoding != "identity":
        return f"({encoding}-encoded answer not read)"
    return answer.body.decode("utf-8", "replace")[:200]


def callback_url(websub: WebSubSettings, feed_id: str) -> str:
    """Where the hub calls us back for one feed."""
    layout.subscription_key(feed_id)  # checks the id is safe in a path
    return f"{(websub.callback_base_url or '').rstrip('/')}/websub/{feed_id}"


def request_subscription(
    store: ObjectStore,
    client: httpx.Client,
    websub: WebSubSettings,
    *,
    feed_id: str,
    topic_url: str,
    hub_url: str,
    mode: SubscriptionMode,
    now: datetime,
) -> Subscription:
    """Record a pending request, then send it to the hub (WebSub §5.1); returns the record as left.

    The record is written first: the hub may verify before it even answers, and the receiver
    echoes a challenge only for a request it finds. A live lease is kept while a renewal is
    pending. The hub URL came from a feed, so it goes through the same address-checked client as
    any fetch, under ``hub_timeout_seconds`` as a wall-clock cap, and at most
    ``HUB_ANSWER_MAX_BYTES`` of its answer are read (never decompressed).

    Raises:
        TypeError: ``client`` is not from ``tasks.http.make_client``.
    """
    previous, etag = load_subscription(store, feed_id)
    keep_lease = previous is not None and previous.hub_url == hub_url and previous.topic_url == topic_url
    pending = Subscription(
        feed_id=feed_id, topic_url=topic_url, hub_url=hub_url, mode=mode, status="pending", requested_at=now,
        lease_seconds=previous.lease_seconds if keep_lease and previous else None,
        lease_expires_at=previous.lease_expires_at if keep_lease and previous and mode == "subscribe" else None,
        verified_at=previous.verified_at if keep_lease and previous else None,
        rejected_count=previous.rejected_count if previous else 0,
        last_rejected_reason=previous.last_rejected_reason if previous else None,
        last_rejected_at=previous.last_rejected_at if previous else None,
    )
    written = save_subscription(store, pending, etag)
    form = {"hub.mode": mode, "hub.topic": topic_url, "hub.callback": callback_url(websub, feed_id)}
    if mode == "subscribe":
        form["hub.secret"] = derive_secret(websub.master_key(), feed_id)
        form["hub.lease_seconds"] = str(websub.lease_seconds)
    error: str | None = None
    try:
        answer = post_form(client, hub_url, form, timeout_seconds=websub.hub_timeout_seconds,
                           max_bytes=HUB_ANSWER_MAX_BYTES)
        if not 200 <= answer.status < 300:
            error = f"hub answered HTTP {answer.status}: {_answer_text(answer)}"
    except FetchError as e:
        error = f"{e.kind}: {e}"
    log.info("websub_request feed_id=%s mode=%s hub=%s ok=%s", feed_id, mode, hub_url, error is None)
    if error is None:
        return pending
    failed = replace(pending, status="failed", last_error=error[:500])
    try:
        save_subscription(store, failed, written)
    except PreconditionFailedError:
        return load_subscription(store, feed_id)[0] or pending  # the receiver moved it on meanwhile
    return failed


@dataclass(frozen=True, slots=True)
class SubscriptionTarget:
    """One polled feed that advertises a hub."""

    feed_id: str
    topic_url: str
    hub_url: str | None


def maintain_subscriptions(
    store: ObjectStore,
    targets: Iterable[SubscriptionTarget],
    ingest: IngestSettings,
    websub: WebSubSettings,
    now: datetime,
) -> dict[str, int]:
    """Subscribe or renew where ``decide_subscription`` says so; returns counts by action and errors."""
    counts: Counter[str] = Counter()
    work: list[tuple[SubscriptionTarget, str]] = []
    for target in targets:
        current, _ = load_subscription(store, target.feed_id)
        decision = decide_subscription(
            current, hub_url=target.hub_url, topic_url=target.topic_url, now=now,
            renew_fraction=websub.renew_fraction, renew_min_seconds=websub.renew_min_seconds,
            pending_timeout_seconds=websub.pending_timeout_seconds, retry_seconds=websub.retry_seconds)
        if decision.action in ("subscribe", "renew") and target.hub_url:
            work.append((target, decision.action))
    if not work:
        return {}
    with make_client(ingest) as client:
        for target, action in work:
            assert target.hub_url is not None
            try:
                record = request_subscription(store, client, websub, feed_id=target.feed_id,
                                              topic_url=target.topic_url, hub_url=target.hub_url,
                                              mode="subscribe", now=now)
            except PreconditionFailedError:
                counts["conflict"] += 1  # the receiver wrote the record meanwhile: next poll decides again
                continue
            counts[action] += 1
            if record.status == "failed":
                counts["failed"] += 1
    return dict(sorted(counts.items()))


def retire_subscriptions(
    store: ObjectStore,
    read_feed_ids: set[str],
    ingest: IngestSettings,
    websub: WebSubSettings,
    now: datetime,
) -> dict[str, int]:
    """Unsubscribe the feeds we no longer read: their publisher opted out or they left the registry.

    Each subscription record not in ``read_feed_ids`` that ``should_unsubscribe`` names gets an
    unsubscribe request (the hub verifies it with us like a subscribe, WebSub §5.3), and push
    markers left for those feeds are deleted, since no poll will ever consume them.

    Returns:
        Counts: ``unsubscribe`` requests sent, ``failed`` ones, ``conflict`` (the receiver wrote
        the record meanwhile; the next run decides again), ``markers_dropped``.
    """
    counts: Counter[str] = Counter()
    unwanted = sorted(subscribed_feed_ids(store) - read_feed_ids)
    work: list[Subscription] = []
    for feed_id in unwanted:
        record, _ = load_subscription(store, feed_id)
        if record is not None and should_unsubscribe(record, now=now,
                                                     pending_timeout_seconds=websub.pending_timeout_seconds):
            work.append(record)
    if work:
        with make_client(ingest) as client:
            for record in work:
                try:
                    sent = request_subscription(store, client, websub, feed_id=record.feed_id,
                                                topic_url=record.topic_url, hub_url=record.hub_url,
                                                mode="unsubscribe", now=now)
                except PreconditionFailedError:
                    counts["conflict"] += 1
                    continue
                counts["unsubscribe"] += 1
                if sent.status == "failed":
                    counts["failed"] += 1
    if unwanted:
        markers = list_push_markers(store)
        stale = [key for feed_id in unwanted for key in markers.get(feed_id, ())]
        if stale:
            counts["markers_dropped"] += delete_push_markers(store, stale)
    return dict(sorted(counts.items()))


def subscribed_feed_ids(store: ObjectStore) -> set[str]:
    """Feeds that have a subscription record (one LIST over ``state/websub/``)."""
    return {key[len(layout.WEBSUB_PREFIX):].removesuffix(".json") for key in store.list(layout.WEBSUB_PREFIX)
            if key.endswith(".json")}


def lease_of(store: ObjectStore, feed_id: str, hub_url: str | None) -> datetime | None:
    """The lease expiry recorded for a feed's subscription to ``hub_url`` (None without one)."""
    record, _ = load_subscription(store, feed_id)
    if record is None or record.mode != "subscribe" or record.hub_url != hub_url:
        return None
    return record.lease_expires_at
