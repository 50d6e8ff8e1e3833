"""Each replica's recently used reader profiles, in memory, in front of its ProfileStore (issue 29).

A For-you request used to read the whole profile from the store (four queries on SQLite, one
round trip to PostgreSQL). Readers page and come back within minutes, so a replica keeps the
profiles it read last (least recently used out past ``size``) and answers most requests without
the store. What keeps them right:

* **This replica's writes.** A follow, unfollow, hide or read made through the cache drops the
  reader's profile before the call returns: the reader's next request on this replica reads it
  again. A load that was already under way when the write finished is not kept.
* **Other writers** (other replicas, the profiles fold). Every write moves the reader's version in
  ``profile_versions`` in its own transaction; a background thread asks the store every
  ``poll_seconds`` which versions moved since it last asked (``ProfileStore.changed_since``) and
  drops each profile held at another version. A load that overlapped a poll is kept only if no
  poll named its reader at another version. So a change made anywhere shapes this replica's
  answers within about one poll interval.
* **When polls fail** (the store is down or slow), nothing is answered from memory once the last
  good poll is ``3 * poll_seconds`` old: every request reads through (and falls back as before
  when the store is down), so staleness stays bounded.

``size`` 0 turns the cache off: every call goes to the store, and nothing polls.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from serving.errors import ProfileStoreError
from serving.profiles import (
    FollowKind,
    HideKind,
    Profile,
    ProfileChanges,
    ProfileStore,
    Subscription,
    SubscriptionOutcome,
)

logger = logging.getLogger(__name__)

KEEP_POLLS = 8
"""Polls remembered for loads in flight: a load that spans more polls than this is not kept."""
STALE_POLLS = 3
"""Nothing is answered from memory once the last good poll is this many intervals old."""


class ProfileCache:
    """A ProfileStore that answers recently used profiles from memory (see the module docstring)."""

    def __init__(self, store: ProfileStore, *, size: int, poll_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.size = size
        self.poll_seconds = poll_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, Profile] = OrderedDict()
        self._mark: int | None = None
        self._polled_at: float | None = None
        # Per poll generation: versions the poll named, and local writes (by tick), for loads in flight.
        self._generation = 0
        self._polled: dict[int, dict[str, int]] = {0: {}}
        self._written: dict[int, dict[str, int]] = {0: {}}
        self._tick = 0
        self._poll_failing = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.hits = 0
        self.misses = 0

    # -- reads ------------------------------------------------------------------------------------

    def cached(self, reader_hash: str) -> Profile | None:
        """The reader's profile from memory, or None (not held, or the cache cannot vouch for it)."""
        with self._lock:
            if not self._is_fresh():
                return None
            found = self._entries.get(reader_hash)
            if found is not None:
                self._entries.move_to_end(reader_hash)
                self.hits += 1
            return found

    def load(self, reader_hash: str) -> Profile:
        """From memory when held, else from the store (and kept). Raises ProfileStoreError."""
        found = self.cached(reader_hash)
        if found is not None:
            return found
        with self._lock:
            self.misses += 1
            generation, tick = self._generation, self._tick
        profile = self.store.load(reader_hash)
        self._keep(profile, generation, tick)
        return profile

    def changed_since(self, mark: int | None) -> ProfileChanges:
        return self.store.changed_since(mark)

    def _is_fresh(self) -> bool:
        return (self.size > 0 and self._polled_at is not None
                and self._clock() - self._polled_at <= STALE_POLLS * self.poll_seconds)

    def _keep(self, profile: Profile, generation: int, tick: int) -> None:
        """Hold a profile loaded from the store, unless a write or a poll since the load began says it is old."""
        if self.size <= 0:
            return
        reader = profile.reader_hash
        with self._lock:
            # Before the first poll there is no mark that later polls would cover this load from.
            if generation == 0 or self._generation - generation >= KEEP_POLLS:
                return
            for g in range(generation, self._generation + 1):
                written = self._written[g].get(reader)
                if written is not None and written > tick:
                    return  # this replica wrote the reader after the load began
                polled = self._polled[g].get(reader)
                if polled is not None and polled != profile.version:
                    return
            self._entries[reader] = profile
            self._entries.move_to_end(reader)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    # -- writes: through to the store, then forget the reader -----------------------------------

    def _forget(self, reader_hash: str) -> None:
        with self._lock:
            self._tick += 1
            self._written[self._generation][reader_hash] = self._tick
            self._entries.pop(reader_hash, None)

    def follow(self, reader_hash: str, kind: FollowKind, target_id: str) -> None:
        try:
            self.store.follow(reader_hash, kind, target_id)
        finally:  # a write that failed may still have committed
            self._forget(reader_hash)

    def unfollow(self, reader_hash: str, kind: FollowKind, target_id: str) -> None:
        try:
            self.store.unfollow(reader_hash, kind, target_id)
        finally:
            self._forget(reader_hash)

    def hide(self, reader_hash: str, kind: HideKind, target_id: str) -> None:
        try:
            self.store.hide(reader_hash, kind, target_id)
        finally:
            self._forget(reader_hash)

    def record_read(self, reader_hash: str, story_id: str, read_at: float) -> None:
        try:
            self.store.record_read(reader_hash, story_id, read_at)
        finally:
            self._forget(reader_hash)

    def subscription_counts(self, reader_hash: str, now: float) -> tuple[int, int]:
        return self.store.subscription_counts(reader_hash, now)

    def add_subscription(self, reader_hash: str, subscription: Subscription, *, per_day: int,
                         in_all: int) -> SubscriptionOutcome:
        try:
            return self.store.add_subscription(reader_hash, subscription, per_day=per_day, in_all=in_all)
        finally:
            self._forget(reader_hash)

    def subscriptions(self, reader_hash: str) -> list[Subscription]:
        return self.store.subscriptions(reader_hash)

    def remove_subscription(self, reader_hash: str, feed_id: str) -> None:
        try:
            self.store.remove_subscription(reader_hash, feed_id)
        finally:
            self._forget(reader_hash)

    # -- polling --------------------------------------------------------------------------------

    def poll(self) -> int:
        """Ask the store which readers changed since the last poll and drop their old profiles.

        Returns:
            How many changes the store listed.

        Raises:
            ProfileStoreError: The store failed (the cache stops answering once polls are stale).
        """
        started = self._clock()
        changes = self.store.changed_since(self._mark)
        with self._lock:
            polled = self._polled[self._generation]
            for reader, version in changes.changed:
                polled[reader] = version
                held = self._entries.get(reader)
                if held is not None and held.version != version:
                    del self._entries[reader]
            self._mark = changes.mark
            self._polled_at = started
            self._generation += 1
            self._polled[self._generation] = {}
            self._written[self._generation] = {}
            for old in [g for g in self._polled if g <= self._generation - KEEP_POLLS]:
                del self._polled[old], self._written[old]
        return len(changes.changed)

    def _poll_quietly(self) -> None:
        try:
            changed = self.poll()
        except ProfileStoreError as e:
            if not self._poll_failing:
                logger.warning("profile_cache_poll_failed error=%s effect=reads_go_to_the_store", e)
            self._poll_failing = True
            return
        if self._poll_failing:
            logger.info("profile_cache_poll_recovered changed=%d", changed)
        self._poll_failing = False

    def start(self) -> None:
        """Poll every ``poll_seconds`` on a daemon thread until ``stop()`` (nothing when size is 0)."""
        if self.size <= 0 or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="profile-cache-poll", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self._poll_quietly()
        while not self._stop.wait(self.poll_seconds):
            try:
                self._poll_quietly()
            except Exception:  # a bug, not a store failure: log it, keep polling
                logger.exception("profile_cache_poll_crashed")

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def close(self) -> None:
        """Stop polling and close the store."""
        self.stop()
        self.store.close()

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"held": len(self._entries), "hits": self.hits, "misses": self.misses}
