"""Reading what the logs gained for the aggregates: story changes, articles, listings."""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from newsroom.times import parse_iso
from transforms.embedding import is_current_embedding
from transforms.story_aggregates import ROW_FIELDS, FoldRow, quantize_embedding_column
from transforms.story_fold import ChangeRow, ListingRow
from warehouse import layout
from warehouse.aggregates import (
    LogProgress,
    ReadCounter,
)
from warehouse.catalog import held_by_compacted, is_compacted
from warehouse.damage import describe_error, record_damage
from warehouse.errors import (
    CorruptObjectError,
    ObjectNotFoundError,
    SchemaMismatchError,
)
from warehouse.schemas import (
    ARTICLES_SCHEMA,
    LISTINGS_SCHEMA,
    STORY_CHANGES_SCHEMA,
)
from warehouse.store import ObjectStore
from warehouse.tables import list_segments

_CHANGE_COLUMNS = ["offset", "kind", "story_id", "article_id", "copy_of", "other_story_id", "changed_at", "language"]
_ARTICLE_COLUMNS = [c for c in ROW_FIELDS if c not in ("embedding_q", "embedding_scale")] + ["embedding",
                                                                                             "embedding_model"]


# --- Reading the logs -----------------------------------------------------------------------------

def _read_segment(store: ObjectStore, key: str, schema: pa.Schema, columns: list[str] | None,
                  counter: ReadCounter | None, what: str) -> pa.Table | None:
    """One log segment, decoded for ``columns`` only (all of ``schema`` when None; a column an
    older segment lacks reads as nulls, one a newer release added is left out); None when it
    vanished or is damaged (recorded, skipped)."""
    try:
        data = store.get(key).data
    except ObjectNotFoundError:
        return None
    if counter is not None:
        counter.add(what, len(data))
    wanted = pa.schema([schema.field(c) for c in (columns or schema.names)])
    try:
        parquet = pq.ParquetFile(io.BytesIO(data), pre_buffer=False)
        present = [c for c in wanted.names if c in parquet.schema_arrow.names]
        table = parquet.read(columns=present, use_threads=False)
        table = pa.table({f.name: table.column(f.name) if f.name in present else pa.nulls(table.num_rows, f.type)
                          for f in wanted}).cast(wanted)
    except (pa.ArrowException, OSError, ValueError, CorruptObjectError, SchemaMismatchError) as e:
        record_damage(key, f"corrupt: unreadable Parquet: {describe_error(e)}", "skipped")
        return None
    return table


def _change_segments(store: ObjectStore) -> dict[str, list[tuple[int | None, str]]]:
    """Change segment keys by language: (first offset, key); a compacted one has no offset."""
    out: dict[str, list[tuple[int | None, str]]] = defaultdict(list)
    for key in list_segments(store, layout.STORY_CHANGES_PREFIX):
        folder, name = key.rsplit("/", 1)
        language = folder.rsplit("language=", 1)[-1]
        stem = name.removesuffix(".parquet")
        out[language].append((int(stem) if stem.isdigit() else None, key))
    return out


def new_changes(store: ObjectStore, offsets: Mapping[str, int], counter: ReadCounter | None,
                 everything: bool) -> dict[str, list[ChangeRow]]:
    """Each language's change rows at or past its consumed offset (every row with
    ``everything``), in offset order, one row per offset."""
    out: dict[str, list[ChangeRow]] = {}
    for language, segments in sorted(_change_segments(store).items()):
        start = 0 if everything else int(offsets.get(language, 0))
        numbered = sorted(s for s in segments if s[0] is not None)
        keys = [k for first, k in segments if first is None] if everything else []
        # The last segment that starts before ``start`` may run past it (a fold that stopped mid-way).
        before = [k for first, k in numbered if first is not None and first < start]
        keys += before[-1:] if not everything else before
        keys += [k for first, k in numbered if first is not None and first >= start]
        rows: dict[int, ChangeRow] = {}
        for key in keys:
            table = _read_segment(store, key, STORY_CHANGES_SCHEMA, _CHANGE_COLUMNS, counter, "changes")
            if table is None:
                continue
            for row in cast(list[ChangeRow], table.to_pylist()):  # STORY_CHANGES_SCHEMA rows
                if row["offset"] is not None and row["offset"] >= start and row["offset"] not in rows:
                    rows[row["offset"]] = row
        if rows:
            out[language] = [rows[o] for o in sorted(rows)]
    return out


def split_at_now(changes: Mapping[str, list[ChangeRow]], now: datetime
                 ) -> tuple[list[ChangeRow], list[ChangeRow], dict[str, int]]:
    """(the prefix of each language's changes up to the first one after ``now``, the later ones at
    or before ``now``, each language's next offset after its prefix)."""
    prefix, later, next_offset = [], [], {}
    for language, rows in sorted(changes.items()):
        cut = next((i for i, r in enumerate(rows) if r["changed_at"] > now), len(rows))
        prefix += rows[:cut]
        later += [r for r in rows[cut:] if r["changed_at"] <= now]
        if cut:
            next_offset[language] = int(rows[cut - 1]["offset"]) + 1
    return prefix, later, next_offset


HEAVY_FIELDS = ("canonical_url", "terms", "term_weights", "entities", "embedding_q", "embedding_scale")
"""MemberRow fields only pages read (never the fold): a rebuild keeps them in Arrow and joins them
back by row, instead of carrying millions of them through Python."""


def quantized_embeddings(table: pa.Table) -> pa.Table:
    """``table`` with its ``embedding`` column as ``embedding_q`` (int8 bytes) and ``embedding_scale``.

    An embedding of another model than this release's (``embedding_model``; null in segments
    written before it was stored: the legacy model) is left out: links compare only one model's
    vectors (issue 33)."""
    column = table.column("embedding").combine_chunks()
    if "embedding_model" in table.column_names:
        models = table.column("embedding_model").to_pylist()
        foreign = [not is_current_embedding(m) for m in models]
        if any(foreign):
            column = pc.if_else(pa.array(foreign), pa.scalar(None, column.type), column)
        table = table.drop_columns(["embedding_model"])
    lengths = column.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    values = column.flatten().to_numpy(zero_copy_only=False) if len(column) else np.zeros(0, np.float32)
    q, scale, ok = quantize_embedding_column(lengths, values)
    kept = np.repeat(ok, lengths)
    offsets = np.concatenate([[0], np.cumsum(np.where(ok, lengths, 0))]).astype(np.int32)
    data = pa.Array.from_buffers(pa.binary(), len(lengths), [None, pa.py_buffer(offsets.tobytes()),
                                                             pa.py_buffer(q[kept].tobytes())])
    data = pc.if_else(pa.array(ok), data, pa.scalar(None, pa.binary()))
    scales = pa.array(scale, pa.float32(), mask=~ok)
    return table.drop_columns(["embedding"]).append_column("embedding_q", data).append_column("embedding_scale", scales)


def _article_table(table: pa.Table, now: datetime, after: datetime | None) -> tuple[pa.Table, bool]:
    """A segment's rows seen by ``now`` (and after ``after``), embeddings quantized; and whether
    every row of it is (so the segment is consumed)."""
    seen = table.column("first_seen_at")
    keep = pc.and_(pc.is_valid(seen), pc.is_valid(table.column("article_id")))
    complete = not pc.any(pc.and_(keep, pc.greater(seen, pa.scalar(now, seen.type)))).as_py()
    keep = pc.and_(keep, pc.less_equal(seen, pa.scalar(now, seen.type)))
    if after is not None:
        keep = pc.and_(keep, pc.greater(seen, pa.scalar(after, seen.type)))
    return quantized_embeddings(table.filter(keep)), complete


def _listing_rows(table: pa.Table, now: datetime, after: datetime | None) -> tuple[list[ListingRow], bool]:
    """A listings segment's rows from before ``now`` (and not before ``after``); and whether that is
    all of them. Strictly before: a cycle lists an article only if no snapshot before it did, and it
    writes its own listings at ``now`` after its fold."""
    rows, complete = [], True
    for row in cast(list[ListingRow], table.to_pylist()):  # LISTINGS_SCHEMA rows
        at = row["listed_at"]
        if at is None or row["article_id"] is None:
            continue
        if at >= now:
            complete = False
        elif after is None or at >= after:
            rows.append(row)
    return rows, complete


@dataclass(slots=True)
class LogRead:
    """Rows a fold takes from an append-only log of content-named segments, and what it consumed.
    Article rows come as one Arrow table (``table``), listing rows as dicts (``rows``)."""

    rows: list[ListingRow]
    consumed: list[str]
    partial: dict[str, str]
    table: pa.Table | None = None


_LOGS = {
    "articles": (layout.ARTICLES_PREFIX, ARTICLES_SCHEMA, _ARTICLE_COLUMNS),
    "listings": (layout.LISTINGS_PREFIX, LISTINGS_SCHEMA, None),
}


def read_new_segments(store: ObjectStore, log_name: str, now: datetime, done: LogProgress | None,
              counter: ReadCounter) -> LogRead:
    """The rows of ``log_name``'s segments not consumed yet (every segment when ``done`` is None: a
    rebuild), up to ``now``. A segment with rows after ``now`` is read again next time, for the
    rows after this ``now`` only; compacted segments hold only what was consumed (maintenance waits
    for the aggregates), so an incremental read skips them."""
    prefix, schema, columns = _LOGS[log_name]
    consumed = set(done["consumed"]) if done is not None else set()
    partial = dict(done["partial"]) if done is not None else {}
    listed = list_segments(store, prefix)
    if done is None:  # a rebuild reads every segment, but not one a compacted segment holds (issue 28)
        held = held_by_compacted(store, listed)
        listed = [k for k in listed if k.rsplit("/", 1)[-1] not in held]
    rows: list[ListingRow] = []
    tables: list[pa.Table] = []
    new_partial: dict[str, str] = {}
    for key in listed:
        if key in consumed or (done is not None and is_compacted(key)):
            continue
        table = _read_segment(store, key, schema, columns, counter, log_name)
        if table is None:
            continue
        after = parse_iso(partial[key]) if key in partial else None
        if log_name == "articles":
            found, complete = _article_table(table, now, after)
            tables.append(found)
        else:
            listing_rows, complete = _listing_rows(table, now, after)
            rows += listing_rows
        if complete:
            consumed.add(key)
        else:
            new_partial[key] = now.isoformat()
    kept = set(listed)
    table = pa.concat_tables(tables) if tables else None
    return LogRead(rows, sorted(k for k in consumed if k in kept), new_partial, table)


def article_rows(read: LogRead, *, light: bool = False) -> list[FoldRow]:
    """The article rows as dicts; ``light`` leaves out :data:`HEAVY_FIELDS` and numbers each row
    (``row_ref``, its index in ``read.table``) so they are joined back after a rebuild's fold."""
    if read.table is None:
        return []
    if not light:
        return cast(list[FoldRow], read.table.to_pylist())  # ARTICLES_SCHEMA rows, quantized
    rows = cast(list[FoldRow], read.table.select([c for c in read.table.column_names if c not in HEAVY_FIELDS]).to_pylist())
    for i, row in enumerate(rows):
        row["row_ref"] = i
    return rows


