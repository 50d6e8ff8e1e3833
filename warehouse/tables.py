"""Parquet tables in the object store: schema-checked writes, idempotent segments, reads."""

from __future__ import annotations

import hashlib
import io
import logging
import time
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.damage import describe_error, record_damage
from warehouse.errors import (
    CorruptObjectError,
    ObjectNotFoundError,
    PreconditionFailedError,
    SchemaMismatchError,
)
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)


def evolve_to_schema(table: pa.Table, schema: pa.Schema, *, key: str | None = None,
                     drop_unknown: bool = False) -> pa.Table:
    """Bring an object written under an older schema up to ``schema``.

    Columns added since (always nullable) are filled with nulls. A column the schema does not know
    (a newer release wrote it) is an error, so a table read to be written back never silently
    drops data; a log segment, which is never written back, is read without it (``drop_unknown``).
    """
    unknown = [n for n in table.schema.names if n not in schema.names]
    if unknown and not drop_unknown:
        raise SchemaMismatchError(f"columns {unknown} are not in the table schema", key=key)
    columns = []
    for field in schema:
        if field.name in table.schema.names:
            columns.append(table.column(field.name))
        elif field.nullable:
            columns.append(pa.nulls(table.num_rows, type=field.type))
        else:
            raise SchemaMismatchError(f"required column {field.name} is missing", key=key)
    return check_schema(pa.Table.from_arrays(columns, names=schema.names), schema, key=key)


def check_schema(table: pa.Table, schema: pa.Schema, *, key: str | None = None) -> pa.Table:
    """Return ``table`` cast to ``schema``; raise SchemaMismatchError when columns differ."""
    if table.schema.names != schema.names:
        raise SchemaMismatchError(
            f"columns {table.schema.names} do not match {schema.names}", key=key
        )
    try:
        return table.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaMismatchError(f"cannot cast to the table schema: {e}", key=key) from e


def table_to_parquet_bytes(table: pa.Table, row_group_rows: int | None = None) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", row_group_size=row_group_rows)
    return sink.getvalue()


def parquet_bytes_to_table(data: bytes, key: str | None = None) -> pa.Table:
    """Decode one stored object on the calling thread.

    Objects are small (a micro-batch, a state table), so Arrow's thread pools buy nothing here;
    and a short process that started one can abort at exit ("terminate called without an active
    exception", pyarrow 25 and 26 on the project machines: 10 of 30 runs of a one-read script, 0 of
    30 with ``use_threads=False``), which broke the exit code of CLI commands. ``pq.read_table``
    reads through the dataset scanner, whose reads go through Arrow's IO thread pool even without
    ``use_threads`` (8 and 24 of 30 runs of ``newsroom doctor`` aborted so); ``ParquetFile.read``
    reads on the calling thread.

    Raises:
        CorruptObjectError: The bytes are not a readable Parquet file (truncated, garbage); it
            names ``key``.
    """
    try:
        return pq.ParquetFile(io.BytesIO(data), pre_buffer=False).read(use_threads=False)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CorruptObjectError(f"unreadable Parquet: {describe_error(e)}", key=key) from e


def stored_segment(store: ObjectStore, key: str, action: str) -> pa.Table | None:
    """A stored segment's table as written (its own columns); None when it is gone since listed,
    or unreadable, which is recorded with ``action`` (what the reader does instead)."""
    try:
        return parquet_bytes_to_table(store.get(key).data, key)
    except ObjectNotFoundError:
        return None
    except CorruptObjectError as e:
        record_damage(key, f"corrupt: {e.reason}", action)
        return None


def rows_to_table(rows: Iterable[dict[str, object]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=schema)


def content_segment_id(table: pa.Table) -> str:
    """A segment name derived from its content, so rewriting the same rows hits the same key."""
    return hashlib.blake2b(table_to_parquet_bytes(table), digest_size=10).hexdigest()


_PUT_ATTEMPTS = 5
_RETRY_PAUSE_SECONDS = 0.05


def write_segment(store: ObjectStore, key: str, table: pa.Table, schema: pa.Schema, *,
                  metadata: dict[bytes, bytes] | None = None, row_group_rows: int | None = None) -> bool:
    """Create an immutable segment. Returns False when an identical segment already exists.

    ``metadata`` goes into the Parquet footer (a compacted segment names the segments it holds,
    :data:`warehouse.catalog.FOLDED_KEY`); ``row_group_rows`` caps a row group, so a reader's
    predicate can skip row groups by their statistics.

    A conditional put that failed while the key stays absent (S3 409 ConditionalRequestConflict:
    a concurrent conditional write was in flight, and may have failed) is tried again.

    Raises:
        PreconditionFailedError: A segment with other rows has this key, or the key stayed contested.
    """
    table = check_schema(table, schema, key=key)
    data = table_to_parquet_bytes(table.replace_schema_metadata(metadata) if metadata else table, row_group_rows)
    for attempt in range(1, _PUT_ATTEMPTS + 1):
        try:
            store.put(key, data, if_none_match=True)
        except PreconditionFailedError:
            try:
                stored = store.get(key)
            except ObjectNotFoundError:
                time.sleep(_RETRY_PAUSE_SECONDS * attempt)
                continue
            try:
                existing = parquet_bytes_to_table(stored.data, key)
            except CorruptObjectError as e:
                # A damaged copy under this key: segment keys come from their rows (or, for story
                # changes, from an offset no commit has passed), so these rows are what it should hold.
                if _replace_damaged(store, key, data, stored.etag, e):
                    return True
                continue
            if not existing.equals(table):
                raise
            return False
        return True
    raise PreconditionFailedError("conditional put kept conflicting with no object stored", key=key)


def _replace_damaged(store: ObjectStore, key: str, data: bytes, etag: str, error: CorruptObjectError) -> bool:
    """Replace a corrupt segment with ``data`` if it is still the object read (If-Match)."""
    try:
        store.put(key, data, if_match=etag)
    except PreconditionFailedError:
        return False  # someone replaced it first: look again
    record_damage(key, f"corrupt: {error.reason}", "replaced with the rows written under its key")
    return True


def write_table(store: ObjectStore, key: str, table: pa.Table, schema: pa.Schema, *, if_match: str | None = None,
                if_none_match: bool = False) -> str:
    """Write a whole table object (registry, state), optionally as a conditional put."""
    table = check_schema(table, schema, key=key)
    return store.put(key, table_to_parquet_bytes(table), if_match=if_match, if_none_match=if_none_match)


def read_table(store: ObjectStore, key: str, schema: pa.Schema) -> tuple[pa.Table, str | None]:
    """Read a whole-table object and its ETag; a missing key is an empty table and None.

    A corrupt object (bytes that are not Parquet) reads as an empty table with its ETag, named in a
    recorded error: a conditional put with that ETag replaces it, so the next write of the table
    (feed state, identity shard) repairs it, and a rival writer is still fenced (issue 16). One of
    another schema still raises: it may be a newer writer's, and must not be overwritten.

    Raises:
        SchemaMismatchError: The object has columns ``schema`` does not know.
    """
    try:
        obj = store.get(key)
    except ObjectNotFoundError:
        return schema.empty_table(), None
    try:
        table = parquet_bytes_to_table(obj.data, key)
    except CorruptObjectError as e:
        record_damage(key, f"corrupt: {e.reason}", "read as empty; the next write of the table replaces it")
        return schema.empty_table(), obj.etag
    return evolve_to_schema(table, schema, key=key), obj.etag


def list_segments(store: ObjectStore, prefix: str) -> list[str]:
    return [k for k in store.list(prefix) if k.endswith(".parquet")]


def read_segment(store: ObjectStore, key: str, schema: pa.Schema) -> pa.Table:
    """One segment as a table of ``schema``; columns a newer release added are left out (issue 32).

    Raises:
        ObjectNotFoundError: No such segment.
        CorruptObjectError, SchemaMismatchError: It cannot be read as ``schema`` (both name the key).
    """
    return evolve_to_schema(parquet_bytes_to_table(store.get(key).data, key), schema, key=key, drop_unknown=True)


def read_segments(store: ObjectStore, keys: Iterable[str], schema: pa.Schema, *,
                  skip_damaged: bool = False) -> pa.Table:
    """Concatenate segments (in the given key order) into one table of ``schema``.

    Args:
        skip_damaged: Leave out a segment that cannot be read (corrupt, another schema), naming it
            in a recorded error (:func:`warehouse.damage.record_damage`), and one deleted since it
            was listed (compaction, retention); by default either raises.

    Raises:
        WarehouseError: Without ``skip_damaged``, a segment is missing or unreadable.
    """
    tables = []
    for key in keys:
        try:
            tables.append(read_segment(store, key, schema))
        except ObjectNotFoundError:
            if not skip_damaged:
                raise
            log.info("segment_vanished key=%s", key)  # compacted or expired since the listing
        except (CorruptObjectError, SchemaMismatchError) as e:
            if not skip_damaged:
                raise
            record_damage(key, f"corrupt: {e.reason}", "skipped")
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)
