"""Reader profiles on PostgreSQL, shared by every serving replica (issue 19).

The same tables as the SQLite store (``warehouse/migrations/profiles/``), reached through a
psycopg 3 connection pool. Choices:

* **Open without the server.** The pool connects in the background; the schema is migrated on the
  first call that reaches the server (``warehouse.profile_db.migrate_profiles``, under an advisory
  lock, so replicas starting together migrate once). A replica whose database is down still
  starts and serves every shared page; personal calls fail with ProfileStoreError (For you falls
  back to top stories, profile writes answer 503) until it is back.
* **One round trip per For-you request.** ``load`` reads follows, hides, reads and weights in one
  statement; psycopg prepares it after a few uses.
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
from serving.profiles import MAX_READS, FollowKind, HideKind, Profile, profile_from_rows
from warehouse.errors import ProfileDbError
from warehouse.profile_db import migrate_profiles, redact_url

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
"""
_FOLLOW = "insert into follows values (%s, %s, %s, %s) on conflict do nothing"
_UNFOLLOW = "delete from follows where reader_hash = %s and kind = %s and target_id = %s"
_HIDE = "insert into hides values (%s, %s, %s, %s) on conflict do nothing"
_READ = ("insert into reads values (%s, %s, %s) on conflict (reader_hash, story_id) "
         "do update set read_at = greatest(reads.read_at, excluded.read_at)")
_TRIM_READS = ("delete from reads where reader_hash = %(r)s and story_id not in ("
               "select story_id from reads where reader_hash = %(r)s order by read_at desc, story_id limit %(n)s)")


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
        return profile_from_rows(reader_hash, follows, hides, reads, weights)

    def follow(self, reader_hash: str, kind: FollowKind, target_id: str) -> None:
        self._run(lambda conn: conn.execute(_FOLLOW, (reader_hash, kind, target_id, time.time())))

    def unfollow(self, reader_hash: str, kind: FollowKind, target_id: str) -> None:
        self._run(lambda conn: conn.execute(_UNFOLLOW, (reader_hash, kind, target_id)))

    def hide(self, reader_hash: str, kind: HideKind, target_id: str) -> None:
        self._run(lambda conn: conn.execute(_HIDE, (reader_hash, kind, target_id, time.time())))

    def record_read(self, reader_hash: str, story_id: str, read_at: float) -> None:
        def work(conn: Connection) -> None:
            with conn.transaction():
                conn.execute(_READ, (reader_hash, story_id, read_at))
                conn.execute(_TRIM_READS, {"r": reader_hash, "n": MAX_READS})

        self._run(work)

    def close(self) -> None:
        self._pool.close()
