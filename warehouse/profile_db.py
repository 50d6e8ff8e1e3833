"""The reader-profile database: where it is, its PostgreSQL migrations, and the profiles fold's writes.

Two backends hold the same tables (issue 19). SQLite, one file in WAL mode, is the embedded
default for one machine (its tables: ``PROFILE_TABLES_SQL``, created if missing). PostgreSQL is
for replicas on several machines; a ``postgresql://`` URL in ``NEWSROOM_SERVING_PROFILES_URL``
chooses it, and its schema comes from versioned migration files in
``warehouse/migrations/profiles/NNNN_name.sql``, each applied once (see :func:`migrate_profiles`).

Serving writes follows, hides and reads through its ``ProfileStore``; the profiles fold writes
``weights``, ``clicks_consumed`` and ``clicks_folded`` through a :class:`FoldStore` from
:func:`open_fold_store`, in one transaction per fold. Both move the version of every reader they
change (``profile_versions``, issue 29) in the same transaction, so replicas that cache profiles
learn which ones to drop.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from warehouse.errors import ProfileDbError
from warehouse.profiles import PROFILE_TABLES_SQL, TOUCH_PROFILE_SQLITE

if TYPE_CHECKING:
    import psycopg

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations" / "profiles"
"""The migration files ship inside the package (package data), next to this module."""
MIGRATION_LOCK_ID = 0x6E657773_0001
"""Advisory lock key held while migrating, so two replicas starting at once migrate one after the other."""
FOLD_LOCK_ID = 0x6E657773_0002
"""Advisory lock key held by a fold's transaction: two folds at once never overwrite each other's weights."""
POSTGRES_SCHEMES = ("postgresql://", "postgres://")

TOUCH_PROFILE_POSTGRES = (
    "insert into profile_versions values (%(r)s, pg_current_xact_id()::text::bigint) "
    "on conflict (reader_hash) do update set version = excluded.version"
)
"""Set a reader's version to the writing transaction's id (migration 0002 says why that id)."""
TOUCH_PROFILES_POSTGRES = (
    "insert into profile_versions select r, pg_current_xact_id()::text::bigint from unnest(%s::text[]) as r "
    "on conflict (reader_hash) do update set version = excluded.version"
)
"""The same for many readers (distinct, sorted: two writers lock rows in one order)."""

WeightRow = tuple[str, str, float, float]
"""``(kind, key, weight, as_of)`` of one stored weight; ``as_of`` in UNIX seconds."""
FoldedClick = tuple[str, str]
"""``(click_id, day)`` of a click counted by a fold; ``day`` is its ``YYYY-MM-DD``."""


def is_postgres_url(location: str) -> bool:
    """Whether a profile-store location names PostgreSQL rather than a SQLite file.

    >>> is_postgres_url("postgresql://db.internal/newsroom"), is_postgres_url("var/profiles.sqlite3")
    (True, False)
    """
    return location.startswith(POSTGRES_SCHEMES)


def redact_url(url: str) -> str:
    """The URL without its password, for log lines and errors.

    >>> redact_url("postgresql://app:s3cret@db:5432/newsroom")
    'postgresql://app:***@db:5432/newsroom'
    """
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return f"{scheme}{sep}{userinfo.split(':', 1)[0]}:***@{host}"


# -- migrations ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Migration:
    """One versioned schema change: ``NNNN_name.sql``, applied once and never edited afterwards."""

    version: int
    name: str
    sql: str
    checksum: str


def profile_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Every migration file in version order.

    Raises:
        ProfileDbError: A file is not named ``NNNN_name.sql``, or two share a version.
    """
    found: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.sql")):
        number, _, name = path.stem.partition("_")
        if not number.isdigit() or not name:
            raise ProfileDbError(f"migration file not named NNNN_name.sql: {path.name}")
        if int(number) in found:
            raise ProfileDbError(f"two migrations numbered {int(number)}: {path.name}")
        sql = path.read_text(encoding="utf-8")
        found[int(number)] = Migration(int(number), name, sql, hashlib.sha256(sql.encode()).hexdigest())
    return [found[v] for v in sorted(found)]


_MIGRATIONS_TABLE = (
    "create table if not exists profile_schema_migrations (version integer primary key, name text not null, "
    "checksum text not null, applied_at timestamptz not null default now())"
)


def migrate_profiles(conn: psycopg.Connection[tuple[object, ...]],
                     migrations: Sequence[Migration] | None = None) -> list[int]:
    """Bring a PostgreSQL profile database up to the newest migration.

    One transaction holds an advisory lock (``MIGRATION_LOCK_ID``) while it reads
    ``profile_schema_migrations`` and applies the missing files in order, each recorded with its
    checksum: a second replica starting at the same moment waits on the lock, then finds every
    version applied and does nothing. PostgreSQL's DDL is transactional, so a failing file leaves
    the database as it was.

    Args:
        conn: An open connection, outside any transaction.
        migrations: The migrations to apply; None reads ``MIGRATIONS_DIR``.

    Returns:
        The versions this call applied (empty when the database was current).

    Raises:
        ProfileDbError: A migration failed, or an applied file has since changed (its checksum).
    """
    import psycopg

    migrations = profile_migrations() if migrations is None else migrations
    applied_now: list[int] = []
    try:
        with conn.transaction():
            conn.execute("select pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_ID,))
            conn.execute(_MIGRATIONS_TABLE)
            applied = {int(v): str(c) for v, c in
                       conn.execute("select version, checksum from profile_schema_migrations").fetchall()}
            for migration in migrations:
                if migration.version in applied:
                    if applied[migration.version] != migration.checksum:
                        raise ProfileDbError(f"migration {migration.version:04d}_{migration.name} changed after "
                                             "it was applied: add a new migration instead")
                    continue
                conn.execute(migration.sql.encode())  # no parameters: one file may hold several statements
                conn.execute("insert into profile_schema_migrations (version, name, checksum) values (%s, %s, %s)",
                             (migration.version, migration.name, migration.checksum))
                applied_now.append(migration.version)
    except psycopg.Error as e:
        raise ProfileDbError(f"profile migrations failed: {type(e).__name__}: {e}") from e
    return applied_now


def connect_postgres(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """An autocommit connection to the profile database, migrated to the newest schema.

    Raises:
        ProfileDbError: The server cannot be reached or the migrations fail.
    """
    import psycopg

    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as e:
        raise ProfileDbError(f"cannot reach the profile database at {redact_url(url)}: {type(e).__name__}") from e
    try:
        migrate_profiles(conn)
    except BaseException:
        conn.close()
        raise
    return conn


# -- the profiles fold's writes -----------------------------------------------------------------


class FoldTransaction(Protocol):
    """What one fold reads and writes inside its transaction."""

    def weights_of(self, readers: Sequence[str]) -> dict[str, list[WeightRow]]:
        """Each reader's stored weights (readers with none are absent)."""
        ...

    def replace_weights(self, reader_hash: str, rows: Iterable[WeightRow]) -> None: ...

    def mark_folded(self, clicks: Iterable[FoldedClick], at: float) -> None:
        """Record click ids as counted (ids already recorded are left as they are)."""
        ...

    def mark_consumed(self, keys: Iterable[str], at: float) -> None:
        """Record segment keys as read. A key already recorded fails the fold: another fold read it."""
        ...

    def forget_folded_before(self, day: str) -> None: ...


class FoldStore(Protocol):
    """The profiles fold's side of the profile database. Every method raises ProfileDbError on failure."""

    def consumed_segments(self) -> set[str]: ...

    def folded_click_ids(self, ids: Sequence[str]) -> set[str]: ...

    def transaction(self) -> AbstractContextManager[FoldTransaction]:
        """One transaction, committed when the block ends and rolled back when it raises."""
        ...

    def close(self) -> None: ...


_ID_CHUNK = 500


class SqliteFoldStore:
    """The fold's writes to the embedded SQLite profile file."""

    def __init__(self, path: str) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(path, timeout=30, isolation_level=None)
            self._db.execute("pragma journal_mode=wal")
            self._db.executescript(PROFILE_TABLES_SQL)
        except sqlite3.Error as e:
            raise ProfileDbError(f"cannot open profiles at {path}: {e}") from e

    def consumed_segments(self) -> set[str]:
        try:
            return {str(k) for (k,) in self._db.execute("select segment_key from clicks_consumed")}
        except sqlite3.Error as e:
            raise ProfileDbError(f"profile store failed: {e}") from e

    def folded_click_ids(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        try:
            for i in range(0, len(ids), _ID_CHUNK):
                chunk = list(ids[i : i + _ID_CHUNK])
                marks = ",".join("?" * len(chunk))
                found.update(str(c) for (c,) in self._db.execute(
                    f"select click_id from clicks_folded where click_id in ({marks})", chunk))
        except sqlite3.Error as e:
            raise ProfileDbError(f"profile store failed: {e}") from e
        return found

    @contextmanager
    def transaction(self) -> Iterator[FoldTransaction]:
        db = self._db
        try:
            db.execute("begin immediate")  # the one writer: serving's writes wait (WAL readers do not)
            try:
                fold = _SqliteFold(db)
                yield fold
                db.executemany(TOUCH_PROFILE_SQLITE, [(r,) for r in sorted(fold.touched)])
            except BaseException:
                db.execute("rollback")
                raise
            db.execute("commit")
        except sqlite3.Error as e:
            raise ProfileDbError(f"profile store failed: {e}") from e

    def close(self) -> None:
        self._db.close()


class _SqliteFold:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.touched: set[str] = set()

    def weights_of(self, readers: Sequence[str]) -> dict[str, list[WeightRow]]:
        out: dict[str, list[WeightRow]] = {}
        for reader_hash in readers:
            rows = self._db.execute("select kind, key, weight, as_of from weights where reader_hash = ?",
                                    (reader_hash,)).fetchall()
            if rows:
                out[reader_hash] = [(str(k), str(key), float(w), float(a)) for k, key, w, a in rows]
        return out

    def replace_weights(self, reader_hash: str, rows: Iterable[WeightRow]) -> None:
        self.touched.add(reader_hash)
        self._db.execute("delete from weights where reader_hash = ?", (reader_hash,))
        self._db.executemany("insert into weights values (?, ?, ?, ?, ?)",
                             [(reader_hash, kind, key, w, as_of) for kind, key, w, as_of in rows])

    def mark_folded(self, clicks: Iterable[FoldedClick], at: float) -> None:
        self._db.executemany("insert or ignore into clicks_folded values (?, ?, ?)",
                             [(click_id, day, at) for click_id, day in clicks])

    def mark_consumed(self, keys: Iterable[str], at: float) -> None:
        self._db.executemany("insert into clicks_consumed values (?, ?)", [(k, at) for k in keys])

    def forget_folded_before(self, day: str) -> None:
        self._db.execute("delete from clicks_folded where day < ?", (day,))


class PostgresFoldStore:
    """The fold's writes to a PostgreSQL profile database (one connection per fold run)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._conn = connect_postgres(url)

    def _error(self, e: Exception) -> ProfileDbError:
        return ProfileDbError(f"profile database {redact_url(self._url)} failed: {type(e).__name__}: {e}")

    def consumed_segments(self) -> set[str]:
        import psycopg

        try:
            return {str(k) for (k,) in self._conn.execute("select segment_key from clicks_consumed")}
        except psycopg.Error as e:
            raise self._error(e) from e

    def folded_click_ids(self, ids: Sequence[str]) -> set[str]:
        import psycopg

        try:
            rows = self._conn.execute("select click_id from clicks_folded where click_id = any(%s)", (list(ids),))
            return {str(c) for (c,) in rows}
        except psycopg.Error as e:
            raise self._error(e) from e

    @contextmanager
    def transaction(self) -> Iterator[FoldTransaction]:
        import psycopg

        try:
            with self._conn.transaction():
                self._conn.execute("select pg_advisory_xact_lock(%s)", (FOLD_LOCK_ID,))
                fold = _PostgresFold(self._conn)
                yield fold
                # Last, so serving's writes to these readers wait on the version rows for
                # milliseconds, not for the whole fold.
                if fold.touched:
                    self._conn.execute(TOUCH_PROFILES_POSTGRES, (sorted(fold.touched),))
        except psycopg.Error as e:
            raise self._error(e) from e

    def close(self) -> None:
        self._conn.close()


class _PostgresFold:
    def __init__(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        self._conn = conn
        self.touched: set[str] = set()

    def weights_of(self, readers: Sequence[str]) -> dict[str, list[WeightRow]]:
        out: dict[str, list[WeightRow]] = {}
        rows = self._conn.execute(
            "select reader_hash, kind, key, weight, as_of from weights where reader_hash = any(%s)", (list(readers),))
        for reader_hash, kind, key, w, as_of in rows:
            out.setdefault(str(reader_hash), []).append((str(kind), str(key), float(w), float(as_of)))  # type: ignore[arg-type]
        return out

    def replace_weights(self, reader_hash: str, rows: Iterable[WeightRow]) -> None:
        self.touched.add(reader_hash)
        self._conn.execute("delete from weights where reader_hash = %s", (reader_hash,))
        with self._conn.cursor() as cur:
            cur.executemany("insert into weights values (%s, %s, %s, %s, %s)",
                            [(reader_hash, kind, key, w, as_of) for kind, key, w, as_of in rows])

    def mark_folded(self, clicks: Iterable[FoldedClick], at: float) -> None:
        with self._conn.cursor() as cur:
            cur.executemany("insert into clicks_folded values (%s, %s, %s) on conflict do nothing",
                            [(click_id, day, at) for click_id, day in clicks])

    def mark_consumed(self, keys: Iterable[str], at: float) -> None:
        with self._conn.cursor() as cur:
            cur.executemany("insert into clicks_consumed values (%s, %s)", [(k, at) for k in keys])

    def forget_folded_before(self, day: str) -> None:
        self._conn.execute("delete from clicks_folded where day < %s", (day,))


def open_fold_store(location: str) -> FoldStore:
    """The fold's store at ``location``: a ``postgresql://`` URL, else a SQLite file path.

    Raises:
        ProfileDbError: It cannot be opened (or, for PostgreSQL, reached and migrated).
    """
    if is_postgres_url(location):
        return PostgresFoldStore(location)
    return SqliteFoldStore(location)
