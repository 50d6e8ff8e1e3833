"""A language writer's state blob: JSON, compressed, in the object store.

Written as Zstandard (level 1) of compact JSON with sorted keys, so the same state is the same
bytes; each blob's key carries a hash of them (``layout.story_state_key``), and fencing is the
change segment and the checkpoint's conditional put (``tasks.writer.session.commit``). Read by its magic number: Zstandard, or gzip as every state was written before (those
still load). Any ``zstd -d`` reads the blobs; the frame header carries the decompressed size.

Why not gzip: at 50,000 active stories a state is about 380 MB of JSON, which gzip level 9 took
23 s to compress and ``json.dumps`` 11–12 s to write, every minute. Zstandard level 1 takes
0.6 s (and 0.3 s to decompress, against 2.9 s) for a smaller blob, and orjson writes the JSON in
1.3 s (``bench/writer_checkpoint.py``).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt
import orjson
import polars as pl
import pyarrow as pa

from warehouse.errors import StateBlobError

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_LEVEL = 1
MAX_STATE_BYTES = 16 << 30
"""Largest decompressed state read (16 GiB): a corrupt or hostile header never sizes a buffer past it."""


def _default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def encode_state(state: Mapping[str, object]) -> bytes:
    """``state`` as compact, key-sorted JSON in one Zstandard frame (deterministic bytes).

    A writer state has no NaN or infinity (orjson would write them as null, and the load would
    then fail on that value rather than silently read it).

    >>> decode_state(encode_state({"b": [1.5, None], "a": "x"}))
    {'a': 'x', 'b': [1.5, None]}
    """
    raw = orjson.dumps(state, default=_default, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY)
    return pa.Codec("zstd", compression_level=ZSTD_LEVEL).compress(raw, asbytes=True)


def zstd_content_size(data: bytes) -> int:
    """The decompressed size a Zstandard frame header declares (RFC 8878, section 3.1.1.1).

    Raises:
        StateBlobError: If ``data`` is not a Zstandard frame or its header has no content size.
    """
    if len(data) < 6 or data[:4] != ZSTD_MAGIC:
        raise StateBlobError("not a Zstandard frame")
    descriptor = data[4]
    size_flag = descriptor >> 6
    single_segment = bool(descriptor & 0x20)
    dictionary_bytes = (0, 1, 2, 4)[descriptor & 0x03]
    size_bytes = (1 if single_segment else 0, 2, 4, 8)[size_flag]
    if size_bytes == 0:
        raise StateBlobError("Zstandard frame does not declare its content size")
    start = 5 + (0 if single_segment else 1) + dictionary_bytes
    field = data[start : start + size_bytes]
    if len(field) != size_bytes:
        raise StateBlobError("truncated Zstandard frame header")
    size = int.from_bytes(field, "little")
    return size + 256 if size_bytes == 2 else size


def decode_state(data: bytes) -> Mapping[str, object]:
    """The state a blob holds, whether written as Zstandard (now) or gzip (before).

    Raises:
        StateBlobError: If the blob is neither, or declares more than ``MAX_STATE_BYTES``.
    """
    if data[:4] == ZSTD_MAGIC:
        size = zstd_content_size(data)
        if size > MAX_STATE_BYTES:
            raise StateBlobError(f"state declares {size} bytes, more than {MAX_STATE_BYTES}")
        try:
            raw = pa.Codec("zstd").decompress(data, decompressed_size=size, asbytes=True)
        except (OSError, pa.ArrowException) as e:
            raise StateBlobError(f"corrupt Zstandard state: {e}") from e
    elif data[:2] == GZIP_MAGIC:
        try:
            # json, not orjson: the writer that made these used json.dumps, which could write NaN.
            state = json.loads(gzip.decompress(data))
        except (OSError, EOFError, ValueError) as e:
            raise StateBlobError(f"corrupt gzip state: {e}") from e
        if not isinstance(state, dict):
            raise StateBlobError("state blob does not hold a JSON object")
        return state
    else:
        raise StateBlobError("state blob is neither Zstandard nor gzip")
    try:
        state = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise StateBlobError(f"corrupt state JSON: {e}") from e
    if not isinstance(state, dict):
        raise StateBlobError("state blob does not hold a JSON object")
    return state


def verify_state(data: bytes) -> None:
    """Check that a blob decompresses whole into what looks like a JSON object, without parsing it.

    Decompression reads every frame and fails on a truncated or garbled one; parsing a large state
    takes most of a load (bench/writer_checkpoint.py), so ``newsroom health`` checks this far only.
    The decompressed bytes are streamed in chunks, never held whole (a 50,000-story state is about
    380 MB of JSON).

    Raises:
        StateBlobError: If it does not.
    """
    if is_state_object(data):
        decode_state_object(data)  # version 4: Arrow tables, each read and checked whole
        return
    if data[:4] == ZSTD_MAGIC:
        size = zstd_content_size(data)
        if size > MAX_STATE_BYTES:
            raise StateBlobError(f"state declares {size} bytes, more than {MAX_STATE_BYTES}")
        compression = "zstd"
    elif data[:2] == GZIP_MAGIC:
        size, compression = None, "gzip"
    else:
        raise StateBlobError("state blob is neither Zstandard nor gzip")
    first = last = b""
    total = 0
    try:
        with pa.input_stream(pa.py_buffer(data), compression=compression) as stream:
            while chunk := stream.read(_VERIFY_CHUNK):
                total += len(chunk)
                first = first or chunk.lstrip()[:1]
                last = chunk.rstrip()[-1:] or last
    except (OSError, pa.ArrowException, EOFError) as e:
        raise StateBlobError(f"corrupt {compression} state: {e}") from e
    if size is not None and total != size:
        raise StateBlobError(f"state holds {total} bytes, its frame declares {size}")
    if first != b"{" or last != b"}":
        raise StateBlobError("state blob does not hold a JSON object")


_VERIFY_CHUNK = 8 << 20


# ---------------------------------------------------------------------------------------------
# Version 4: a base snapshot and per-run deltas, as Arrow tables (issue 15)
# ---------------------------------------------------------------------------------------------

STATE_OBJECT_MAGIC = b"NRWS\x04"
"""First bytes of a version 4 state object (a base or a delta): then a little-endian u32 header
length, the header (JSON), and each table as an Arrow IPC stream (u64 length first)."""
MAX_STATE_HEADER_BYTES = 256 << 20

_STR = pa.string()
_F64 = pa.float64()
_I64 = pa.int64()
STATE_TABLE_SCHEMAS: dict[str, pa.Schema] = {
    "stories": pa.schema([
        ("story_id", _STR), ("first_article_id", _STR), ("first_seen_ms", _I64), ("last_seen_ms", _I64),
        ("size", _I64), ("trimmed", _I64), ("repaired_ms", _I64), ("norm_centroid", _F64), ("norm_entities", _F64),
        ("norm_docs", _F64), ("members_replaced", pa.bool_()), ("member_rows", _I64), ("years", pa.list_(_STR)),
        ("centroid_terms", pa.list_(_STR)), ("centroid_weights", pa.list_(_F64)), ("entity_words", pa.list_(_STR)),
        ("entity_counts", pa.list_(_F64)),
    ]),
    "members": pa.schema([
        ("story_id", _STR), ("article_id", _STR), ("seen_ms", _I64), ("publisher_id", _STR), ("copy_of", _STR),
        ("terms", pa.list_(_STR)), ("weights", pa.list_(_F64)), ("entities", pa.list_(_STR)),
        ("has_body", pa.bool_()), ("embedding", pa.binary()),
    ]),
    "norms": pa.schema([("story_id", _STR), ("norm_centroid", _F64), ("norm_entities", _F64), ("norm_docs", _F64)]),
    "recent": pa.schema([("article_id", _STR), ("story_id", _STR), ("root_id", _STR), ("seen_ms", _I64),
                         ("minhash", pa.binary())]),
    "df": pa.schema([("term", _STR), ("count", _F64)]),
    "dropped_stories": pa.schema([("story_id", _STR)]),
    "dropped_recent": pa.schema([("article_id", _STR)]),
    "seen": pa.schema([("article_id", _STR), ("content_hash", _STR)]),
}
"""The tables of a state object; a list column ``x`` travels as flat values plus ``x_len``
(see ``transforms.clustering.columns``). ``seen`` is the writer's own: the input it has read."""
LIST_LENGTH_COLUMNS = {"years": "years_len", "centroid_terms": "centroid_terms_len",
                       "centroid_weights": "centroid_terms_len", "entity_words": "entity_words_len",
                       "entity_counts": "entity_words_len", "terms": "terms_len", "weights": "terms_len",
                       "entities": "entities_len"}
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


class StateHeader(TypedDict, total=False):
    """The JSON header of a version 4 state object: the commit that stored it, for a delta the
    chain before it, and the state's own scalars (the clusterer's meta, which the writer reads:
    ``transforms.clustering.columns.state_meta``; only ``df_replaced`` concerns a fold)."""

    format: str
    kind: str
    """``base`` or ``delta``."""
    offset: int
    consumed: list[str]
    updated_at: str
    base: str
    parents: list[str]
    folds: list[str]
    """A base a compaction wrote: the chain it folds."""
    tables: list[str]
    table_bytes: list[int]
    df_replaced: bool
    """Whether the ``df`` table restates every term's count (a base), not only the terms counted."""


@dataclass(slots=True)
class StateObject:
    """A decoded version 4 state object: its header and its tables (Arrow)."""

    header: StateHeader
    tables: dict[str, pa.Table]


def _column_array(name: str, field: pa.Field, columns: Mapping[str, Any]) -> pa.Array:
    values = columns[name]
    if pa.types.is_list(field.type):
        lengths = np.asarray(columns[LIST_LENGTH_COLUMNS[name]], dtype=np.int64)
        offsets = np.zeros(lengths.size + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, type=field.type.value_type))
    if name == "minhash":
        matrix = np.ascontiguousarray(np.asarray(values, dtype="<u4"))
        width = matrix.shape[1] * 4 if matrix.ndim == 2 else 0
        offsets = np.arange(matrix.shape[0] + 1, dtype=np.int32) * width
        return pa.Array.from_buffers(pa.binary(), matrix.shape[0], [None, pa.py_buffer(offsets), pa.py_buffer(matrix)])
    if isinstance(values, np.ndarray):
        return pa.array(values, type=field.type)
    return pa.array(list(values), type=field.type)


def columns_to_table(name: str, columns: Mapping[str, Any]) -> pa.Table:
    """A state table from flat columns (lists or numpy arrays; list columns as values + lengths)."""
    schema = STATE_TABLE_SCHEMAS[name]
    return pa.Table.from_arrays([_column_array(f.name, f, columns) for f in schema], schema=schema)


def encode_state_object(header: Mapping[str, Any], tables: Mapping[str, pa.Table]) -> bytes:
    """A version 4 state object: the magic, the header as JSON, and every table of
    ``STATE_TABLE_SCHEMAS`` as a Zstandard-compressed Arrow IPC stream (missing ones empty).

    Deterministic for the same header and tables, so a blob's key can name its bytes' hash.
    """
    streams = []
    for name, schema in STATE_TABLE_SCHEMAS.items():
        table = tables.get(name)
        table = schema.empty_table() if table is None else table.cast(schema)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema, options=_IPC_OPTIONS) as writer:
            writer.write_table(table, max_chunksize=1 << 20)
        streams.append(sink.getvalue().to_pybytes())
    head = orjson.dumps({**header, "tables": list(STATE_TABLE_SCHEMAS), "table_bytes": [len(s) for s in streams]},
                        option=orjson.OPT_SORT_KEYS)
    return b"".join([STATE_OBJECT_MAGIC, len(head).to_bytes(4, "little"), head,
                     *(len(s).to_bytes(8, "little") + s for s in streams)])


def is_state_object(data: bytes) -> bool:
    """Whether ``data`` is a version 4 state object (else a JSON blob of an older version)."""
    return data[:len(STATE_OBJECT_MAGIC)] == STATE_OBJECT_MAGIC


def read_state_header(data: bytes) -> StateHeader:
    """The header of a version 4 state object, without reading its tables.

    Raises:
        StateBlobError: If it is not one, or its header is unreadable.
    """
    if not is_state_object(data):
        raise StateBlobError("not a version 4 state object")
    start = len(STATE_OBJECT_MAGIC)
    size = int.from_bytes(data[start:start + 4], "little")
    if size > MAX_STATE_HEADER_BYTES or start + 4 + size > len(data):
        raise StateBlobError("truncated state object header")
    try:
        header = orjson.loads(data[start + 4:start + 4 + size])
    except orjson.JSONDecodeError as e:
        raise StateBlobError(f"corrupt state object header: {e}") from e
    if not isinstance(header, dict) or not isinstance(header.get("tables"), list):
        raise StateBlobError("state object header is not a JSON object naming its tables")
    return header


def decode_state_object(data: bytes) -> StateObject:
    """A version 4 state object's header and tables, every table checked against its schema.

    Raises:
        StateBlobError: If it is truncated, garbled, or a table does not match its schema.
    """
    header = read_state_header(data)
    position = len(STATE_OBJECT_MAGIC) + 4 + int.from_bytes(data[5:9], "little")
    tables: dict[str, pa.Table] = {}
    view = memoryview(data)
    for name in header["tables"]:
        if position + 8 > len(data):
            raise StateBlobError(f"state object truncated before table {name!r}")
        size = int.from_bytes(data[position:position + 8], "little")
        position += 8
        if position + size > len(data):
            raise StateBlobError(f"state object truncated in table {name!r}")
        try:
            table = pa.ipc.open_stream(pa.py_buffer(view[position:position + size])).read_all()
        except (OSError, pa.ArrowException) as e:
            raise StateBlobError(f"corrupt table {name!r}: {e}") from e
        position += size
        expected = STATE_TABLE_SCHEMAS.get(name)
        if expected is not None and not table.schema.equals(expected):
            raise StateBlobError(f"table {name!r} does not match its schema")
        tables[name] = table
    if position != len(data):
        raise StateBlobError("state object has trailing bytes")
    missing = set(STATE_TABLE_SCHEMAS) - set(tables)
    if missing:
        raise StateBlobError(f"state object lacks tables {sorted(missing)}")
    return StateObject(header, tables)


def _strings(array: pa.Array | pa.ChunkedArray, vocabulary: dict[str, str]) -> list[Any]:
    """A string column as Python strings, one object per distinct value across every column
    decoded with the same ``vocabulary`` (a term in a thousand centroids is one string)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if len(array) == 0:
        return []
    if array.null_count:
        return [None if v is None else vocabulary.setdefault(v, v) for v in array.to_pylist()]
    encoded = array.dictionary_encode()
    distinct = np.array([vocabulary.setdefault(v, v) for v in encoded.dictionary.to_pylist()], dtype=object)
    return distinct[encoded.indices.to_numpy(zero_copy_only=False)].tolist()  # type: ignore[no-any-return]


def _binary_matrix(array: pa.Array | pa.ChunkedArray, width: int) -> npt.NDArray[np.uint32]:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    n = len(array)
    if n == 0:
        return np.empty((0, width), dtype=np.uint32)
    array = array.cast(pa.large_binary())
    _, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[array.offset:array.offset + n + 1]
    if not np.all(np.diff(offsets) == width * 4):
        raise StateBlobError("a recent article's signature is not the expected size")
    raw = np.frombuffer(data_buffer, dtype="<u4", count=n * width, offset=int(offsets[0]))
    return raw.reshape(n, width).astype(np.uint32)


TableColumn = list[Any] | npt.NDArray[Any]
"""One column of a state table as read: Python values, or a numpy array of numbers."""


def table_to_columns(table: pa.Table, vocabulary: dict[str, str], signature_width: int = 128
                     ) -> dict[str, TableColumn]:
    """A state table as flat columns (the inverse of :func:`columns_to_table`): strings shared
    through ``vocabulary``, numbers as numpy arrays, list columns as flat values plus lengths."""
    out: dict[str, TableColumn] = {}
    for field in table.schema:
        column = table.column(field.name)
        if pa.types.is_list(field.type) or pa.types.is_large_list(field.type):
            array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
            out[LIST_LENGTH_COLUMNS[field.name]] = array.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
            values = array.flatten()
            out[field.name] = _strings(values, vocabulary) if pa.types.is_string(values.type) or \
                pa.types.is_large_string(values.type) else values.to_numpy(zero_copy_only=False)
        elif field.name == "minhash":
            out[field.name] = _binary_matrix(column, signature_width)
        elif pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            out[field.name] = _strings(column, vocabulary)
        elif column.null_count:
            out[field.name] = column.to_pylist()
        else:
            out[field.name] = column.to_numpy()
    return out


def release_table_memory() -> None:
    """Hand the memory of freed Arrow tables back to the system now (the allocator keeps it a
    while otherwise), so a load's tables and its objects do not peak together."""
    pa.default_memory_pool().release_unused()


def fold_states(base: StateObject, deltas: Sequence[StateObject], seen_kept: int) -> StateObject:
    """The state a base and the deltas after it (in order) describe, as one base.

    Every rule is a table operation (polars), never a Python object per story, so folding runs
    off the writer's critical path (maintenance, or a background thread) and is what a restart
    runs before building its objects:

    - a story is its newest row, unless dropped after it; its members are those of its last row
      with ``members_replaced`` and every row appended since; its norms the newest of its row's
      and of later ``norms`` rows; stories keep the order they were first stored in;
    - a recent article is its newest row unless dropped after it;
    - the IDF's counts start from the newest object that restates them all, and take each
      term's newest count after it;
    - ``seen`` keeps each article's newest row, the ``seen_kept`` most recent;
    - the header is the newest object's, as a base.
    """
    objects = [base, *deltas]
    if not deltas:
        return base

    def stacked(name: str) -> pl.DataFrame:
        frames = [pl.from_arrow(o.tables[name]).with_columns(pl.lit(i, pl.Int64).alias("_seq"))
                  .with_row_index("_row") for i, o in enumerate(objects)]
        return pl.concat(frames, how="vertical_relaxed")

    def last_drop(name: str, key: str) -> pl.DataFrame:
        return stacked(name).group_by(key).agg(pl.col("_seq").max().alias("_dropped"))

    stories = stacked("stories").join(last_drop("dropped_stories", "story_id"), on="story_id", how="left")
    stories = stories.filter(pl.col("_seq") > pl.col("_dropped").fill_null(-1))
    first = stories.group_by("story_id").agg(pl.col("_seq").min().alias("_first_seq"))
    order = stories.join(first, on="story_id").filter(pl.col("_seq") == pl.col("_first_seq")) \
        .select("story_id", pl.col("_seq").alias("_order_seq"), pl.col("_row").alias("_order_row"))
    replaced = stories.filter(pl.col("members_replaced")).group_by("story_id") \
        .agg(pl.col("_seq").max().alias("_replaced_seq"))
    final = stories.sort("_seq").group_by("story_id").last() \
        .join(order, on="story_id").join(replaced, on="story_id", how="left")
    norms = stacked("norms").join(final.select("story_id", pl.col("_seq").alias("_story_seq")), on="story_id") \
        .filter(pl.col("_seq") > pl.col("_story_seq")).sort("_seq").group_by("story_id").last() \
        .select("story_id", *(pl.col(c).alias(f"_{c}") for c in ("norm_centroid", "norm_entities", "norm_docs")))
    final = final.join(norms, on="story_id", how="left").with_columns(
        *(pl.when(pl.col("_norm_docs").is_not_null()).then(pl.col(f"_{c}")).otherwise(pl.col(c)).alias(c)
          for c in ("norm_centroid", "norm_entities", "norm_docs"))
    ).sort("_order_seq", "_order_row")
    members = stacked("members").join(
        final.select("story_id", "_replaced_seq", pl.col("_seq").alias("_story_seq"), "_order_seq", "_order_row"),
        on="story_id").filter((pl.col("_seq") >= pl.col("_replaced_seq")) & (pl.col("_seq") <= pl.col("_story_seq"))) \
        .sort("_order_seq", "_order_row", "_seq", "_row")
    member_rows = members.group_by("story_id").agg(pl.len().alias("_n"))
    final = final.join(member_rows, on="story_id", how="left").with_columns(
        pl.col("_n").fill_null(0).cast(pl.Int64).alias("member_rows"), pl.lit(True).alias("members_replaced"))

    recent = stacked("recent").join(last_drop("dropped_recent", "article_id"), on="article_id", how="left")
    recent = recent.filter(pl.col("_seq") > pl.col("_dropped").fill_null(-1)).sort("_seq", "_row") \
        .group_by("article_id", maintain_order=True).last().sort("_seq", "_row")
    restated = max(i for i, o in enumerate(objects) if i == 0 or o.header.get("df_replaced"))
    df = stacked("df").filter(pl.col("_seq") >= restated).sort("_seq", "_row") \
        .group_by("term", maintain_order=True).last().sort("_seq", "_row")
    seen = stacked("seen").sort("_seq", "_row").group_by("article_id", maintain_order=True).last() \
        .sort("_seq", "_row").tail(seen_kept)

    def table(name: str, frame: pl.DataFrame) -> pa.Table:
        schema = STATE_TABLE_SCHEMAS[name]
        return frame.select([f.name for f in schema]).to_arrow().cast(schema)

    header: StateHeader = {**objects[-1].header, "kind": "base", "df_replaced": True}
    for key in ("base", "parents"):
        header.pop(key, None)
    empty = {name: STATE_TABLE_SCHEMAS[name].empty_table() for name in ("norms", "dropped_stories", "dropped_recent")}
    return StateObject(header, {
        "stories": table("stories", final), "members": table("members", members), "recent": table("recent", recent),
        "df": table("df", df), "seen": table("seen", seen), **empty,
    })
