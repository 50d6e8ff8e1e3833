"""Reader profiles: follows, hides, the last stories read, and decayed topic/source/term weights.

``ProfileStore`` is the seam: the default is one SQLite file in WAL mode on the serving machine;
replicas on several machines share one PostgreSQL database instead (``PostgresProfileStore`` in
``serving/profiles_postgres.py``, chosen by ``NEWSROOM_SERVING_PROFILES_URL``; issue 19). Both hold
the same tables and pass one test module. Sessions are not stored: a session is a signed token
that any replica holding the same ``NEWSROOM_SERVING_HMAC_KEY`` verifies on its own.

Who writes what: serving writes follows, hides and reads (write-through, on the request); the
profiles flow writes ``weights`` and ``clicks_consumed`` in one transaction per fold, so each
click segment counts exactly once. Profiles are keyed by ``reader_hash`` (an HMAC pseudonym),
never by a reader's name.

Every write also moves the reader's version (``profile_versions``) in its transaction, and a load
reads the version with the rows; ``changed_since`` lists the readers whose version moved since a
mark. That is what lets each replica keep recently used profiles in memory
(``serving/profile_cache.py``, issue 29).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal, Protocol

from serving.errors import ProfileStoreError
from warehouse.profiles import PROFILE_TABLES_SQL, TOUCH_PROFILE_SQLITE

FollowKind = Literal["topic", "source", "keyword", "alert"]
"""``keyword``: a query (its one spelling, ``SearchQuery.text``) that For you boosts and the live
stream alerts on; ``alert``: an alert the reader opted in to (``breaking``). Issue 30."""
HideKind = Literal["source", "story"]
WeightKind = Literal["topic", "source", "term"]
MAX_READS = 200
MAX_TERMS = 64
"""Only a reader's strongest terms enter the re-rank; the rest barely move it and cost time."""
BREAKING_ALERT = "breaking"

SCHEMA_SQL = PROFILE_TABLES_SQL
"""The profile database's tables, defined once in warehouse/profiles.py for serving and the profiles flow."""

_EMPTY: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Profile:
    """One reader's profile as of a load. Weights are relative: only their ratios matter.

    ``version`` is the reader's ``profile_versions`` row as read with the rest (0 when the reader
    never wrote anything): a cache holds the profile until the store names another version.
    """

    reader_hash: str
    followed_topics: frozenset[str] = frozenset()
    followed_sources: frozenset[str] = frozenset()
    hidden_sources: frozenset[str] = frozenset()
    hidden_stories: frozenset[str] = frozenset()
    reads: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    topic_weights: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    source_weights: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    term_weights: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    version: int = 0
    followed_keywords: frozenset[str] = frozenset()
    """Queries the reader follows, each in its one spelling (issue 30)."""
    breaking_alerts: bool = False
    """Whether the reader opted in to Breaking alerts on the live stream."""

    @property
    def is_empty(self) -> bool:
        return not (
            self.followed_topics
            or self.followed_sources
            or self.followed_keywords
            or self.hidden_sources
            or self.hidden_stories
            or self.reads
            or self.topic_weights
            or self.source_weights
            or self.term_weights
        )


Row = tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Subscription:
    """A source a reader asked for (``POST /v1/subscriptions``): its feed and the site it was found on."""

    feed_id: str
    feed_url: str
    site_url: str
    title: str
    created_at: float


SubscriptionOutcome = Literal["added", "exists", "over_daily_limit", "over_total_limit"]
SUBSCRIPTION_DAY_SECONDS = 86400


@dataclass(frozen=True, slots=True)
class ProfileChanges:
    """Readers whose profile changed since a mark, and the mark to ask from next time.

    ``changed`` holds ``(reader_hash, version)``; it may repeat a change an earlier call returned
    (asking again is harmless: a cache compares versions). Marks are the store's own numbers.
    """

    mark: int
    changed: tuple[tuple[str, int], ...] = ()


def profile_from_rows(reader_hash: str, follows: Iterable[Row], hides: Iterable[Row], reads: Iterable[Row],
                      weights: Iterable[Row], version: int = 0) -> Profile:
    """A Profile from its stored rows, the same for every backend.

    Args:
        reader_hash: Whose rows.
        follows: ``(kind, target_id)`` rows.
        hides: ``(kind, target_id)`` rows.
        reads: ``(story_id, read_at)`` rows.
        weights: ``(kind, key, weight)`` rows in any order; only the MAX_TERMS strongest terms are kept
            (ties by key, so every backend keeps the same ones).
        version: The reader's version, read in the same transaction (0: none stored).
    """
    by_kind: dict[str, dict[str, float]] = {"topic": {}, "source": {}, "term": {}}
    for kind, key, weight in sorted(weights, key=lambda r: (-float(r[2]), str(r[1]))):  # type: ignore[arg-type]
        bucket = by_kind.get(str(kind))
        if bucket is not None and (kind != "term" or len(bucket) < MAX_TERMS):
            bucket[str(key)] = float(weight)  # type: ignore[arg-type]
    follows, hides = list(follows), list(hides)
    return Profile(
        reader_hash=reader_hash,
        followed_topics=frozenset(str(t) for k, t in follows if k == "topic"),
        followed_sources=frozenset(str(t) for k, t in follows if k == "source"),
        followed_keywords=frozenset(str(t) for k, t in follows if k == "keyword"),
        breaking_alerts=any(k == "alert" and t == BREAKING_ALERT for k, t in follows),
        hidden_sources=frozenset(str(t) for k, t in hides if k == "source"),
        hidden_stories=frozenset(str(t) for k, t in hides if k == "story"),
        reads=MappingProxyType({str(s): float(at) for s, at in reads}),  # type: ignore[arg-type]
        topic_weights=MappingProxyType(by_kind["topic"]),
        source_weights=MappingProxyType(by_kind["source"]),
        term_weights=MappingProxyType(by_kind["term"]),
        version=version,
    )


class ProfileStore(Protocol):
    """Where reader profiles live. Every method raises ProfileStoreError when the store fails."""

    def load(self, reader_hash: str) -> Profile: ...

    def changed_since(self, mark: int | None) -> ProfileChanges:
        """Readers whose version moved since ``mark`` (a ``ProfileChanges.mark`` from an earlier call).

        With ``mark`` None, only a mark to start from: nothing that committed before it is listed later.
        """
        ...

    def follow(self, reader_hash: str, kind: FollowKind, target_id: str) -> None: ...

    def unfollow(self, reader_hash: str, kind: FollowKind, target_id: str) -> None: ...

    def hide(self, reader_hash: str, kind: HideKind, target_id: str) -> None: ...

    def record_read(self, reader_hash: str, story_id: str, read_at: float) -> None: ...

    def subscription_counts(self, reader_hash: str, now: float) -> tuple[int, int]:
        """The reader's subscriptions made in the last day before ``now``, and in all."""
        ...

    def add_subscription(self, reader_hash: str, subscription: Subscription, *, per_day: int,
                         in_all: int) -> SubscriptionOutcome:
        """Add it unless the reader has it (``exists``) or is at a limit (nothing written), in one transaction."""
        ...

    def subscriptions(self, reader_hash: str) -> list[Subscription]:
        """The reader's subscriptions, newest first."""
        ...

    def remove_subscription(self, reader_hash: str, feed_id: str) -> None: ...

    def close(self) -> None: ...


class SqliteProfileStore:
    """Profiles in one SQLite file (WAL: readers never wait for the flow's writes)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=5, isolation_level=None)
            self._db.execute("pragma journal_mode=wal")
            self._db.execute("pragma synchronous=normal")
            self._db.executescript(SCHEMA_SQL)
        except sqlite3.Error as e:
            raise ProfileStoreError(f"cannot open profiles at {self.path}: {e}") from e

    def _write(self, reader_hash: str, sql: str, params: tuple[object, ...]) -> None:
        """One write and the reader's version, in one transaction."""
        try:
            with self._lock:
                db = self._db
                db.execute("begin immediate")
                try:
                    db.execute(sql, params)
                    db.execute(TOUCH_PROFILE_SQLITE, (reader_hash,))
                except BaseException:
                    db.execute("rollback")
                    raise
                db.execute("commit")
        except sqlite3.Error as e:
            raise ProfileStoreError(f"profile store failed: {e}") from e

    def load(self, reader_hash: str) -> Profile:
        try:
            with self._lock:
                db = self._db
                db.execute("begin")
                try:
                    follows = db.execute(
                        "select kind, target_id from follows where reader_hash = ?", (reader_hash,)
                    ).fetchall()
                    hides = db.execute(
                        "select kind, target_id from hides where reader_hash = ?", (reader_hash,)
                    ).fetchall()
                    reads = db.execute(
                        "select story_id, read_at from reads where reader_hash = ?", (reader_hash,)
                    ).fetchall()
                    weights = db.execute(
                        "select kind, key, weight from weights where reader_hash = ?", (reader_hash,)
                    ).fetchall()
                    version = db.execute(
                        "select version from profile_versions where reader_hash = ?", (reader_hash,)
                    ).fetchone()
                finally:
                    db.execute("commit")
        except sqlite3.Error as e:
            raise ProfileStoreError(f"profile store failed: {e}") from e
        return profile_from_rows(reader_hash, follows, hides, reads, weights, int(version[0]) if version else 0)

    def changed_since(self, mark: int | None) -> ProfileChanges:
        # One writer at a time hands versions out in commit order, so the mark is the highest seen.
        try:
            with self._lock:
                if mark is None:
                    (top,) = self._db.execute("select coalesce(max(version), 0) from profile_versions").fetchone()
                    return ProfileChanges(int(top))
                rows = self._db.execute(
                    "select reader_hash, version from profile_versions where version > ? order by version", (mark,)
                ).fetchall()
        except sqlite3.Error as e:
            raise ProfileStoreError(f"profile store failed: {e}") from e
        changed = tuple((str(r), int(v)) for r, v in rows)
        return ProfileChanges(changed[-1][1] if changed else mark, changed)

    def follow(self, reader_hash: str, kind: FollowKind, target_id: str) -> None:
        self._write(
            reader_hash,
            "insert into follows values (?, ?, ?, ?) on conflict do nothing",
            (reader_hash, kind, target_id, time.time()),
        )

    def unfollow(self, reader_hash: str, kind: FollowKind, target_id: str) -> None:
        self._write(
            reader_hash,
            "delete from follows where reader_hash = ? and kind = ? and target_id = ?",
            (reader_hash, kind, target_id),
        )

    def hide(self, reader_hash: str, kind: HideKind, target_id: str) -> None:
        self._write(
            reader_hash,
            "insert into hides values (?, ?, ?, ?) on conflict do nothing",
            (reader_hash, kind, target_id, time.time()),
        )

    def record_read(self, reader_hash: str, story_id: str, read_at: float) -> None:
        try:
            with self._lock:
                db = self._db
                db.execute("begin immediate")
                try:
                    db.execute(
                        "insert into reads values (?, ?, ?) "
                        "on conflict do update set read_at = max(read_at, excluded.read_at)",
                        (reader_hash, story_id, read_at),
                    )
                    db.execute(
                        "delete from reads where reader_hash = ? and story_id not in ("
                        " select story_id from reads where reader_hash = ?"
                        " order by read_at desc, story_id limit ?)",
                        (reader_hash, reader_hash, MAX_READS),
                    )
                    db.execute(TOUCH_PROFILE_SQLITE, (reader_hash,))
                except BaseException:
                    db.execute("rollback")
                    raise
                db.execute("commit")
        except sqlite3.Error as e:
            raise ProfileStoreError(f"profile store failed: {e}") from e

    def subscription_counts(self, reader_hash: str, now: float) -> tuple[int, int]:
        try:
            with self._lock:
                day, total = self._db.execute(
                    "select coalesce(sum(created_at > ?), 0), count(*) from subscriptions where reader_hash = ?",
                    (now - SUBSCRIPTION_DAY_SECONDS, reader_hash)).fetchone()
        except sqlite3.Error as e:
            raise ProfileStoreError(f"profile store failed: {e}") from e
        return int(day), int(total)

    def add_subscription(self, reader_hash: str, subscription: Subscription, *, per_day: int,
                         in_all: int) -> SubscriptionOutcome:
        outcome: SubscriptionOutcome
        try:
            with self._lock:
                db = self._db
                db.execute("begin immediate")  # the counts and the insert see no other writer between them
                try:
                    exists = db.execute("select 1 from subscriptions where reader_hash = ? and feed_id = ?",
                                        (reader_hash, subscription.feed_id)).fetchone()
                    day, total = db.execute(
                        "select coalesce(sum(created_at > ?), 0), count(*) from subscriptions where reader_hash = ?",
                        (subscription.created_at - SUBSCRIPTION_DAY_SECONDS, reader_hash)).fetchone()
                    if exists:
                        outcome = "exists"
                    elif total >= in_all:
                        outcome = "over_total_limit"
                    elif day >= per_day:
                        outcome = "over_daily_limit"
                    else:
                        db.execute("insert into subscriptions values (?, ?, ?, ?, ?, ?)",
                                   (reader_hash, subscription.feed_id, subscription.feed_url, subscription.site_url,
                                    subscription.title, subscription.created_at))
                        db.execute(TOUCH_PROFILE_SQLITE, (reader_hash,))
                        outcome = "added"
                except BaseException:
                    db.execute("rollback")
                    raise
                db.execute("commit")
        except sqlite3.Error as e:
            raise ProfileStoreError(f"profile store failed: {e}") from e
        return outcome

    def subscriptions(self, reader_hash: str) -> list[Subscription]:
        try:
            with self._lock:
                rows = self._db.execute(
                    "select feed_id, feed_url, site_url, title, created_at from subscriptions where reader_hash = ? "
                    "order by created_at desc, feed_id", (reader_hash,)).fetchall()
        except sqlite3.Error as e:
            raise ProfileStoreError(f"profile store failed: {e}") from e
        return [Subscription(str(f), str(u), str(site), str(t), float(at)) for f, u, site, t, at in rows]

    def remove_subscription(self, reader_hash: str, feed_id: str) -> None:
        self._write(reader_hash, "delete from subscriptions where reader_hash = ? and feed_id = ?",
                    (reader_hash, feed_id))

    def close(self) -> None:
        with self._lock:
            self._db.close()
