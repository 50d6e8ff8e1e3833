"""Parquet tables: schema checks, evolution of older objects, idempotent segments."""

from __future__ import annotations

import pyarrow as pa
import pytest

from warehouse.damage import collect_damage
from warehouse.errors import CorruptObjectError, PreconditionFailedError, SchemaMismatchError
from warehouse.store import ObjectStore
from warehouse.tables import read_segments, read_table, write_segment, write_table

OLD = pa.schema([("feed_id", pa.string()), ("etag", pa.string())])
NEW = pa.schema([("feed_id", pa.string()), ("etag", pa.string()), ("is_parked", pa.bool_())])


def test_older_objects_gain_new_columns_as_nulls(store: ObjectStore) -> None:
    write_table(store, "state/t.parquet", pa.Table.from_pylist([{"feed_id": "f", "etag": "e"}], OLD), OLD)
    table, etag = read_table(store, "state/t.parquet", NEW)
    assert table.to_pylist() == [{"feed_id": "f", "etag": "e", "is_parked": None}] and etag
    assert read_segments(store, ["state/t.parquet"], NEW).num_rows == 1


def test_unknown_columns_are_refused(store: ObjectStore) -> None:
    write_table(store, "state/t.parquet", pa.Table.from_pylist([{"feed_id": "f", "etag": "e", "is_parked": True}],
                                                               NEW), NEW)
    with pytest.raises(SchemaMismatchError):
        read_table(store, "state/t.parquet", OLD)


def test_writers_check_the_schema(store: ObjectStore) -> None:
    with pytest.raises(SchemaMismatchError):
        write_table(store, "state/t.parquet", pa.Table.from_pylist([{"feed_id": "f"}]), OLD)


def test_segments_are_immutable_and_rewrites_are_idempotent(store: ObjectStore) -> None:
    rows = pa.Table.from_pylist([{"feed_id": "f", "etag": "e"}], OLD)
    assert write_segment(store, "log/x/1.parquet", rows, OLD) is True
    assert write_segment(store, "log/x/1.parquet", rows, OLD) is False  # the same rows again: no-op
    other = pa.Table.from_pylist([{"feed_id": "g", "etag": "e"}], OLD)
    with pytest.raises(PreconditionFailedError):
        write_segment(store, "log/x/1.parquet", other, OLD)


def test_a_corrupt_segment_under_the_key_is_replaced_by_the_rows_it_should_hold(store: ObjectStore) -> None:
    """Segment keys come from their rows, so a rerun that finds a torn copy under its key repairs it
    (If-Match on the torn bytes) and says so (issue 16)."""
    rows = pa.Table.from_pylist([{"feed_id": "f", "etag": "e"}], OLD)
    assert write_segment(store, "log/x/1.parquet", rows, OLD) is True
    whole = store.get("log/x/1.parquet").data
    store.put("log/x/1.parquet", whole[: len(whole) // 2])
    with pytest.raises(CorruptObjectError, match="log/x/1.parquet"):
        read_segments(store, ["log/x/1.parquet"], OLD)
    with collect_damage() as damaged:
        assert read_segments(store, ["log/x/1.parquet"], OLD, skip_damaged=True).num_rows == 0
    assert [(d.key, d.action) for d in damaged] == [("log/x/1.parquet", "skipped")]

    with collect_damage() as damaged:
        assert write_segment(store, "log/x/1.parquet", rows, OLD) is True
    assert store.get("log/x/1.parquet").data == whole
    assert [d.key for d in damaged] == ["log/x/1.parquet"] and "replaced" in damaged[0].action


def test_a_corrupt_table_reads_as_empty_with_its_etag(store: ObjectStore) -> None:
    store.put("state/t.parquet", b"PAR1 torn")
    with collect_damage() as damaged:
        table, etag = read_table(store, "state/t.parquet", OLD)
    assert table.num_rows == 0 and etag == store.head("state/t.parquet")
    assert [d.key for d in damaged] == ["state/t.parquet"]
    rows = pa.Table.from_pylist([{"feed_id": "f", "etag": "e"}], OLD)
    write_table(store, "state/t.parquet", rows, OLD, if_match=etag)  # the next write replaces it, fenced
    assert read_table(store, "state/t.parquet", OLD)[0].equals(rows)
