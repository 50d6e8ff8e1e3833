"""Reader profiles on PostgreSQL, shared by every serving replica (issue 19).

The same tables as the SQLite store (``warehouse/migrations/profiles/``), reached through a
psycopg 3 connection pool. Choices:

* **Open without the server.** The pool connects in the background; the schema is migrated on the
  first call that reaches the server (``warehouse.profile_db.migrate_profiles``, under an advisory
  lock, so replicas starting together migrate once). A replica whose database is down still
  starts and serves every shared page; personal calls fail with ProfileStoreError (For you falls
  back to top stories, profile writes answer 503) until it is back.
* **One round trip per profile read.** ``load`` reads follows, hides, reads, weights and the
  reader's version in one statement; psycopg prepares it after a few uses. Each write is one
  statement too: the change and the reader's version (``profile_versions``) in a data-modifying
  ``with``. Replicas cache profiles (``serving/profile_cache.py``) and ask ``changed_since`` about
  once a second which readers' versions moved (issue 29).
* **A server restart costs nobody a request.** Every call is idempotent (inserts that ignore a
  duplicate, deletes, a ``greatest`` upsert, reads), so a call that finds its connection dropped
  is run once more on a fresh one after the pool checks its idle connections.
* **Bounded waits.** A call waits at most ``timeout_seconds`` for a pooled connection and a
  statement runs at most ``STATEMENT_TIMEOUT_MS``: a slow database sheds personal requests
  instead of holding their threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from serving.errors import ProfileStoreError
from serving.profiles import (
    MAX_READS,
    SUBSCRIPTION_DAY_SECONDS,
    FollowKind,
    HideKind,
    Profile,
    ProfileChanges,
    Subscription,
    SubscriptionOutcome,
    profile_from_rows,
)
from warehouse.errors import ProfileDbError
from warehouse.profile_db import TOUCH_PROFILE_POSTGRES, migrate_profiles, redact_url

logger = logging.getLogger(__name__)

T = TypeVar("T")
Connection = psycopg.Connection[tuple[object, ...]]

STATEMENT_TIMEOUT_MS = 5000
CONNECT_TIMEOUT_SECONDS = 5

_LOAD = """
select 'follow', kind, target_id, 0::float8 from follows where reader_hash = %(r)s
union all select 'hide', kind, target_id, 0::float8 from hides where reader_hash = %(r)s
union all select 'read', '', story_id, read_at from reads where reader_hash = %(r)s
union all select 'weight', kind, key, weight from weights where reader_hash = %(r)s
union all select 'version', '', version::text, 0::float8 from profile_versions where reader_hash = %(r)s
"""
# Each write and the reader's version in one statement (a data-modifying "with" always runs).
_FOLLOW = ("with w as (insert into follows values (%(r)s, %(k)s, %(t)s, %(at)s) on conflict do nothing) "
           + TOUCH_PROFILE_POSTGRES)
_UNFOLLOW = ("with w as (delete from follows where reader_hash = %(r)s and kind = %(k)s and target_id = %(t)s) "
             + TOUCH_PROFILE_POSTGRES)
_HIDE = ("with w as (insert into hides values (%(r)s, %(k)s, %(t)s, %(at)s) on conflict do nothing) "
         + TOUCH_PROFILE_POSTGRES)
_READ = ("insert into reads values (%s, %s, %s) on conflict (reader_hash, story_id) "
         "do update set read_at = greatest(reads.read_at, excluded.read_at)")
_TRIM_READS = ("with w as (delete from reads where reader_hash = %(r)s and story_id not in ("
               "select story_id from reads where reader_hash = %(r)s order by read_at desc, story_id limit %(n)s)) "
               + TOUCH_PROFILE_POSTGRES)
# The oldest transaction still running, and every version at least the last such mark (migration
# 0002): a transaction that commits after this statement's snapshot has an id >= its xmin.
_CHANGES = """
with s as (select pg_snapshot_xmin(pg_current_snapshot())::text::bigint as mark)
select s.mark, v.reader_hash, v.version from s
left join profile_versions v on %(after)s::bigint is not null and v.version >= %(after)s::bigint
"""


_SUBSCRIPTION_COUNTS = ("select coalesce(sum((created_at > %(since)s)::int), 0), count(*) from subscriptions "
                        "where reader_hash = %(r)s")
_SUBSCRIBE = ("with w as (insert into subscriptions values (%(r)s, %(f)s, %(u)s, %(site)s, %(t)s, %(at)s)) "
              + TOUCH_PROFILE_POSTGRES)
_UNSUBSCRIBE = ("with w as (delete from subscriptions where reader_hash = %(r)s and feed_id = %(f)s) "
                + TOUCH_PROFILE_POSTGRES)
# A reader's subscriptions are counted and added under a lock on the reader alone (replicas may
# take two at once); the lock ends with the transaction.
_LOCK_READER = "select pg_advisory_xact_lock(hashtextextended(%(r)s, 30))"


def _configure(conn: Connection) -> None:
    conn.execute(f"set statement_timeout = {int(STATEMENT_TIMEOUT_MS)}")


class PostgresProfileStore:
    """Profiles in one PostgreSQL database, shared by every replica."""

    def __init__(self, url: str, *, pool_size: int = 8, timeout_seconds: float = 5.0) -> None:
        self._where = redact_url(url)
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_SECONDS},
            configure=_configure,
            timeout=timeout_seconds,
            name="profiles",
            open=False,
        )
        self._pool.open(wait=False)
        self._migrated = False
        self._migrate_lock = threading.Lock()

    def _error(self, e: Exception) -> ProfileStoreError:
        return ProfileStoreError(f"profile store {self._where} failed: {type(e).__name__}: {e}")

    def _ensure_schema(self) -> None:
        if self._migrated:
            return
        with self._migrate_lock:
            if self._migrated:
                return
            try:
                with self._pool.connection() as conn:
                    applied = migrate_profiles(conn)
            except (psycopg.Error, ProfileDbError) as e:
                raise self._error(e) from e
            if applied:
                logger.info("profile_migrations_applied versions=%s database=%s", applied, self._where)
            self._migrated = True

    def _run(self, work: Callable[[Connection], T]) -> T:
        self._ensure_schema()
        for attempt in (1, 2):
            try:
                with self._pool.connection() as conn:
                    try:
                        return work(conn)
                    except psycopg.OperationalError:
                        if attempt == 2 or not conn.broken:
                            raise
                # The server dropped this connection (a restart, a failover): the pool discards it;
                # check the idle ones too, then run the (idempotent) call again on a fresh one.
                logger.warning("profile_connection_lost database=%s retrying=1", self._where)
                self._pool.check()
            except PoolTimeout as e:
                raise self._error(e) from e
            except psycopg.Error as e:
                raise self._error(e) from e
        raise AssertionError("unreachable")  # pragma: no cover

    def load(self, reader_hash: str) -> Profile:
        rows = self._run(lambda conn: conn.execute(_LOAD, {"r": reader_hash}).fetchall())
        follows = [(kind, key) for what, kind, key, _ in rows if what == "follow"]
        hides = [(kind, key) for what, kind, key, _ in rows if what == "hide"]
        reads = [(key, value) for what, _, key, value in rows if what == "read"]
        weights = [(kind, key, value) for what, kind, key, value in rows if what == "weight"]
        version = next((int(str(key)) for what, _, key, _ in rows if what == "version"), 0)
        return profile_from_rows(reader_hash, follows, hides, reads, weights, version)

    def changed_since(self, mark: int | None) -> ProfileChanges:
        rows = self._run(lambda conn: conn.execute(_CHANGES, {"after": mark}).fetchall())
        changed = tuple((str(r), int(v)) for _, r, v in rows if r is not None)  # type: ignore[call-overload]
        return ProfileChanges(int(rows[0][0]), changed)  # type: ignore[call-overload]

    def follow(self, reader_hash: str, kind: FollowKind, target_id: str) -> None:
        params = {"r": reader_hash, "k": kind, "t": target_id, "at": time.time()}
        self._run(lambda conn: conn.execute(_FOLLOW, params))

    def unfollow(self, reader_hash: str, kind: FollowKind, target_id: str) -> None:
        self._run(lambda conn: conn.execute(_UNFOLLOW, {"r": reader_hash, "k": kind, "t": target_id}))

    def hide(self, reader_hash: str, kind: HideKind, target_id: str) -> None:
        params = {"r": reader_hash, "k": kind, "t": target_id, "at": time.time()}
        self._run(lambda conn: conn.execute(_HIDE, params))

    def record_read(self, reader_hash: str, story_id: str, read_at: float) -> None:
        def work(conn: Connection) -> None:
            with conn.transaction():
                conn.execute(_READ, (reader_hash, story_id, read_at))
                conn.execute(_TRIM_READS, {"r": reader_hash, "n": MAX_READS})

        self._run(work)

    def subscription_counts(self, reader_hash: str, now: float) -> tuple[int, int]:
        row = self._run(lambda conn: conn.execute(
            _SUBSCRIPTION_COUNTS, {"r": reader_hash, "since": now - SUBSCRIPTION_DAY_SECONDS}).fetchone())
        assert row is not None
        return int(row[0]), int(row[1])  # type: ignore[call-overload]

    def add_subscription(self, reader_hash: str, subscription: Subscription, *, per_day: int,
                         in_all: int) -> SubscriptionOutcome:
        def work(conn: Connection) -> SubscriptionOutcome:
            with conn.transaction():
                conn.execute(_LOCK_READER, {"r": reader_hash})
                if conn.execute("select 1 from subscriptions where reader_hash = %s and feed_id = %s",
                                (reader_hash, subscription.feed_id)).fetchone():
                    return "exists"
                row = conn.execute(_SUBSCRIPTION_COUNTS, {
                    "r": reader_hash, "since": subscription.created_at - SUBSCRIPTION_DAY_SECONDS}).fetchone()
                assert row is not None
                day, total = int(row[0]), int(row[1])  # type: ignore[call-overload]
                if total >= in_all:
                    return "over_total_limit"
                if day >= per_day:
                    return "over_daily_limit"
                conn.execute(_SUBSCRIBE, {"r": reader_hash, "f": subscription.feed_id, "u": subscription.feed_url,
                                          "site": subscription.site_url, "t": subscription.title,
                                          "at": subscription.created_at})
                return "added"

        return self._run(work)

    def subscriptions(self, reader_hash: str) -> list[Subscription]:
        rows = self._run(lambda conn: conn.execute(
            "select feed_id, feed_url, site_url, title, created_at from subscriptions where reader_hash = %s "
            "order by created_at desc, feed_id", (reader_hash,)).fetchall())
        return [Subscription(str(f), str(u), str(site), str(t), float(at)) for f, u, site, t, at in rows]  # type: ignore[arg-type]

    def remove_subscription(self, reader_hash: str, feed_id: str) -> None:
        self._run(lambda conn: conn.execute(_UNSUBSCRIBE, {"r": reader_hash, "f": feed_id}))

    def close(self) -> None:
        self._pool.close()
