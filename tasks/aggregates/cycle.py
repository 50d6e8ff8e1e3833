"""Rank's story aggregates: fold what is new onto them each cycle, or rebuild them from the logs.

A rank cycle (:func:`update_aggregates`) reads the aggregates (``warehouse.aggregates``), the
story-change segments past each language's consumed offset and the article segments it has not
consumed, folds them (:func:`transforms.story_fold.fold`), writes one delta of what changed,
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
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl
import pyarrow as pa

from newsroom.times import parse_iso
from tasks.aggregates.logs import (
    HEAVY_FIELDS,
    LogRead,
    article_rows,
    new_changes,
    read_new_segments,
    split_at_now,
)
from tasks.aggregates.members import AggregateSummary, AggregateView, MemberSource, Registry, read_registry
from tasks.crashpoints import crash_point
from tasks.settings import RankSettings
from tasks.writer.state import paused_gc
from transforms.embedding import EMBEDDING_MODEL_ID, is_current_embedding
from transforms.story_aggregates import MEMBER_FIELDS, ROW_FIELDS, AggregateRules, FoldRow, MemberRow
from transforms.story_fold import (
    ChangeRow,
    FoldResult,
    FoldState,
    Ledger,
    ListingRow,
    fold,
    live_aliases,
    stories_to_load,
)
from warehouse.aggregates import (
    AGGREGATES_PREFIX,
    MANIFEST_SCHEMA,
    MEMBER_ROW_GROUP_ROWS,
    AggregatesUnreadableError,
    AggregateTableKeys,
    Manifest,
    ReadCounter,
    commit_manifest,
    frame_to_table,
    put_table,
    read_all_members,
    read_manifest,
    read_member_cache,
    read_pointer,
    read_story_rows,
    read_table_object,
    seq_of_key,
)
from warehouse.errors import (
    PreconditionFailedError,
    WarehouseError,
)
from warehouse.schemas import (
    AGGREGATE_ALIASES_SCHEMA,
    AGGREGATE_LEDGER_SCHEMA,
    AGGREGATE_MEMBERS_SCHEMA,
    PENDING_ROWS_SCHEMA,
    STORY_AGGREGATES_SCHEMA,
)
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)

STORY_LAYERS = 12
"""Story deltas kept before they are folded into a new base (a base is one row per story)."""
MEMBER_LAYERS = 60
"""MemberRow deltas kept before they are folded into a new base (a base is every member of the window:
compaction reads and writes all of it, so it runs about hourly)."""

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


def state_tables(state: FoldState) -> tuple[pa.Table, pa.Table, pa.Table]:
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


def _fold_on(stories: pl.DataFrame, state: FoldState, changes: Sequence[ChangeRow],
             rows: Sequence[FoldRow], members: MemberSource, registry: Registry, rules: AggregateRules,
             at: datetime, listings: Sequence[ListingRow] = ()) -> FoldResult:
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
    articles: LogRead
    listings: LogRead
    later: list[ChangeRow]


def build_from_logs(store: ObjectStore, now: datetime, registry: Registry, rules: AggregateRules,
                     counter: ReadCounter) -> _Built:
    """Fold the whole log at once: every article row and each language's change prefix as of ``now``.

    The fold carries only the fields it reads; the rest of each member row (:data:`HEAVY_FIELDS`)
    is joined back from the article rows in Arrow.
    """
    articles = read_new_segments(store, "articles", now, None, counter)
    listings = read_new_segments(store, "listings", now, None, counter)
    rows = article_rows(articles, light=True)
    prefix, later, offsets = split_at_now(new_changes(store, {}, counter, everything=True), now)
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


def _with_heavy_row(row: FoldRow, heavy: pa.Table | None) -> FoldRow:
    ref = row.pop("row_ref", None)
    if ref is not None and heavy is not None:
        row.update(heavy.slice(ref, 1).to_pylist()[0])
    return row


def _mark_listed(members: Iterable[MemberRow], listings: Iterable[ListingRow]) -> None:
    """Each member's first listing, whichever story it was in then (a cycle folds a listing the
    cycle after it, before the moves that cycle reads)."""
    by_article = {str(m["article_id"]): m for m in members}
    for listing in listings:
        m = by_article.get(str(listing["article_id"]))
        if m is not None and (m.get("listed_at") is None or listing["listed_at"] < m["listed_at"]):
            m["listed_at"] = listing["listed_at"]


def _members_table(members: Sequence[MemberRow], read: pa.Table | None) -> pa.Table:
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
                ) -> AggregateTableKeys:
    story_key = put_table(store, "stories", seq, frame_to_table(stories.sort("story_id"), STORY_AGGREGATES_SCHEMA),
                          STORY_AGGREGATES_SCHEMA)
    member_key = put_table(store, "members", seq, members, AGGREGATE_MEMBERS_SCHEMA,
                           row_group_rows=MEMBER_ROW_GROUP_ROWS)
    return AggregateTableKeys(stories=[story_key], members=[member_key], **_write_small(store, seq, state))


def _write_small(store: ObjectStore, seq: int, state: FoldState, before: AggregateTableKeys | None = None
                 ) -> AggregateTableKeys:
    """The small tables, written whole (each kept as it was when unchanged)."""
    pending, ledger, aliases = state_tables(state)
    before = before or {}
    return AggregateTableKeys(
        pending=put_table(store, "pending", seq, pending, PENDING_ROWS_SCHEMA, reuse=before.get("pending")),
        ledger=put_table(store, "ledger", seq, ledger, AGGREGATE_LEDGER_SCHEMA, reuse=before.get("ledger")),
        aliases=put_table(store, "aliases", seq, aliases, AGGREGATE_ALIASES_SCHEMA, reuse=before.get("aliases")))


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
    built = build_from_logs(store, now, registry, rules, counter)
    return _view_with_later(built.stories, built.state, built.later, MemberSource(
        None, [], registry, table=built.members, counter=counter), registry, rules, now, counter,
        AggregateSummary(mode="rebuilt", stories=built.stories.height))


def _view_with_later(stories: pl.DataFrame, state: FoldState, later: list[ChangeRow], members: MemberSource,
                     registry: Registry, rules: AggregateRules, now: datetime, counter: ReadCounter,
                     summary: AggregateSummary) -> AggregateView:
    """The view at ``now``: the changes past a language's prefix that are not after ``now`` folded
    onto copies, for this cycle only."""
    if later:
        scratch = copy.deepcopy(state)
        result = _fold_on(stories, scratch, later, [], members, registry, rules, now)
        stories, _ = _apply(stories, result, rules, now)
        members = members.with_changes(result.member_upserts, result.member_removals)
        state = scratch
        summary = AggregateSummary(**summary, later_changes=len(later))
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
    elif parse_iso(manifest["as_of"]) > now:
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
    built = build_from_logs(store, now, registry, rules, counter)
    # Past every object already there, so pruning (by sequence number) still finds them.
    seq = 1 + max([int(pointer["seq"]) if pointer is not None else 0,
                   *(n for k in store.list(AGGREGATES_PREFIX) if (n := seq_of_key(k)) is not None)])
    summary = AggregateSummary(mode="rebuilt", reason=reason, stories=built.stories.height, seq=seq)
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
              articles: LogRead, listings: LogRead, tables: AggregateTableKeys) -> Manifest:
    return {"schema": MANIFEST_SCHEMA, "seq": seq, "as_of": now.isoformat(), "rules": rules.fingerprint(),
            "registry": registry.fingerprint, "embedding_model": EMBEDDING_MODEL_ID,
            "offsets": dict(sorted(offsets.items())),
            "articles": {"consumed": articles.consumed, "partial": dict(sorted(articles.partial.items()))},
            "listings": {"consumed": listings.consumed, "partial": dict(sorted(listings.partial.items()))},
            **tables}


def _commit(store: ObjectStore, manifest: Manifest, etag: str | None) -> str | None:
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
    prefix, later, next_offsets = split_at_now(new_changes(store, manifest["offsets"], counter, everything=False), now)
    offsets = {**manifest["offsets"], **next_offsets}
    articles = read_new_segments(store, "articles", now, manifest["articles"], counter)
    listings = read_new_segments(store, "listings", now, manifest.get("listings") or {"consumed": [], "partial": {}},
                         counter)
    cache = read_member_cache(store, manifest.get("member_cache"), counter)
    members = MemberSource(store, manifest["members"], registry, counter=counter, cache=cache)
    rows = article_rows(articles)
    result = _fold_on(stories, state, prefix, rows, members, registry, rules, now, listings.rows)
    stories, delta = _apply(stories, result, rules, now)
    state.aliases = live_aliases(state.aliases, stories["story_id"].to_list())
    member_delta = _member_delta(result)
    summary = AggregateSummary(mode="folded", seq=seq, changes=len(prefix), articles=len(rows),
                               touched=len(result.stories), removed=delta.height - len(result.stories),
                               stories=stories.height)
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
                  story_layers: list[str], member_layers: list[str], counter: ReadCounter, summary: AggregateSummary
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


