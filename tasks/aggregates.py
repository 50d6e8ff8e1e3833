"""Rank's story aggregates: fold what is new onto them each cycle, or rebuild them from the logs.

A rank cycle (:func:`update_aggregates`) reads the aggregates (``warehouse.aggregates``), the
story-change segments past each language's consumed offset and the article segments it has not
consumed, folds them (:func:`transforms.story_aggregates.fold`), writes one delta of what changed,
and moves the pointer, fenced. What it reads grows with the minute's changes and the number of
stories, never with the articles of the window; members are read only for the stories a move or a
new version recomputes, and then for the stories pages list (:class:`MemberSource`), those the
pages of the cycle before listed from the member cache it left (:func:`record_member_cache`).

A fold takes each language's changes in offset order up to the first one after ``now`` (a change
log written ahead of the clock waits there); later ones at or before ``now`` are folded onto a copy
for this cycle only. So the aggregates are always the fold of a prefix of the log, and a cycle
sees exactly what a rebuild at its ``now`` sees (:func:`aggregates_from_logs`, which
``newsroom rank --as-of`` and a damaged or missing pointer use).
"""

from __future__ import annotations

import copy
import io
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tasks.crashpoints import crash_point
from tasks.settings import RankSettings
from tasks.writer.state import paused_gc
from transforms.embedding import EMBEDDING_MODEL_ID, is_current_embedding
from transforms.story_aggregates import (
    MEMBER_FIELDS,
    ROW_FIELDS,
    AggregateRules,
    FoldResult,
    FoldState,
    Ledger,
    Member,
    dequantize_embedding,
    fold,
    live_aliases,
    member_order,
    quantize_embedding_column,
    registry_fingerprint,
    stories_to_load,
    trim_story,
)
from warehouse import layout
from warehouse.aggregates import (
    AGGREGATES_PREFIX,
    MANIFEST_SCHEMA,
    MEMBER_ROW_GROUP_ROWS,
    AggregatesUnreadableError,
    MemberCache,
    ReadCounter,
    commit_manifest,
    frame_to_table,
    put_table,
    read_all_members,
    read_manifest,
    read_member_cache,
    read_members,
    read_pointer,
    read_story_rows,
    read_table_object,
    seq_of_key,
)
from warehouse.catalog import held_by_compacted, is_compacted
from warehouse.damage import describe_error, record_damage
from warehouse.errors import (
    CorruptObjectError,
    ObjectNotFoundError,
    PreconditionFailedError,
    SchemaMismatchError,
    WarehouseError,
)
from warehouse.schemas import (
    AGGREGATE_ALIASES_SCHEMA,
    AGGREGATE_LEDGER_SCHEMA,
    AGGREGATE_MEMBERS_SCHEMA,
    ARTICLES_SCHEMA,
    LISTINGS_SCHEMA,
    PENDING_ROWS_SCHEMA,
    PUBLISHERS_SCHEMA,
    STORY_AGGREGATES_SCHEMA,
    STORY_CHANGES_SCHEMA,
)
from warehouse.store import ObjectStore
from warehouse.tables import list_segments, read_table

log = logging.getLogger(__name__)

STORY_LAYERS = 12
"""Story deltas kept before they are folded into a new base (a base is one row per story)."""
MEMBER_LAYERS = 60
"""Member deltas kept before they are folded into a new base (a base is every member of the window:
compaction reads and writes all of it, so it runs about hourly)."""
_CHANGE_COLUMNS = ["offset", "kind", "story_id", "article_id", "copy_of", "other_story_id", "changed_at", "language"]
_ARTICLE_COLUMNS = [c for c in ROW_FIELDS if c not in ("embedding_q", "embedding_scale")] + ["embedding",
                                                                                             "embedding_model"]


def aggregate_rules(settings: RankSettings) -> AggregateRules:
    """The windows the aggregates must answer for, from the rank settings."""
    return AggregateRules(
        coverage_window_hours=settings.coverage_window_hours,
        velocity_window_minutes=settings.velocity_window_minutes,
        lag_seconds=(settings.smoothing_cycles - 1) * settings.cycle_seconds,
        early_minutes=max(60.0, settings.breaking_new_story_minutes),
        active_hours=settings.active_hours,
        pending_hours=settings.active_hours,
    )


@dataclass(frozen=True, slots=True)
class Registry:
    """What rank reads of the publisher registry."""

    publishers: pl.DataFrame  # publisher_id, name, region, language, authority, is_paywalled, is_opted_out
    authority: dict[str, float]
    eligible: frozenset[str]
    fingerprint: str


def read_registry(store: ObjectStore, counter: ReadCounter | None = None) -> Registry:
    table, _ = read_table(store, layout.PUBLISHERS_KEY, PUBLISHERS_SCHEMA)
    if counter is not None:
        counter.add("registry", table.nbytes)
    rows = table.to_pylist()
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return Registry(frame, {str(p["publisher_id"]): float(p["authority"] or 0.0) for p in rows},
                    frozenset(str(p["publisher_id"]) for p in rows if not p["is_opted_out"]),
                    registry_fingerprint(rows))


# --- Members, as pages read them --------------------------------------------------------------------

class MemberSource(Mapping[str, list[dict[str, Any]]]):
    """Story id → its members as ``story_members.sql`` rows (with ``embedding``), read on demand.

    Rows come from the members' layers in the store, a row group at a time, plus the members this
    cycle changed in memory; :meth:`prefetch` reads many stories in one pass, and a story asked
    for without it is read alone. A story with no members maps to an empty list.
    """

    def __init__(self, store: ObjectStore | None, layers: Sequence[str], registry: Registry, *,
                 overrides: Mapping[str, Mapping[str, Member | None]] | None = None,
                 table: pa.Table | None = None, counter: ReadCounter | None = None,
                 cache: MemberCache | None = None) -> None:
        self._store, self._layers, self._registry, self._counter = store, list(layers), registry, counter
        self._member_cache = cache
        self._stored: dict[str, list[Member]] = {}
        self._table = pl.from_arrow(table) if table is not None else None
        self._overrides = {sid: dict(ms) for sid, ms in (overrides or {}).items()}
        self._cache: dict[str, list[dict[str, Any]]] = {}
        self._listed: dict[str, dict[str, datetime | None]] = {}
        self._pubs = {r["publisher_id"]: r for r in registry.publishers.select(
            "publisher_id", "name", "region", "authority", "is_paywalled").to_dicts()}

    def with_changes(self, upserts: Iterable[Member], removals: Iterable[tuple[str, str]]) -> MemberSource:
        """This source with a fold's member changes on top (removals first, then upserts)."""
        overrides = {sid: dict(ms) for sid, ms in self._overrides.items()}
        for sid, aid in removals:
            overrides.setdefault(sid, {})[aid] = None
        for m in upserts:
            overrides.setdefault(str(m["story_id"]), {})[str(m["article_id"])] = m
        source = MemberSource(self._store, self._layers, self._registry, overrides=overrides, counter=self._counter,
                              cache=self._member_cache)
        source._table = self._table
        return source

    def raw(self, story_ids: Iterable[str]) -> dict[str, list[Member]]:
        """Members of some stories as stored (``MEMBER_FIELDS``), for a fold's recompute."""
        ids = sorted(set(story_ids))
        stored: dict[str, dict[str, Member]] = {sid: {} for sid in ids}
        frame = None
        if self._store is not None and self._layers and ids:
            frame = read_members(self._store, self._layers, ids, counter=self._counter, cache=self._member_cache)
        elif isinstance(self._table, pl.DataFrame) and ids:
            frame = self._table.filter(pl.col("story_id").is_in(ids))
        if frame is not None:
            for m in frame.drop("is_removed").to_dicts():
                stored[m["story_id"]][m["article_id"]] = m
        for sid in ids:
            if self._store is not None and sid not in self._overrides:
                self._stored[sid] = list(stored[sid].values())  # as the layers hold it (the cache's rows)
            for aid, m in self._overrides.get(sid, {}).items():
                if m is None:
                    stored[sid].pop(aid, None)
                else:
                    stored[sid][aid] = m
        return {sid: sorted(ms.values(), key=member_order) for sid, ms in stored.items()}

    def stored_reads(self) -> list[Member]:
        """Every member this source read from the store, of stories no change in memory touched."""
        return [m for ms in self._stored.values() for m in ms]

    def prefetch(self, story_ids: Iterable[str]) -> None:
        """Read every story of ``story_ids`` not read yet, in one pass over the layers."""
        missing = sorted({s for s in story_ids if s not in self._cache})
        if not missing:
            return
        for sid, members in self.raw(missing).items():
            self._cache[sid] = [self._page_row(m) for m in members]

    def _page_row(self, m: Member) -> dict[str, Any]:
        publisher = self._pubs.get(m["publisher_id"], {})
        row = {k: m.get(k) for k in MEMBER_FIELDS if k not in ("embedding_q", "embedding_scale", "assigned_offset")}
        row.update(is_copy=m.get("copy_of") is not None, publisher=publisher.get("name"),
                   region=publisher.get("region"), authority=publisher.get("authority"),
                   is_paywalled=publisher.get("is_paywalled"),
                   embedding=dequantize_embedding(m.get("embedding_q"), m.get("embedding_scale")))
        return row

    def was_listed(self, story_id: str, article_id: str, now: datetime) -> bool:
        """Whether a story snapshot published before ``now`` listed this member (``log/listings``)."""
        if story_id not in self._listed:
            self._listed[story_id] = {m["article_id"]: m.get("listed_at") for m in self[story_id]}
        at = self._listed[story_id].get(article_id)
        return at is not None and at < now

    def __getitem__(self, story_id: str) -> list[dict[str, Any]]:
        if story_id not in self._cache:
            self.prefetch([story_id])
        return self._cache[story_id]

    def __iter__(self) -> Any:
        return iter(self._cache)

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, story_id: object) -> bool:
        return isinstance(story_id, str)


@dataclass(slots=True)
class AggregateView:
    """The aggregates as of one instant, for one rank cycle: every story row, their members on
    demand, and the aliases of merged stories."""

    stories: pl.DataFrame
    members: MemberSource
    aliases: dict[str, str]
    registry: Registry
    as_of: datetime
    counter: ReadCounter
    summary: dict[str, Any] = field(default_factory=dict)
    committed: tuple[dict[str, Any], str] | None = None
    """The manifest this cycle committed and the pointer's ETag after it (for the member cache)."""


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


def _new_changes(store: ObjectStore, offsets: Mapping[str, int], counter: ReadCounter | None,
                 everything: bool) -> dict[str, list[dict[str, Any]]]:
    """Each language's change rows at or past its consumed offset (every row with
    ``everything``), in offset order, one row per offset."""
    out: dict[str, list[dict[str, Any]]] = {}
    for language, segments in sorted(_change_segments(store).items()):
        start = 0 if everything else int(offsets.get(language, 0))
        numbered = sorted(s for s in segments if s[0] is not None)
        keys = [k for first, k in segments if first is None] if everything else []
        # The last segment that starts before ``start`` may run past it (a fold that stopped mid-way).
        before = [k for first, k in numbered if first is not None and first < start]
        keys += before[-1:] if not everything else before
        keys += [k for first, k in numbered if first is not None and first >= start]
        rows: dict[int, dict[str, Any]] = {}
        for key in keys:
            table = _read_segment(store, key, STORY_CHANGES_SCHEMA, _CHANGE_COLUMNS, counter, "changes")
            if table is None:
                continue
            for row in table.to_pylist():
                if row["offset"] is not None and row["offset"] >= start and row["offset"] not in rows:
                    rows[row["offset"]] = row
        if rows:
            out[language] = [rows[o] for o in sorted(rows)]
    return out


def _split_at(changes: Mapping[str, list[dict[str, Any]]], now: datetime
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
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
"""Member fields only pages read (never the fold): a rebuild keeps them in Arrow and joins them
back by row, instead of carrying millions of them through Python."""


def _quantized(table: pa.Table) -> pa.Table:
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
    return _quantized(table.filter(keep)), complete


def _listing_rows(table: pa.Table, now: datetime, after: datetime | None) -> tuple[list[dict[str, Any]], bool]:
    """A listings segment's rows from before ``now`` (and not before ``after``); and whether that is
    all of them. Strictly before: a cycle lists an article only if no snapshot before it did, and it
    writes its own listings at ``now`` after its fold."""
    rows, complete = [], True
    for row in table.to_pylist():
        at = row["listed_at"]
        if at is None or row["article_id"] is None:
            continue
        if at >= now:
            complete = False
        elif after is None or at >= after:
            rows.append(row)
    return rows, complete


@dataclass(slots=True)
class _LogRead:
    """Rows a fold takes from an append-only log of content-named segments, and what it consumed.
    Article rows come as one Arrow table (``table``), listing rows as dicts (``rows``)."""

    rows: list[dict[str, Any]]
    consumed: list[str]
    partial: dict[str, str]
    table: pa.Table | None = None


_LOGS = {
    "articles": (layout.ARTICLES_PREFIX, ARTICLES_SCHEMA, _ARTICLE_COLUMNS),
    "listings": (layout.LISTINGS_PREFIX, LISTINGS_SCHEMA, None),
}


def _read_new(store: ObjectStore, log_name: str, now: datetime, done: Mapping[str, Any] | None,
              counter: ReadCounter) -> _LogRead:
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
    rows: list[dict[str, Any]] = []
    tables: list[pa.Table] = []
    new_partial: dict[str, str] = {}
    for key in listed:
        if key in consumed or (done is not None and is_compacted(key)):
            continue
        table = _read_segment(store, key, schema, columns, counter, log_name)
        if table is None:
            continue
        after = datetime.fromisoformat(partial[key]) if key in partial else None
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
    return _LogRead(rows, sorted(k for k in consumed if k in kept), new_partial, table)


def _article_rows(read: _LogRead, *, light: bool = False) -> list[dict[str, Any]]:
    """The article rows as dicts; ``light`` leaves out :data:`HEAVY_FIELDS` and numbers each row
    (``row_ref``, its index in ``read.table``) so they are joined back after a rebuild's fold."""
    if read.table is None:
        return []
    if not light:
        return read.table.to_pylist()
    rows = read.table.select([c for c in read.table.column_names if c not in HEAVY_FIELDS]).to_pylist()
    for i, row in enumerate(rows):
        row["row_ref"] = i
    return rows


# --- State in and out ---------------------------------------------------------------------------------

def _state_from_tables(pending: pa.Table, ledger: pa.Table, aliases: pa.Table) -> FoldState:
    state = FoldState()
    for r in pending.to_pylist():
        state.pending_rows[(r["article_id"], r["first_seen_at"])] = r
    for r in ledger.to_pylist():
        state.ledger[r["article_id"]] = Ledger(r["article_id"], r["story_id"], r["copy_of"], r["assigned_offset"],
                                               bool(r["is_member"]), list(r["acked"] or []), None, r["updated_at"])
    for r in aliases.to_pylist():
        state.aliases[r["alias_id"]] = (r["survivor_id"], int(r["offset"]))
    return state


def _state_tables(state: FoldState) -> tuple[pa.Table, pa.Table, pa.Table]:
    pending = [state.pending_rows[k] for k in sorted(state.pending_rows)]
    ledger = [{"article_id": e.article_id, "story_id": e.story_id, "copy_of": e.copy_of,
               "assigned_offset": e.assigned_offset, "is_member": e.is_member, "acked": e.acked,
               "updated_at": e.updated_at} for _, e in sorted(state.ledger.items())]
    aliases = [{"alias_id": a, "survivor_id": s, "offset": o} for a, (s, o) in sorted(state.aliases.items())]
    return (pa.Table.from_pylist(pending, schema=PENDING_ROWS_SCHEMA),
            pa.Table.from_pylist(ledger, schema=AGGREGATE_LEDGER_SCHEMA),
            pa.Table.from_pylist(aliases, schema=AGGREGATE_ALIASES_SCHEMA))


def _story_frame(rows: Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    table = pa.Table.from_pylist([{**r, "is_removed": False} for r in rows], schema=STORY_AGGREGATES_SCHEMA)
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def _tombstones(story_ids: Iterable[str]) -> pl.DataFrame:
    table = pa.Table.from_pylist([{"story_id": s, "is_removed": True} for s in sorted(story_ids)],
                                 schema=STORY_AGGREGATES_SCHEMA)
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def _member_delta(result: FoldResult) -> pa.Table:
    rows = [{**{k: m.get(k) for k in MEMBER_FIELDS}, "is_removed": False} for m in result.member_upserts]
    rows += [{"story_id": sid, "article_id": aid, "is_removed": True} for sid, aid in result.member_removals]
    rows.sort(key=lambda r: (r["story_id"], r["article_id"], r["is_removed"]))
    return pa.Table.from_pylist(rows, schema=AGGREGATE_MEMBERS_SCHEMA)


def _apply(stories: pl.DataFrame, result: FoldResult, rules: AggregateRules, at: datetime
           ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The story table after a fold (touched rows replaced, expired and emptied stories gone), and
    the delta that says so."""
    changed = _story_frame(result.stories.values())
    expired = stories.filter(pl.col("last_seen_at") < pl.lit(at) - pl.duration(hours=rules.active_hours))
    gone = set(result.removed) | set(expired["story_id"].to_list())
    gone -= set(result.stories)
    replaced = set(result.stories) | gone
    kept = stories.filter(~pl.col("story_id").is_in(sorted(replaced)))
    table = pl.concat([kept, changed], how="vertical_relaxed")  # unsorted: read whole, sorted when written
    delta = pl.concat([changed, _tombstones(gone)], how="vertical_relaxed").sort("story_id")
    return table, delta


def _by_story(members: Iterable[Member]) -> dict[str, dict[str, Member]]:
    out: dict[str, dict[str, Member]] = defaultdict(dict)
    for m in members:
        out[str(m["story_id"])][str(m["article_id"])] = m
    return out


def _fold_on(stories: pl.DataFrame, state: FoldState, changes: Sequence[dict[str, Any]],
             rows: Sequence[dict[str, Any]], members: MemberSource, registry: Registry, rules: AggregateRules,
             at: datetime, listings: Sequence[dict[str, Any]] = ()) -> FoldResult:
    touched, needed = stories_to_load(changes, rows, state, listings)
    current = {r["story_id"]: r for r in stories.filter(pl.col("story_id").is_in(sorted(touched))).to_dicts()}
    loaded = members.raw(needed) if needed else {}
    return fold(state, changes, rows, stories=current, members=loaded, authority=registry.authority,
                eligible=registry.eligible, rules=rules, at=at, listings=listings)


# --- Rebuild ----------------------------------------------------------------------------------------------

@dataclass(slots=True)
class _Built:
    stories: pl.DataFrame
    members: pa.Table  # AGGREGATE_MEMBERS_SCHEMA, sorted by story, first seen, id
    state: FoldState
    offsets: dict[str, int]
    articles: _LogRead
    listings: _LogRead
    later: list[dict[str, Any]]


def _build_from_logs(store: ObjectStore, now: datetime, registry: Registry, rules: AggregateRules,
                     counter: ReadCounter) -> _Built:
    """Fold the whole log at once: every article row and each language's change prefix as of ``now``.

    The fold carries only the fields it reads; the rest of each member row (:data:`HEAVY_FIELDS`)
    is joined back from the article rows in Arrow.
    """
    articles = _read_new(store, "articles", now, None, counter)
    listings = _read_new(store, "listings", now, None, counter)
    rows = _article_rows(articles, light=True)
    prefix, later, offsets = _split_at(_new_changes(store, {}, counter, everything=True), now)
    state = FoldState()
    _, needed = stories_to_load(prefix, rows, state, listings.rows)
    result = fold(state, prefix, rows, stories={}, members={sid: [] for sid in needed},
                  authority=registry.authority, eligible=registry.eligible, rules=rules, at=now)
    members = [m for m in result.member_upserts if m["story_id"] in result.stories]
    # Listings name members: fold them once every member is in place.
    _mark_listed(members, listings.rows)
    heavy = articles.table.select(list(HEAVY_FIELDS)) if articles.table is not None else None
    state.pending_rows = {k: _with_heavy_row(r, heavy) for k, r in state.pending_rows.items()}
    stories = _story_frame(result.stories[s] for s in sorted(result.stories))
    state.aliases = live_aliases(state.aliases, result.stories)
    return _Built(stories, _members_table(members, articles.table), state, offsets, articles, listings, later)


def _with_heavy_row(row: dict[str, Any], heavy: pa.Table | None) -> dict[str, Any]:
    ref = row.pop("row_ref", None)
    if ref is not None and heavy is not None:
        row.update(heavy.slice(ref, 1).to_pylist()[0])
    return row


def _mark_listed(members: Iterable[Member], listings: Iterable[Mapping[str, Any]]) -> None:
    """Each member's first listing, whichever story it was in then (a cycle folds a listing the
    cycle after it, before the moves that cycle reads)."""
    by_article = {str(m["article_id"]): m for m in members}
    for listing in listings:
        m = by_article.get(str(listing["article_id"]))
        if m is not None and (m.get("listed_at") is None or listing["listed_at"] < m["listed_at"]):
            m["listed_at"] = listing["listed_at"]


def _members_table(members: Sequence[Member], read: pa.Table | None) -> pa.Table:
    """Members as a table: each one's row taken from the rows a rebuild read (``read``, by the
    member's ``row_ref``), and what the fold decided (story, copy, offset, listing, first seen) from
    Python."""
    ordered = sorted(members, key=lambda m: (m["story_id"], m["first_seen_at"], m["article_id"]))
    decided = ("story_id", "first_seen_at", "copy_of", "assigned_offset", "listed_at")
    columns: dict[str, pa.Array] = {}
    if read is not None and ordered:
        taken = read.take(pa.array([m["row_ref"] for m in ordered], pa.int64()))
        columns.update({name: taken.column(name).combine_chunks() for name in ROW_FIELDS if name not in decided})
    for name in MEMBER_FIELDS:
        if name not in columns:
            columns[name] = pa.array([m.get(name) for m in ordered], AGGREGATE_MEMBERS_SCHEMA.field(name).type)
    columns["is_removed"] = pa.array([False] * len(ordered), pa.bool_())
    return pa.table({n: columns[n] for n in AGGREGATE_MEMBERS_SCHEMA.names}, schema=AGGREGATE_MEMBERS_SCHEMA)


def _write_base(store: ObjectStore, seq: int, stories: pl.DataFrame, members: pa.Table, state: FoldState,
                ) -> dict[str, Any]:
    story_key = put_table(store, "stories", seq, frame_to_table(stories.sort("story_id"), STORY_AGGREGATES_SCHEMA),
                          STORY_AGGREGATES_SCHEMA)
    member_key = put_table(store, "members", seq, members, AGGREGATE_MEMBERS_SCHEMA,
                           row_group_rows=MEMBER_ROW_GROUP_ROWS)
    return {"stories": [story_key], "members": [member_key], **_write_small(store, seq, state)}


def _write_small(store: ObjectStore, seq: int, state: FoldState, before: Mapping[str, Any] | None = None
                 ) -> dict[str, Any]:
    """The small tables, written whole (each kept as it was when unchanged)."""
    pending, ledger, aliases = _state_tables(state)
    before = before or {}
    return {"pending": put_table(store, "pending", seq, pending, PENDING_ROWS_SCHEMA, reuse=before.get("pending")),
            "ledger": put_table(store, "ledger", seq, ledger, AGGREGATE_LEDGER_SCHEMA, reuse=before.get("ledger")),
            "aliases": put_table(store, "aliases", seq, aliases, AGGREGATE_ALIASES_SCHEMA,
                                 reuse=before.get("aliases"))}


def aggregates_from_logs(store: ObjectStore, now: datetime, settings: RankSettings,
                         counter: ReadCounter | None = None) -> AggregateView:
    """The aggregates as of ``now`` folded from the whole log, written nowhere: what
    ``newsroom rank --as-of`` rebuilds a past minute from (it reads every segment)."""
    with paused_gc():
        return _from_logs(store, now, settings, counter)


def _from_logs(store: ObjectStore, now: datetime, settings: RankSettings, counter: ReadCounter | None
               ) -> AggregateView:
    counter = counter or ReadCounter()
    rules = aggregate_rules(settings)
    registry = read_registry(store, counter)
    built = _build_from_logs(store, now, registry, rules, counter)
    return _view_with_later(built.stories, built.state, built.later, MemberSource(
        None, [], registry, table=built.members, counter=counter), registry, rules, now, counter,
        {"mode": "rebuilt", "stories": built.stories.height})


def _view_with_later(stories: pl.DataFrame, state: FoldState, later: list[dict[str, Any]], members: MemberSource,
                     registry: Registry, rules: AggregateRules, now: datetime, counter: ReadCounter,
                     summary: dict[str, Any]) -> AggregateView:
    """The view at ``now``: the changes past a language's prefix that are not after ``now`` folded
    onto copies, for this cycle only."""
    if later:
        scratch = copy.deepcopy(state)
        result = _fold_on(stories, scratch, later, [], members, registry, rules, now)
        stories, _ = _apply(stories, result, rules, now)
        members = members.with_changes(result.member_upserts, result.member_removals)
        state = scratch
        summary = {**summary, "later_changes": len(later)}
    aliases = {a: s for a, (s, _) in live_aliases(state.aliases, stories["story_id"].to_list()).items()}
    return AggregateView(stories, members, aliases, registry, now, counter, summary)


# --- One cycle --------------------------------------------------------------------------------------------


def update_aggregates(store: ObjectStore, now: datetime, settings: RankSettings, *, persist: bool = True,
                      counter: ReadCounter | None = None, rebuild: str | None = None) -> AggregateView:
    """Fold what the logs gained since the last cycle onto the aggregates (see :func:`_update`)."""
    with paused_gc():
        return _update(store, now, settings, persist=persist, counter=counter, rebuild=rebuild)


def _update(store: ObjectStore, now: datetime, settings: RankSettings, *, persist: bool = True,
            counter: ReadCounter | None = None, rebuild: str | None = None) -> AggregateView:
    """Fold what the logs gained since the last cycle onto the aggregates, commit (fenced), and
    return them as of ``now``.

    Rebuilds from the whole log, and commits the rebuild as a new base, when there are no
    aggregates yet, when they are unreadable (named in the damage record), or when the rank
    windows or the registry they were folded with changed. A ``now`` before the aggregates' own
    instant (a rerun of a past minute) is answered by a rebuild written nowhere. Losing the
    pointer's conditional put to a concurrent cycle drops this fold; its view still answers this
    cycle.

    Args:
        persist: Write and commit the fold (False: compute it only).
        rebuild: Rebuild whatever the aggregates hold, for this reason (a layer turned out
            unreadable when pages read it).
    """
    counter = counter or ReadCounter()
    rules = aggregate_rules(settings)
    registry = read_registry(store, counter)
    pointer, etag = read_pointer(store)
    manifest = None
    if pointer is not None and not pointer.get("rebuild"):
        try:
            manifest = read_manifest(store, pointer["manifest"], counter)
        except AggregatesUnreadableError:
            manifest = None
    reason = rebuild or (pointer or {}).get("rebuild")
    if reason is not None:
        pass
    elif manifest is None:
        reason = "no aggregates" if pointer is None and etag is None else "aggregates unreadable"
    elif manifest.get("rules") != rules.fingerprint():
        reason = "rank windows changed"
    elif manifest.get("registry") != registry.fingerprint:
        reason = "registry changed"
    elif not is_current_embedding(manifest.get("embedding_model")):
        reason = "embedding model changed"  # the members' vectors are another model's (issue 33)
    elif datetime.fromisoformat(manifest["as_of"]) > now:
        return _from_logs(store, now, settings, counter)
    if manifest is not None and reason is None:
        try:
            return _fold_cycle(store, now, rules, registry, manifest, etag, persist, counter)
        except AggregatesUnreadableError:
            reason = "aggregates unreadable"
    return _rebuild_cycle(store, now, rules, registry, pointer, etag, persist, counter, reason or "")


def _rebuild_cycle(store: ObjectStore, now: datetime, rules: AggregateRules, registry: Registry,
                   pointer: Mapping[str, Any] | None, etag: str | None, persist: bool, counter: ReadCounter,
                   reason: str) -> AggregateView:
    built = _build_from_logs(store, now, registry, rules, counter)
    # Past every object already there, so pruning (by sequence number) still finds them.
    seq = 1 + max([int(pointer["seq"]) if pointer is not None else 0,
                   *(n for k in store.list(AGGREGATES_PREFIX) if (n := seq_of_key(k)) is not None)])
    summary: dict[str, Any] = {"mode": "rebuilt", "reason": reason, "stories": built.stories.height, "seq": seq}
    layers: list[str] = []
    committed = None
    if persist:
        tables = _write_base(store, seq, built.stories, built.members, built.state)
        manifest = _manifest(seq, now, rules, registry, built.offsets, built.articles, built.listings, tables)
        new_etag = _commit(store, manifest, etag)
        summary["committed"] = new_etag is not None
        committed = (manifest, new_etag) if new_etag is not None else None
        layers = tables["members"]
    log.info("rank_aggregates_rebuilt reason=%s stories=%d", reason, built.stories.height)
    members = MemberSource(store if layers else None, layers, registry,
                           table=None if layers else built.members, counter=counter)
    view = _view_with_later(built.stories, built.state, built.later, members, registry, rules, now, counter,
                            summary)
    view.committed = committed if persist else None
    return view


def _manifest(seq: int, now: datetime, rules: AggregateRules, registry: Registry, offsets: Mapping[str, int],
              articles: _LogRead, listings: _LogRead, tables: Mapping[str, Any]) -> dict[str, Any]:
    return {"schema": MANIFEST_SCHEMA, "seq": seq, "as_of": now.isoformat(), "rules": rules.fingerprint(),
            "registry": registry.fingerprint, "embedding_model": EMBEDDING_MODEL_ID,
            "offsets": dict(sorted(offsets.items())),
            "articles": {"consumed": articles.consumed, "partial": dict(sorted(articles.partial.items()))},
            "listings": {"consumed": listings.consumed, "partial": dict(sorted(listings.partial.items()))},
            **tables}


def _commit(store: ObjectStore, manifest: dict[str, Any], etag: str | None) -> str | None:
    """Commit a fold; the pointer's new ETag, or None when another cycle committed first."""
    try:
        _, new_etag = commit_manifest(store, manifest, etag,
                                      before_pointer=lambda: crash_point("rank.before_aggregates_pointer"))
    except PreconditionFailedError:
        log.warning("rank_aggregates_fenced seq=%s: another cycle committed first", manifest["seq"])
        return None
    return new_etag


MEMBER_CACHE_ROW_GROUP_ROWS = 1024


def record_member_cache(store: ObjectStore, view: AggregateView) -> bool:
    """After a cycle's pages: write the members they read as the member cache, and name it in the
    manifest the cycle committed (If-Match on the pointer it left). The next cycle reads those
    stories from the cache and the deltas written after it, instead of row groups of the whole
    member base; stories new to the pages still come from the base. Only a cache: when another
    cycle committed in between, or this cycle committed nothing, nothing is written.

    Returns:
        Whether the cache was recorded.
    """
    if view.committed is None:
        return False
    manifest, etag = view.committed
    rows = view.members.stored_reads()
    if not rows:
        return False
    ordered = sorted(rows, key=lambda m: (m["story_id"], m["first_seen_at"], m["article_id"]))
    table = pa.Table.from_pylist([{**{k: m.get(k) for k in MEMBER_FIELDS}, "is_removed": False} for m in ordered],
                                 schema=AGGREGATE_MEMBERS_SCHEMA)
    try:
        key = put_table(store, "cache", int(manifest["seq"]), table, AGGREGATE_MEMBERS_SCHEMA,
                        row_group_rows=MEMBER_CACHE_ROW_GROUP_ROWS)
        entry = {"key": key, "base": manifest["members"][0], "layers": len(manifest["members"])}
        commit_manifest(store, {**manifest, "member_cache": entry}, etag)
    except PreconditionFailedError:
        return False
    except WarehouseError as e:  # a store failure: the next cycle reads the base, as without a cache
        log.warning("rank_member_cache_not_written error=%s", e)
        return False
    return True


def _fold_cycle(store: ObjectStore, now: datetime, rules: AggregateRules, registry: Registry,
                manifest: Mapping[str, Any], etag: str | None, persist: bool, counter: ReadCounter
                ) -> AggregateView:
    seq = int(manifest["seq"]) + 1
    stories = read_story_rows(store, manifest["stories"], counter)
    state = _state_from_tables(
        read_table_object(store, manifest["pending"], PENDING_ROWS_SCHEMA, counter, "pending"),
        read_table_object(store, manifest["ledger"], AGGREGATE_LEDGER_SCHEMA, counter, "pending"),
        read_table_object(store, manifest["aliases"], AGGREGATE_ALIASES_SCHEMA, counter, "aliases"))
    # Changes first, then articles: a change's article segment was written before the change, so
    # it is in the article listing that follows.
    prefix, later, next_offsets = _split_at(_new_changes(store, manifest["offsets"], counter, everything=False), now)
    offsets = {**manifest["offsets"], **next_offsets}
    articles = _read_new(store, "articles", now, manifest["articles"], counter)
    listings = _read_new(store, "listings", now, manifest.get("listings") or {"consumed": [], "partial": {}},
                         counter)
    cache = read_member_cache(store, manifest.get("member_cache"), counter)
    members = MemberSource(store, manifest["members"], registry, counter=counter, cache=cache)
    rows = _article_rows(articles)
    result = _fold_on(stories, state, prefix, rows, members, registry, rules, now, listings.rows)
    stories, delta = _apply(stories, result, rules, now)
    state.aliases = live_aliases(state.aliases, stories["story_id"].to_list())
    member_delta = _member_delta(result)
    summary: dict[str, Any] = {"mode": "folded", "seq": seq, "changes": len(prefix), "articles": len(rows),
                               "touched": len(result.stories), "removed": delta.height - len(result.stories),
                               "stories": stories.height}
    story_layers, member_layers = list(manifest["stories"]), list(manifest["members"])
    if persist:
        small = _write_small(store, seq, state, manifest)
        unchanged = (not delta.height and not member_delta.num_rows and offsets == manifest["offsets"]
                     and all(small[k] == manifest[k] for k in small)
                     and {"consumed": articles.consumed, "partial": articles.partial} == manifest["articles"]
                     and {"consumed": listings.consumed, "partial": listings.partial} == manifest.get("listings"))
        if unchanged:  # an idle minute: nothing to write, the stored fold still holds
            summary["committed"], summary["unchanged"] = False, True
            return _view_with_later(stories, state, later, members, registry, rules, now, counter, summary)
        story_layers, member_layers = _write_layers(store, seq, stories, delta, member_delta, story_layers,
                                                    member_layers, counter, summary)
        tables = {"stories": story_layers, "members": member_layers, **small}
        if cache is not None and cache.covers(member_layers):  # still the layers it reflects, and more
            tables["member_cache"] = manifest["member_cache"]
        new_manifest = _manifest(seq, now, rules, registry, offsets, articles, listings, tables)
        new_etag = _commit(store, new_manifest, etag)
        summary["committed"] = new_etag is not None
        members = MemberSource(store, member_layers, registry, counter=counter,
                               cache=cache if cache is not None and cache.covers(member_layers) else None)
        view = _view_with_later(stories, state, later, members, registry, rules, now, counter, summary)
        view.committed = (new_manifest, new_etag) if new_etag is not None else None
        return view
    members = members.with_changes(result.member_upserts, result.member_removals)
    return _view_with_later(stories, state, later, members, registry, rules, now, counter, summary)


def _write_layers(store: ObjectStore, seq: int, stories: pl.DataFrame, delta: pl.DataFrame, member_delta: pa.Table,
                  story_layers: list[str], member_layers: list[str], counter: ReadCounter, summary: dict[str, Any]
                  ) -> tuple[list[str], list[str]]:
    """Write this fold's deltas, or a new base where the layers grew past their bound."""
    if len(story_layers) >= STORY_LAYERS:
        story_layers = [put_table(store, "stories", seq, frame_to_table(stories.sort("story_id"),
                                                                        STORY_AGGREGATES_SCHEMA),
                                  STORY_AGGREGATES_SCHEMA)]
        summary["stories_compacted"] = True
    elif delta.height:
        story_layers = [*story_layers, put_table(store, "stories", seq, frame_to_table(delta, STORY_AGGREGATES_SCHEMA),
                                                 STORY_AGGREGATES_SCHEMA)]
    if member_delta.num_rows:
        member_layers = [*member_layers, put_table(store, "members", seq, member_delta, AGGREGATE_MEMBERS_SCHEMA,
                                                   row_group_rows=MEMBER_ROW_GROUP_ROWS)]
    if len(member_layers) > MEMBER_LAYERS:
        member_layers = [_compact_members(store, seq, member_layers, stories, counter)]
        summary["members_compacted"] = True
    return story_layers, member_layers


def _compact_members(store: ObjectStore, seq: int, layers: Sequence[str], stories: pl.DataFrame,
                     counter: ReadCounter) -> str:
    """One member base from the layers: the newest row of each member of a story still in the table."""
    frame = read_all_members(store, layers, counter)
    frame = (frame.filter(pl.col("story_id").is_in(stories["story_id"].implode()))
             .sort("story_id", "first_seen_at", "article_id"))
    return put_table(store, "members", seq, frame_to_table(frame, AGGREGATE_MEMBERS_SCHEMA),
                     AGGREGATE_MEMBERS_SCHEMA, row_group_rows=MEMBER_ROW_GROUP_ROWS)


# --- Comparing the stored aggregates with a rebuild ---------------------------------------------------

@dataclass(frozen=True, slots=True)
class AggregateTables:
    """The aggregates' content in a comparable form: every row, sorted, story rows trimmed at
    ``as_of`` (a row a cycle wrote earlier may hold recent originals a rebuild already sums up;
    both score the same)."""

    as_of: datetime
    stories: list[dict[str, Any]]
    members: list[dict[str, Any]]
    pending: list[dict[str, Any]]
    ledger: list[dict[str, Any]]
    aliases: list[dict[str, Any]]


def _normal_stories(rows: Iterable[Mapping[str, Any]], rules: AggregateRules, at: datetime) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        story = {k: (list(v) if isinstance(v, list) else v) for k, v in r.items() if k != "is_removed"}
        trim_story(story, rules, at)
        out.append(story)
    return sorted(out, key=lambda r: r["story_id"])


def stored_aggregates(store: ObjectStore, settings: RankSettings) -> AggregateTables | None:
    """What the pointer names, read whole (None before the first fold)."""
    pointer, _ = read_pointer(store)
    if pointer is None:
        return None
    manifest = read_manifest(store, pointer["manifest"])
    at = datetime.fromisoformat(manifest["as_of"])
    stories = read_story_rows(store, manifest["stories"])
    members = read_all_members(store, manifest["members"]).drop("is_removed")
    members = members.filter(pl.col("story_id").is_in(stories["story_id"].implode()))
    pending, ledger, aliases = (read_table_object(store, manifest[name], schema) for name, schema in
                                (("pending", PENDING_ROWS_SCHEMA), ("ledger", AGGREGATE_LEDGER_SCHEMA),
                                 ("aliases", AGGREGATE_ALIASES_SCHEMA)))
    return AggregateTables(at, _normal_stories(stories.to_dicts(), aggregate_rules(settings), at),
                           sorted(members.to_dicts(), key=lambda m: (m["story_id"], m["article_id"])),
                           pending.to_pylist(), ledger.to_pylist(), aliases.to_pylist())


def rebuilt_aggregates(store: ObjectStore, at: datetime, settings: RankSettings) -> AggregateTables:
    """The aggregates a rebuild from the whole log at ``at`` holds, in :class:`AggregateTables` form."""
    rules = aggregate_rules(settings)
    built = _build_from_logs(store, at, read_registry(store), rules, ReadCounter())
    pending, ledger, aliases = _state_tables(built.state)
    members = built.members.drop(["is_removed"]).to_pylist()
    return AggregateTables(at, _normal_stories(built.stories.to_dicts(), rules, at),
                           sorted(members, key=lambda m: (m["story_id"], m["article_id"])),
                           pending.to_pylist(), ledger.to_pylist(), aliases.to_pylist())
