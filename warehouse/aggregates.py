"""Rank's story aggregates in the store (issue 15): layered Parquet tables, a manifest, a pointer.

Everything lives under ``state/rank/``:

- ``aggregates.json``: the pointer, ``{"seq", "manifest"}``, replaced only with a conditional
  put (If-Match on the ETag read, If-None-Match for the first): of two rank cycles folding at once,
  the second to commit gets 412 and its fold is dropped.
- ``manifest-<seq>-<hash>.json``: one fold's result: the instant it folded to, what it read (each
  language's next change offset, the article segments it consumed), the fingerprints of the rules
  and registry it assumed, and the keys of its tables.
- ``<table>-<seq>-<hash>.parquet``: immutable table objects named by their bytes, so a rerun after
  a crash writes the same keys and a dead run's objects are never in the way. ``stories`` and
  ``members`` are layered: a base, then one delta per fold (rows that changed, and tombstones);
  the newest layer holding a key wins. ``pending``, ``ledger`` and ``aliases`` are small and
  written whole.

A reader that finds the pointer, the manifest or a table unreadable names it
(:func:`warehouse.damage.record_damage`) and rebuilds from the logs (issue 16).
"""

from __future__ import annotations

import bisect
import hashlib
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.damage import describe_error, record_damage
from warehouse.errors import (
    AggregatesUnreadableError,
    CorruptObjectError,
    ObjectNotFoundError,
    PreconditionFailedError,
    WarehouseError,
)
from warehouse.schemas import AGGREGATE_MEMBERS_SCHEMA, STORY_AGGREGATES_SCHEMA
from warehouse.store import LocalStore, ObjectStore, S3Store, arrow_filesystem
from warehouse.tables import check_schema, evolve_to_schema, parquet_bytes_to_table

AGGREGATES_PREFIX = "state/rank/"
POINTER_KEY = f"{AGGREGATES_PREFIX}aggregates.json"
MANIFEST_SCHEMA = "newsroom.story_aggregates/1"
MEMBER_ROW_GROUP_ROWS = 4096
"""Members are written sorted by story in row groups this long, so a page's stories are read
a row group at a time, not the whole table (``read_members``)."""


class LogProgress(TypedDict):
    """How far a fold read an append-only log of segments: the ones read whole, and the instant
    each one read in part was read up to (ISO 8601)."""

    consumed: list[str]
    partial: dict[str, str]


class MemberCacheEntry(TypedDict):
    key: str
    base: str
    """The member base it reflects."""
    layers: int
    """How many member layers it reflects."""


class AggregateTableKeys(TypedDict, total=False):
    """The objects of one fold: story and member layers (base first), the small tables whole."""

    stories: list[str]
    members: list[str]
    pending: str
    ledger: str
    aliases: str
    member_cache: MemberCacheEntry


class Manifest(AggregateTableKeys, total=False):
    """What one committed fold of the aggregates is (``state/rank/manifests/``, ``MANIFEST_SCHEMA``)."""

    schema: str
    seq: int
    as_of: str
    rules: str
    """The fingerprint of the windows it was folded with."""
    registry: str
    """The fingerprint of the registry it was folded with."""
    embedding_model: str
    offsets: dict[str, int]
    """Each language's next story change offset to fold."""
    articles: LogProgress
    listings: LogProgress


class AggregatesPointer(TypedDict, total=False):
    """The pointer to the committed manifest (``POINTER_KEY``); ``rebuild`` asks the next cycle to
    rebuild from the logs (``request_rebuild``)."""

    seq: int
    manifest: str
    as_of: str
    rebuild: str


@dataclass(slots=True)
class ReadCounter:
    """Bytes and objects a cycle read from the store, by what they were (the bench reports them)."""

    bytes: dict[str, int] = field(default_factory=dict)
    objects: dict[str, int] = field(default_factory=dict)

    def add(self, what: str, size: int) -> None:
        self.bytes[what] = self.bytes.get(what, 0) + size
        self.objects[what] = self.objects.get(what, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.bytes.values())


def table_key(kind: str, seq: int, data: bytes) -> str:
    """``state/rank/<kind>-<seq>-<hash>.parquet``, named by the bytes it holds.

    >>> table_key("stories", 7, b"x")
    'state/rank/stories-0000000007-82eb5f36d44e01d4c0a8.parquet'
    """
    digest = hashlib.blake2b(data, digest_size=10).hexdigest()
    return f"{AGGREGATES_PREFIX}{kind}-{seq:010d}-{digest}.parquet"


def manifest_key(seq: int, data: bytes) -> str:
    digest = hashlib.blake2b(data, digest_size=10).hexdigest()
    return f"{AGGREGATES_PREFIX}manifest-{seq:010d}-{digest}.json"


def seq_of_key(key: str) -> int | None:
    """The fold sequence number an object key under ``state/rank/`` carries.

    >>> seq_of_key("state/rank/members-0000000012-ab.parquet"), seq_of_key(POINTER_KEY)
    (12, None)
    """
    name = key.rsplit("/", 1)[-1]
    parts = name.split("-")
    return int(parts[1]) if len(parts) >= 3 and parts[1].isdigit() else None


def _to_parquet(table: pa.Table, row_group_rows: int | None = None) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", row_group_size=row_group_rows)
    return sink.getvalue()


def put_table(store: ObjectStore, kind: str, seq: int, table: pa.Table, schema: pa.Schema, *,
              row_group_rows: int | None = None, reuse: str | None = None) -> str:
    """Write an immutable table object; a rerun that finds identical bytes under the key is done.

    Args:
        reuse: The key of this table in the fold before: kept, and nothing written, when it holds
            the same bytes (the key's hash part says so).
    """
    data = _to_parquet(check_schema(table, schema), row_group_rows)
    key = table_key(kind, seq, data)
    if reuse is not None and reuse.rsplit("-", 1)[-1] == key.rsplit("-", 1)[-1]:
        return reuse
    try:
        store.put(key, data, if_none_match=True)
    except PreconditionFailedError:
        pass  # the same bytes are already there: the key is their hash
    return key


def read_table_object(store: ObjectStore, key: str, schema: pa.Schema, counter: ReadCounter | None = None,
                      what: str = "table") -> pa.Table:
    """One whole table object.

    Raises:
        AggregatesUnreadableError: Missing or corrupt (recorded).
    """
    try:
        data = store.get(key).data
    except ObjectNotFoundError as e:
        record_damage(key, "missing: named by the rank aggregates' manifest", "aggregates rebuilt from the logs")
        raise AggregatesUnreadableError("a table of the aggregates is missing", key=key) from e
    if counter is not None:
        counter.add(what, len(data))
    try:
        return evolve_to_schema(parquet_bytes_to_table(data, key), schema, key=key)
    except WarehouseError as e:
        record_damage(key, f"corrupt: {e}", "aggregates rebuilt from the logs")
        raise AggregatesUnreadableError("a table of the aggregates is unreadable", key=key) from e


def read_pointer(store: ObjectStore) -> tuple[AggregatesPointer | None, str | None]:
    """The pointer and its ETag; (None, None) before the first fold, (None, etag) when it is
    corrupt (recorded; the next commit replaces it with If-Match on that ETag)."""
    try:
        obj = store.get(POINTER_KEY)
    except ObjectNotFoundError:
        return None, None
    try:
        pointer = json.loads(obj.data)
        if not isinstance(pointer, dict) or not isinstance(pointer.get("manifest"), str):
            raise ValueError("not an aggregates pointer")
        int(pointer["seq"])
    except (ValueError, TypeError, KeyError, RecursionError) as e:
        record_damage(POINTER_KEY, f"corrupt: {describe_error(e)}", "aggregates rebuilt from the logs")
        return None, obj.etag
    return cast(AggregatesPointer, pointer), obj.etag  # its keys checked above


def read_manifest(store: ObjectStore, key: str, counter: ReadCounter | None = None) -> Manifest:
    """A manifest the pointer names.

    Raises:
        AggregatesUnreadableError: Missing or corrupt (recorded).
    """
    try:
        data = store.get(key).data
    except ObjectNotFoundError as e:
        record_damage(key, "missing: named by the rank aggregates' pointer", "aggregates rebuilt from the logs")
        raise AggregatesUnreadableError("the aggregates' manifest is missing", key=key) from e
    if counter is not None:
        counter.add("manifest", len(data))
    try:
        manifest = json.loads(data)
        if not isinstance(manifest, dict) or manifest.get("schema") != MANIFEST_SCHEMA:
            raise ValueError("not a story aggregates manifest")
        for name in ("stories", "members"):
            if not isinstance(manifest.get(name), list) or not manifest[name]:
                raise ValueError(f"no {name} tables")
    except (ValueError, TypeError, RecursionError) as e:
        record_damage(key, f"corrupt: {describe_error(e)}", "aggregates rebuilt from the logs")
        raise AggregatesUnreadableError("the aggregates' manifest is unreadable", key=key) from e
    return cast(Manifest, manifest)  # its schema and tables checked above


def commit_manifest(store: ObjectStore, manifest: Manifest, etag: str | None,
                    before_pointer: Any = None) -> tuple[str, str]:
    """Write the manifest, then move the pointer to it, fenced.

    Args:
        etag: The pointer's ETag as read (None: there was none, so If-None-Match).
        before_pointer: Called between the two puts (crash tests).

    Returns:
        The manifest's key, and the pointer's new ETag.

    Raises:
        PreconditionFailedError: Another fold moved the pointer first.
    """
    data = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    key = manifest_key(int(manifest["seq"]), data)
    try:
        store.put(key, data, if_none_match=True, content_type="application/json")
    except PreconditionFailedError:
        pass  # identical bytes already there
    if before_pointer is not None:
        before_pointer()
    pointer = json.dumps({"seq": int(manifest["seq"]), "manifest": key, "as_of": manifest["as_of"]},
                         sort_keys=True).encode()
    new_etag = store.put(POINTER_KEY, pointer, if_match=etag, if_none_match=etag is None,
                         content_type="application/json")
    return key, new_etag


def request_rebuild(store: ObjectStore, reason: str) -> bool:
    """Ask the next rank cycle to rebuild the aggregates from the logs (``newsroom doctor`` after it
    rewinds a writer, whose articles are then decided again: reassignments a fold cannot see).
    The pointer keeps its sequence number, so objects written before stay older than what follows.

    Returns:
        False when there are no aggregates (the next cycle builds them anyway).

    Raises:
        PreconditionFailedError: A cycle moved the pointer meanwhile; ask again.
    """
    try:
        obj = store.get(POINTER_KEY)
    except ObjectNotFoundError:
        return False
    pointer, etag = read_pointer(store)
    seq = int(pointer["seq"]) if pointer is not None else 0
    data = json.dumps({**(pointer or {"seq": seq, "manifest": "", "as_of": ""}), "rebuild": reason},
                      sort_keys=True).encode()
    store.put(POINTER_KEY, data, if_match=etag or obj.etag, content_type="application/json")
    return True


# --- Layered tables -------------------------------------------------------------------------------

def _latest(frames: Sequence[pl.DataFrame], keys: list[str]) -> pl.DataFrame:
    """The newest layer's row for each key (layers oldest first), tombstones dropped.

    A layer's rows are kept where no newer layer holds their key: the base is filtered by the keys
    of the deltas (small), never sorted as a whole.
    """
    if not frames:
        raise ValueError("no layers")
    key = pl.concat_str(keys, separator="\x1f") if len(keys) > 1 else pl.col(keys[0])
    kept: list[pl.DataFrame] = []
    newer: pl.Series | None = None
    for frame in reversed(frames):
        frame = frame.unique(subset=keys, keep="last", maintain_order=True)
        kept.append(frame if newer is None else frame.filter(~key.is_in(newer.implode())))
        ids = frame.select(key.alias("_key"))["_key"]
        newer = ids if newer is None else pl.concat([newer, ids])
    return pl.concat(list(reversed(kept)), how="vertical_relaxed").filter(~pl.col("is_removed"))


def read_story_rows(store: ObjectStore, keys: Sequence[str], counter: ReadCounter | None = None) -> pl.DataFrame:
    """Every story row: the base and its deltas, the newest layer winning.

    Raises:
        AggregatesUnreadableError: A layer is missing or corrupt (recorded).
    """
    frames = []
    for key in keys:
        table = read_table_object(store, key, STORY_AGGREGATES_SCHEMA, counter, "stories")
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        frames.append(frame)
    return _latest(frames, ["story_id"])


def _open_parquet(store: ObjectStore, key: str) -> pq.ParquetFile:
    """A Parquet file read by byte ranges where the store allows it (local or S3), else whole."""
    if isinstance(store, LocalStore | S3Store):
        fs, base = arrow_filesystem(store)
        return pq.ParquetFile(fs.open_input_file(f"{base}/{key}"), pre_buffer=False)
    return pq.ParquetFile(io.BytesIO(store.get(key).data), pre_buffer=False)


def _row_groups_for(meta: pq.FileMetaData, column: int, wanted: Sequence[str]) -> list[int]:
    """Row groups whose ``story_id`` range holds one of ``wanted`` (sorted)."""
    groups = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max:
            groups.append(g)
            continue
        i = bisect.bisect_left(wanted, stats.min)
        if i < len(wanted) and wanted[i] <= stats.max:
            groups.append(g)
    return groups


def _read_layer(store: ObjectStore, key: str, wanted: Sequence[str], cols: list[str], schema: pa.Schema,
                counter: ReadCounter | None, what: str) -> pl.DataFrame:
    """The rows of one member layer (or the cache) for ``wanted`` stories, row group by row group."""
    try:
        parquet = _open_parquet(store, key)
        meta = parquet.metadata
        groups = _row_groups_for(meta, parquet.schema_arrow.get_field_index("story_id"), wanted)
        table = parquet.read_row_groups(groups, columns=cols, use_threads=False) if groups else schema.empty_table()
    except (FileNotFoundError, ObjectNotFoundError) as e:
        record_damage(key, "missing: named by the rank aggregates' manifest", "aggregates rebuilt from the logs")
        raise AggregatesUnreadableError("a members table is missing", key=key) from e
    except (pa.ArrowException, OSError, ValueError, CorruptObjectError) as e:
        record_damage(key, f"corrupt: {describe_error(e)}", "aggregates rebuilt from the logs")
        raise AggregatesUnreadableError("a members table is unreadable", key=key) from e
    if counter is not None:
        positions = [parquet.schema_arrow.get_field_index(c) for c in cols]
        counter.add(what, meta.serialized_size + sum(meta.row_group(g).column(i).total_compressed_size
                                                     for g in groups for i in positions if i >= 0))
    frame = pl.from_arrow(table.cast(schema))
    assert isinstance(frame, pl.DataFrame)
    return frame.filter(pl.col("story_id").is_in(wanted))


@dataclass(frozen=True, slots=True)
class MemberCache:
    """Every member of some stories as of the first ``layers`` member layers (base ``base``): the
    members a cycle's pages read, written after them for the next cycle (a cache: dropping it
    changes nothing read, only what reading costs)."""

    key: str
    base: str
    layers: int
    stories: frozenset[str]

    def covers(self, keys: Sequence[str]) -> bool:
        """Whether ``keys`` are these layers plus newer ones (no compaction since)."""
        return bool(keys) and keys[0] == self.base and self.layers <= len(keys)


def read_member_cache(store: ObjectStore, entry: MemberCacheEntry | None, counter: ReadCounter | None = None
                      ) -> MemberCache | None:
    """The cache a manifest names (its story ids read from its ``story_id`` column); None when there
    is none or it cannot be read (it is only a cache: the layers answer)."""
    if not entry:
        return None
    try:
        parquet = _open_parquet(store, str(entry["key"]))
        column = parquet.read(columns=["story_id"], use_threads=False).column("story_id")
        if counter is not None:
            meta = parquet.metadata
            counter.add("member cache", meta.serialized_size + sum(
                meta.row_group(g).column(0).total_compressed_size for g in range(meta.num_row_groups)))
        return MemberCache(str(entry["key"]), str(entry["base"]), int(entry["layers"]),
                           frozenset(column.unique().to_pylist()))
    except (FileNotFoundError, ObjectNotFoundError, pa.ArrowException, OSError, ValueError, KeyError, TypeError):
        return None


def read_members(store: ObjectStore, keys: Sequence[str], story_ids: Iterable[str],
                 columns: Sequence[str] | None = None, counter: ReadCounter | None = None,
                 cache: MemberCache | None = None) -> pl.DataFrame:
    """The members of some stories, newest layer winning, read a row group at a time: only the row
    groups whose story range holds one of them. Stories the ``cache`` holds are read from it and
    the layers written after it, never from the base.

    Args:
        keys: The members' layers, oldest first.
        story_ids: The stories.
        columns: Columns to read (``story_id``, ``article_id`` and ``is_removed`` always are).
        cache: The member cache, when the manifest names one.

    Raises:
        AggregatesUnreadableError: A layer is missing or corrupt (recorded).
    """
    wanted = sorted(set(story_ids))
    names = AGGREGATE_MEMBERS_SCHEMA.names
    cols = names if columns is None else [c for c in names if c in {"story_id", "article_id", "is_removed",
                                                                     *columns}]
    schema = pa.schema([AGGREGATE_MEMBERS_SCHEMA.field(c) for c in cols])
    cached = sorted(s for s in wanted if cache is not None and cache.covers(keys) and s in cache.stories)
    rest = sorted(set(wanted) - set(cached))
    frames = []
    if cached:
        assert cache is not None
        layers = [_read_layer(store, cache.key, cached, cols, schema, counter, "members")]
        layers += [_read_layer(store, key, cached, cols, schema, counter, "members") for key in keys[cache.layers:]]
        frames.append(_latest(layers, ["story_id", "article_id"]))
    if rest:
        layers = [_read_layer(store, key, rest, cols, schema, counter, "members") for key in keys]
        frames.append(_latest(layers, ["story_id", "article_id"]))
    if not frames:
        empty = pl.from_arrow(schema.empty_table())
        assert isinstance(empty, pl.DataFrame)
        return empty
    return pl.concat(frames, how="vertical_relaxed")


def read_all_members(store: ObjectStore, keys: Sequence[str], counter: ReadCounter | None = None) -> pl.DataFrame:
    """Every member row (compaction)."""
    frames = []
    for key in keys:
        table = read_table_object(store, key, AGGREGATE_MEMBERS_SCHEMA, counter, "members")
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        frames.append(frame)
    return _latest(frames, ["story_id", "article_id"])


def frame_to_table(frame: pl.DataFrame, schema: pa.Schema) -> pa.Table:
    """A polars frame as an Arrow table of ``schema`` (columns in its order)."""
    return frame.select(schema.names).to_arrow().cast(schema)
