"""Parquet tables: schema checks, evolution of older objects, idempotent segments."""

from __future__ import annotations

import pyarrow as pa
import pytest

from warehouse.errors import PreconditionFailedError, SchemaMismatchError
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
