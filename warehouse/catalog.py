"""The log tables as files: which Parquet segments a query scans, decided from listings and footers.

DuckDB reads the stored Parquet where it lies (issue 28): each log table is registered as pyarrow
datasets over its files (a local folder and S3 alike), so a query reads only the columns it names
and, through each file's row-group statistics, only the files and row groups its predicates can
match. Nothing here reads a row: a table's plan comes from a listing of its prefix and the footer
of each file (one small ranged read per file, in parallel), which also tells

- **which files are damaged**: a footer that cannot be read (truncated, garbage) or a column of
  another type than the table's is skipped and named (:func:`warehouse.damage.record_damage`); a
  file with columns the table does not know (a newer release's segment) is read, its extra
  columns left out;
- **which segments a compaction already holds**: a compacted segment names, in its footer
  (:data:`FOLDED_KEY`), every segment it holds the rows of. Those are left out even while they
  still exist (a compaction writes its segment before deleting its sources, and may die in
  between), so a reader never counts a row twice and compaction needs no lock;
- **which rows may repeat**: segments no compaction has folded yet (about the last hour) may hold
  the same row twice (a click reloaded, a rerun after a crash), so they are read through the
  table's identity window (``fresh``); compacted segments hold each row once and are read as they
  are (``settled``), which is what lets a time predicate skip whole files. A row stored again
  after its first copy was compacted counts twice until the next compaction drops it (an hour at
  most; the profiles fold counts clicks by id whatever the view says).

Cost grows with the number of files, which maintenance keeps small: segments are compacted hourly
and a closed day's compacted segments are merged into one (:mod:`warehouse.maintenance`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from warehouse import layout
from warehouse.damage import describe_error, record_damage
from warehouse.schemas import (
    ARTICLE_LINKS_SCHEMA,
    ARTICLES_SCHEMA,
    CLICKS_SCHEMA,
    FETCHES_SCHEMA,
    LISTINGS_SCHEMA,
    STORY_CHANGES_SCHEMA,
)
from warehouse.store import LocalStore, ObjectStore, S3Store, arrow_filesystem

COMPACT_PREFIX = "compact-"
"""Compacted segments are named ``compact-<content hash>.parquet`` in the folder of their sources."""
FOLDED_KEY = b"newsroom.folded"
"""Parquet key-value metadata of a compacted segment: a JSON list of the names (last key part) of
the segments whose rows it holds."""
FOOTER_THREADS = 16
"""Footers read at once: a local read takes microseconds, an S3 one a round trip."""


@dataclass(frozen=True, slots=True)
class LogTable:
    """One append-only log of the store and how its rows are told apart.

    Attributes:
        identity: Columns that name a row; copies of a row (same identity) count once, the first by
            ``order``. Empty for a log whose rows are unique by construction (story changes are
            keyed by their writer's offset).
        order: Which copy of a row counts.
        time_column: The instant a row happened, which time predicates filter on.
        merge_sort: How a closed day's merged segment is sorted (:mod:`warehouse.maintenance`).
        compact_identity: The columns compaction tells rows apart by (a row stored twice is
            written once, the first by ``compact_sort``).
        compact_sort: The order of a compacted segment's rows.
    """

    name: str
    prefix: str
    schema: pa.Schema
    identity: tuple[str, ...]
    order: tuple[str, ...]
    time_column: str
    merge_sort: tuple[str, ...]
    compact_identity: tuple[str, ...]
    compact_sort: tuple[str, ...]


LOG_TABLES: dict[str, LogTable] = {t.name: t for t in (
    LogTable("articles", layout.ARTICLES_PREFIX, ARTICLES_SCHEMA, ("article_id", "version"),
             ("first_seen_at", "content_hash"), "first_seen_at", ("article_id", "version", "first_seen_at"),
             ("article_id", "version", "content_hash"), ("first_seen_at", "article_id", "version", "content_hash")),
    LogTable("story_changes", layout.STORY_CHANGES_PREFIX, STORY_CHANGES_SCHEMA, (), ("offset",), "changed_at",
             ("offset",), ("change_id",), ("offset",)),
    LogTable("clicks", layout.CLICKS_PREFIX, CLICKS_SCHEMA, ("click_id",), ("clicked_at", "surface", "position"),
             "clicked_at", ("clicked_at", "click_id"), ("click_id",), ("clicked_at", "click_id")),
    LogTable("article_links", layout.ARTICLE_LINKS_PREFIX, ARTICLE_LINKS_SCHEMA, (), ("first_seen_at",),
             "first_seen_at", ("first_seen_at", "article_id"), (), ("first_seen_at", "article_id")),
    LogTable("fetches", layout.FETCHES_PREFIX, FETCHES_SCHEMA, ("fetch_id",), ("fetched_at",), "fetched_at",
             ("fetched_at", "fetch_id"), ("fetch_id",), ("fetched_at", "fetch_id")),
    LogTable("listings", layout.LISTINGS_PREFIX, LISTINGS_SCHEMA, ("article_id",), ("listed_at", "story_id"),
             "listed_at", ("listed_at", "article_id", "story_id"), ("article_id", "story_id", "listed_at"),
             ("listed_at", "article_id", "story_id")),
)}


def is_compacted(key: str) -> bool:
    """Whether a segment key names a compacted segment.

    >>> is_compacted("log/clicks/date=2026-12-03/compact-ab12.parquet"), is_compacted("log/clicks/date=2026-12-03/ab12.parquet")
    (True, False)
    """
    return key.rsplit("/", 1)[-1].startswith(COMPACT_PREFIX)


def folded_metadata(sources: Iterable[str]) -> dict[bytes, bytes]:
    """The footer metadata a compacted segment carries: the names of the segments it holds."""
    return {FOLDED_KEY: json.dumps(sorted({k.rsplit("/", 1)[-1] for k in sources})).encode()}


def held_by_compacted(store: ObjectStore, keys: Iterable[str]) -> set[str]:
    """The names of the segments the compacted ones among ``keys`` say they hold (their footers);
    a footer that cannot be read holds nothing (its rows are read or written again, never lost)."""
    fs, base = filesystem_of(store)
    names: set[str] = set()
    for key in keys:
        if not is_compacted(key):
            continue
        try:
            raw = (pq.read_metadata(f"{base}/{key}", filesystem=fs).metadata or {}).get(FOLDED_KEY)
            names.update(str(n) for n in json.loads(raw)) if raw else None
        except (pa.ArrowException, OSError, ValueError, TypeError):
            continue
    return names


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """What a segment's footer says: its rows, what it folded, the range of its offsets (story changes)."""

    key: str
    rows: int
    folded: frozenset[str] | None
    """Names of the segments a compacted segment holds; None for a compacted segment written before
    segments said so (and for every segment that is not compacted)."""
    offsets: tuple[int, int] | None = None
    extra_columns: tuple[str, ...] = ()

    @property
    def folder(self) -> str:
        return self.key.rsplit("/", 1)[0]

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def is_compacted(self) -> bool:
        return self.name.startswith(COMPACT_PREFIX)


@dataclass(frozen=True, slots=True)
class TablePlan:
    """The files one log table is read from.

    ``settled`` files hold no row twice (among themselves), so they are read as they are, predicates
    pushed down to their statistics; ``fresh`` files (segments no compaction folded yet, and
    compacted ones written before compactions named what they hold, in the same folder) are read
    through the table's identity window. ``files`` is every live,
    readable segment; ``skipped`` the keys left out as damaged.
    """

    table: LogTable
    settled: tuple[str, ...]
    fresh: tuple[str, ...]
    files: tuple[SegmentFile, ...]
    skipped: tuple[str, ...] = ()
    superseded: tuple[str, ...] = field(default=())
    """Segments a compacted segment holds that still exist (a compaction died before deleting them)."""


def _types_match(stored: pa.DataType, wanted: pa.DataType) -> bool:
    """Equal types, list item names aside (Parquet names a list's items ``element``)."""
    if pa.types.is_list(stored) and pa.types.is_list(wanted):
        return _types_match(stored.value_type, wanted.value_type)
    return bool(stored.equals(wanted))


def checked_metadata(fs: pafs.FileSystem, path: str, schema: pa.Schema) -> pq.FileMetaData:
    """A Parquet file's footer, checked against ``schema``: every column the schema has and the file
    holds is of the schema's type. Columns the schema lacks are allowed (a newer release's).

    Raises:
        ValueError: The footer cannot be read, or a column is of another type; the message says which.
    """
    try:
        metadata = pq.read_metadata(path, filesystem=fs)
        stored = metadata.schema.to_arrow_schema()
    except (pa.ArrowException, OSError, ValueError) as e:
        raise ValueError(f"unreadable Parquet footer: {describe_error(e)}") from e
    for wanted in schema:
        index = stored.get_field_index(wanted.name)
        if index >= 0 and not _types_match(stored.field(index).type, wanted.type):
            raise ValueError(f"column {wanted.name} is {stored.field(index).type}, the table's is {wanted.type}")
    return metadata


def footer_problem(store: ObjectStore, key: str, schema: pa.Schema) -> str | None:
    """What is wrong with a stored Parquet object's footer as ``schema`` (``corrupt: ...``); None
    when it is fine or absent. Reads the footer only: cheap however large the table."""
    fs, base = filesystem_of(store)
    try:
        checked_metadata(fs, f"{base}/{key}", schema)
    except ValueError as e:
        return None if store.head(key) is None else f"corrupt: {e}"
    return None


def read_footer(fs: pafs.FileSystem, path: str, key: str, table: LogTable) -> SegmentFile:
    """One segment's footer, checked against the table's schema (:func:`checked_metadata`).

    Raises:
        ValueError: The footer cannot be read, a column has another type than the table's, or a
            compacted segment's list of what it holds cannot be read.
    """
    metadata = checked_metadata(fs, path, table.schema)
    extra = tuple(n for n in metadata.schema.to_arrow_schema().names if table.schema.get_field_index(n) < 0)
    folded = None
    if is_compacted(key):
        raw = (metadata.metadata or {}).get(FOLDED_KEY)
        if raw is not None:
            try:
                folded = frozenset(str(n) for n in json.loads(raw))
            except (ValueError, TypeError) as e:
                raise ValueError(f"unreadable {FOLDED_KEY.decode()} metadata: {describe_error(e)}") from e
    offsets = _offset_range(metadata) if table.name == "story_changes" else None
    return SegmentFile(key, metadata.num_rows, folded, offsets, extra)


def _offset_range(metadata: pq.FileMetaData) -> tuple[int, int] | None:
    """The smallest and largest ``offset`` in a story-change segment, from its row-group statistics."""
    low = high = None
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            if column.path_in_schema != "offset":
                continue
            stats = column.statistics
            if stats is None or not stats.has_min_max:
                return None
            low = stats.min if low is None else min(low, stats.min)
            high = stats.max if high is None else max(high, stats.max)
    return (int(low), int(high)) if low is not None and high is not None else None


def _read_footers(store: ObjectStore, fs: pafs.FileSystem, base: str, keys: list[str], table: LogTable
                  ) -> list[SegmentFile | ValueError | None]:
    """Each key's footer (a ValueError where it is damaged, None where the object vanished since the listing)."""

    def one(key: str) -> SegmentFile | ValueError | None:
        try:
            return read_footer(fs, f"{base}/{key}", key, table)
        except ValueError as e:
            if isinstance(e.__cause__, OSError) and store.head(key) is None:
                return None  # compacted or expired since the listing
            return e

    if len(keys) <= 1:
        return [one(k) for k in keys]
    with ThreadPoolExecutor(max_workers=min(FOOTER_THREADS, len(keys))) as pool:
        return list(pool.map(one, keys))


def plan_table(store: ObjectStore, table: LogTable) -> TablePlan:
    """Which files ``table`` is read from (see the module docstring); damaged ones are recorded.

    A story-change segment is also left out when a compacted one holds its offsets: compacted
    story-change segments written before they named their sources say what they hold by their
    offsets' range (the keys of the segments they fold are those offsets).
    """
    fs, base = filesystem_of(store)
    keys = [k for k in store.list(table.prefix) if k.endswith(".parquet")]
    files: list[SegmentFile] = []
    skipped: list[str] = []
    for key, found in zip(keys, _read_footers(store, fs, base, keys, table), strict=True):
        if isinstance(found, ValueError):
            record_damage(key, f"corrupt: {found}", "skipped")
            skipped.append(key)
        elif found is not None:
            files.append(found)
    by_folder: dict[str, list[SegmentFile]] = defaultdict(list)
    for f in files:
        by_folder[f.folder].append(f)
    settled: list[str] = []
    fresh: list[str] = []
    live: list[SegmentFile] = []
    superseded: list[str] = []
    for folder in sorted(by_folder):
        members = by_folder[folder]
        folded = set().union(*(f.folded or () for f in members))
        ranges = [f.offsets for f in members if f.is_compacted and f.folded is None and f.offsets is not None]
        kept = []
        for f in members:
            if f.name in folded or (not f.is_compacted and f.offsets is not None
                                    and any(lo <= f.offsets[0] and f.offsets[1] <= hi for lo, hi in ranges)):
                superseded.append(f.key)
            else:
                kept.append(f)
        live.extend(kept)
        # Compacted segments of one folder never share a row (each leaves out what the others
        # hold, and what it holds of a segment written after it, the next compaction drops), so
        # only segments no compaction folded yet are read through the identity window, with the
        # compacted ones of before segments named what they hold, which may repeat any row.
        unfolded = [f for f in kept if not f.is_compacted]
        legacy = [f for f in kept if f.is_compacted and f.folded is None] if unfolded else []
        for f in kept:
            windowed = table.identity and (f in unfolded or f in legacy)
            (fresh if windowed else settled).append(f.key)
    return TablePlan(table, tuple(settled), tuple(fresh), tuple(live), tuple(skipped), tuple(superseded))


def dataset_of(store: ObjectStore, keys: Iterable[str], schema: pa.Schema) -> ds.Dataset | pa.Table:
    """A pyarrow dataset over the objects ``keys`` (an empty table when there are none).

    Files with columns ``schema`` lacks are read without them; a column the schema has and a file
    lacks (an older segment) reads as null.
    """
    paths = list(keys)
    if not paths:
        return schema.empty_table()
    fs, base = filesystem_of(store)
    return ds.FileSystemDataset.from_paths([f"{base}/{k}" for k in paths], schema=schema,
                                           format=ds.ParquetFileFormat(), filesystem=fs)


def filesystem_of(store: ObjectStore) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem over the store and the path of its root on it.

    LocalStore and S3Store use pyarrow's own (ranged reads); any other ObjectStore is wrapped
    (:class:`StoreFileSystem`), reading each object whole.
    """
    if isinstance(store, LocalStore | S3Store):
        return arrow_filesystem(store)
    return pafs.PyFileSystem(StoreFileSystem(store)), "store"


class StoreFileSystem(pafs.FileSystemHandler):
    """A read-only pyarrow filesystem over any ObjectStore (paths are ``store/<key>``)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def _key(self, path: str) -> str:
        return path.removeprefix("store/").lstrip("/")

    def get_type_name(self) -> str:
        return "newsroom-store"

    def equals(self, other: object) -> bool:
        return isinstance(other, StoreFileSystem) and other.store is self.store

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        infos = []
        for path in paths:
            etag = self.store.head(self._key(path))
            infos.append(pafs.FileInfo(path, pafs.FileType.File if etag is not None else pafs.FileType.NotFound))
        return infos

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        prefix = self._key(selector.base_dir).rstrip("/") + "/"
        return [pafs.FileInfo(f"store/{k}", pafs.FileType.File) for k in self.store.list(prefix)]

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.open_input_file(path)

    def open_input_file(self, path: str) -> pa.NativeFile:
        from warehouse.errors import ObjectNotFoundError

        try:
            return pa.BufferReader(self.store.get(self._key(path)).data)
        except ObjectNotFoundError as e:
            raise FileNotFoundError(path) from e

    def _read_only(self, *args: object) -> None:
        raise OSError("the store's pyarrow view is read-only")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _read_only
    move = copy_file = open_output_stream = open_append_stream = _read_only


def plans_by_name(store: ObjectStore, names: Iterable[str]) -> Mapping[str, TablePlan]:
    """The plans of the named log tables."""
    return {name: plan_table(store, LOG_TABLES[name]) for name in names}
