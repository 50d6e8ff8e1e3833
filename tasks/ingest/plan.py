"""Ingest, step 1: which feeds are due, sharded by host so each host's politeness lives in one shard."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import replace
from datetime import datetime, timedelta

from prefect import task
from prefect.cache_policies import NO_CACHE

from newsroom.times import parse_iso_datetime
from tasks.ingest.feed_job import FeedJob, source_kind_of
from tasks.politeness import host_of_url
from tasks.registry import load_registry
from tasks.websub import lease_of, list_push_markers, subscribed_feed_ids
from transforms.records import FeedState
from transforms.websub import PUSH_MIN_INTERVAL_SECONDS, is_push_due
from warehouse import layout
from warehouse.damage import describe_error, record_damage
from warehouse.errors import ObjectNotFoundError
from warehouse.schemas import FEED_STATE_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import read_table

# A Breaking boost polls a publisher's feeds faster, but never sooner than the publisher asked
# (Retry-After) or than a failing or parked feed is due.
BOOST_NEVER_OVERRIDES = frozenset({"retry_after", "backoff", "parked", "gone"})


def load_feed_states(store: ObjectStore) -> tuple[dict[str, FeedState], str | None]:
    """Feed states by id and the object's ETag (for the conditional put).

    A state file written before a column existed is read with that column null (``read_table``
    evolves it), and a null takes the neutral value (``FeedState.from_row``), so adding state
    columns never strands a store.
    """
    table, etag = read_table(store, layout.FEED_STATE_KEY, FEED_STATE_SCHEMA)
    states = {row["feed_id"]: FeedState.from_row(row) for row in table.to_pylist()}
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
        at = parse_iso_datetime(until, naive="utc")
        if at is not None:
            boosts[str(publisher_id)] = at
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
        state = states.get(feed["feed_id"]) or FeedState(feed["feed_id"])
        if feed["feed_id"] in subscribed:
            # The receiver keeps the lease on the subscription record; the state takes a copy.
            state = replace(state, lease_expires_at=lease_of(store, feed["feed_id"], state.hub_url))
        push_keys = tuple(pushed.get(feed["feed_id"], ()))
        if push_keys and not is_push_due(state.last_polled_at, now, push_min_interval_seconds):
            push_keys = ()
        due_at = _due_at(state, boosted.get(feed["publisher_id"]), now, boost_interval_seconds)
        if not push_keys and due_at is not None and due_at > now:
            continue
        job = FeedJob(feed["feed_id"], feed["url"], feed["publisher_id"], publisher["language"],
                      publisher["region"], feed["section_hint"] or "", state, int(publisher["tier"] or 2),
                      push_keys, site_languages, source_kind_of(feed))
        host = host_of_url(feed["url"])
        buckets[int(hashlib.blake2b(host.encode(), digest_size=4).hexdigest(), 16) % max(1, shards)].append(job)
    return [sorted(jobs, key=lambda j: (not j.push_keys, j.feed_id)) for _, jobs in sorted(buckets.items())]


def _due_at(state: FeedState, boosted_until: datetime | None, now: datetime, boost_interval_seconds: int
            ) -> datetime | None:
    """When a feed falls due as of ``now`` (None: now), its pushes aside."""
    if boosted_until is not None and boosted_until > now and not state.is_parked \
            and state.poll_reason not in BOOST_NEVER_OVERRIDES:
        # A Breaking story's publishers are polled faster for an hour (issue 5).
        if is_push_due(state.last_polled_at, now, boost_interval_seconds):
            return None
        assert state.last_polled_at is not None  # is_push_due is true for a feed never polled
        return min(state.next_poll_at or now, state.last_polled_at + timedelta(seconds=boost_interval_seconds))
    return state.next_poll_at


def next_due_at(store: ObjectStore, now: datetime, *, push_min_interval_seconds: int = PUSH_MIN_INTERVAL_SECONDS,
                boost_interval_seconds: int = 60) -> datetime | None:
    """The earliest instant a feed of :func:`plan_due_feeds` falls due, pushed feeds included (a push
    waiting out ``push_min_interval_seconds`` falls due when that runs out); None with no feed.

    The long-running ingest sleeps until then (issue 31), so a feed is polled when it falls due
    rather than at the next minute.
    """
    registry = load_registry(store)
    states, _ = load_feed_states(store)
    pushed = list_push_markers(store)
    boosted = load_feed_boosts(store)
    earliest: datetime | None = None
    for feed in registry.read_feeds():
        state = states.get(feed["feed_id"]) or FeedState(feed["feed_id"])
        due = _due_at(state, boosted.get(feed["publisher_id"]), now, boost_interval_seconds) or now
        if pushed.get(feed["feed_id"]):
            last = state.last_polled_at
            due = min(due, now if last is None else max(now, last + timedelta(seconds=push_min_interval_seconds)))
        earliest = due if earliest is None else min(earliest, due)
    return earliest


@task(name="plan_due_feeds", retries=2, retry_delay_seconds=2, timeout_seconds=120, cache_policy=NO_CACHE)
def plan_due_feeds_task(store: ObjectStore, now: datetime, shards: int, push_min_interval_seconds: float
                        ) -> list[list[FeedJob]]:
    return plan_due_feeds(store, now, shards, push_min_interval_seconds=push_min_interval_seconds)
