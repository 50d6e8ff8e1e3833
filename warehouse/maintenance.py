"""Maintenance of the store: compaction, retention and page-version pruning.

Every step is safe to interrupt and to rerun. Compaction folds a folder's small (non-compacted)
segments into one new compacted segment, written before its sources are deleted, and never reads
compacted segments back in: rows already in a compacted segment of the folder (by their identity:
``click_id``, ``change_id``, or article id, version and content hash) are not written again, and
sources that hold nothing else are just deleted. So a rerun after a crash between the write and the
deletes (even part way through them) finishes the deletes and duplicates nothing, and consumers that
remember what they read (the profiles fold, by click id) never see a row twice under a new key.

Only committed story changes are compacted: a change segment at or past its language writer's
checkpoint offset was left by a run that died before its checkpoint, and the writer's restart
rolls it forward by finding it under its own key (``tasks.writer.checkpoint.open_writer``).

Rank's story aggregates (issue 15) are a consumer too: they fold article, listing and change
segments they have not read, and never read compacted ones, so once they exist a segment is
compacted only after they consumed it (:func:`rank_consumption`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from warehouse import layout
from warehouse.aggregates import (
    AGGREGATES_PREFIX,
    AggregatesUnreadableError,
    read_manifest,
    read_pointer,
    seq_of_key,
)
from warehouse.catalog import (
    COMPACT_PREFIX,
    LOG_TABLES,
    LogTable,
    filesystem_of,
    folded_metadata,
    held_by_compacted,
    is_compacted,
)
from warehouse.damage import collect_damage, describe_error, record_damage
from warehouse.errors import SchemaMismatchError
from warehouse.schemas import (
    ARTICLES_SCHEMA,
    CLICKS_SCHEMA,
    STORY_CHANGES_SCHEMA,
)
from warehouse.snapshots import read_json_payload
from warehouse.store import (
    TEMPORARY_MAX_AGE_SECONDS,
    ObjectStore,
    delete_temporary,
    list_temporaries,
)
from warehouse.tables import (
    content_segment_id,
    evolve_to_schema,
    list_segments,
    read_segments,
    stored_segment,
    write_segment,
)

COMPACTED_ROW_GROUP_ROWS = 16_384
"""Rows per row group of a compacted segment: small enough that a predicate on a column a segment
is sorted by skips most of it by the row groups' statistics, large enough to compress well."""


@dataclass(slots=True)
class MaintenanceReport:
    compacted_segments: int = 0
    written_segments: int = 0
    deleted_for_retention: int = 0
    pruned_page_versions: int = 0
    pruned_writer_states: int = 0
    pruned_rank_aggregates: int = 0
    deleted_temporaries: int = 0
    notes: list[str] = field(default_factory=list)
    damaged: list[dict[str, str]] = field(default_factory=list)
    """Objects the run could not read (skipped, never compacted or deleted on a guess; issue 16)."""


def _by_folder(keys: Iterable[str]) -> dict[str, list[str]]:
    folders: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        folders[key.rsplit("/", 1)[0]].append(key)
    return folders


def _read_checkpoints(store: ObjectStore) -> dict[str, Mapping[str, object]]:
    """Each language writer's checkpoint, by language (writers with a checkpoint), as parsed: read
    leniently (its ``offset`` and ``consumed`` only), since a checkpoint the writer would refuse
    still says what was consumed."""
    found: dict[str, Mapping[str, object]] = {}
    for key in store.list(layout.STORY_STATE_PREFIX):
        if key.endswith("/checkpoint.json"):
            language = key[len(layout.STORY_STATE_PREFIX):].split("/", 1)[0]
            checkpoint = read_json_payload(store, key)
            if checkpoint is None:
                # Unknown offset and consumed set: the language counts as having consumed nothing,
                # so nothing of it is compacted or pruned until its writer rebuilds the checkpoint.
                found[language] = {"offset": 0, "consumed": [], "state_key": None}
            else:
                found[language] = checkpoint
    return found


def writer_checkpoints(store: ObjectStore) -> dict[str, set[str]]:
    """The article segments each language writer has consumed, by language (writers with a checkpoint)."""
    return {language: set(cast("list[str]", c.get("consumed", []))) for language, c in _read_checkpoints(store).items()}


def _first_uncommitted_changes(store: ObjectStore) -> dict[str, str]:
    """By story-change folder, the key of the first segment its writer has not committed: the one
    at its checkpoint's offset (keys are zero-padded offsets, so committed segments sort before it)."""
    bounds = {}
    for language, checkpoint in _read_checkpoints(store).items():
        key = layout.story_changes_key(language, int(cast("int", checkpoint.get("offset", 0))))
        bounds[key.rsplit("/", 1)[0]] = key
    return bounds


def consumed_by_every_writer(store: ObjectStore, languages: Iterable[str] = ()) -> set[str]:
    """Article segments that every language writer has consumed.

    Args:
        store: The store.
        languages: Languages that must have a writer besides those with a checkpoint (the log's);
            a language without a checkpoint has consumed nothing, so then nothing qualifies.
    """
    checkpoints = writer_checkpoints(store)
    sets = [checkpoints.get(language, set()) for language in sorted(set(checkpoints) | set(languages))]
    return set.intersection(*sets) if sets else set()


def _identities(table: pa.Table, identity: list[str]) -> list[tuple[object, ...]]:
    return list(zip(*(table.column(c).to_pylist() for c in identity), strict=True))


def _compact(store: ObjectStore, folder: str, sources: dict[str, pa.Table], compacted: list[str],
             schema: pa.Schema, identity: list[str], sort_by: list[str], min_segments: int,
             report: MaintenanceReport, *, write_sort: list[str] | None = None,
             identity_unique_in_folder: bool = True) -> None:
    """Fold ``sources`` (segments of ``folder``) into a new compacted segment, then delete them.

    Rows whose identity is already in one of the folder's ``compacted`` segments are left out, and
    duplicates among the sources are written once (the first by ``sort_by``). The new segment names
    every source in its footer (:func:`warehouse.catalog.folded_metadata`): from the moment it
    exists, readers leave the sources out, so a crash before the deletes doubles no row (issue 28).
    With fewer than ``min_segments`` sources nothing is written, but sources holding only rows
    already compacted (left by a run that died part way through its deletes) are deleted.
    ``write_sort`` orders the written rows when it differs from ``sort_by`` (a closed day's merge).
    Without ``identity_unique_in_folder`` (story changes: unique by construction, keyed by offset),
    the compacted segments' rows are not read: a source is redundant only when one names it.
    """
    others = sorted(k for k in compacted if k not in sources)
    held = held_by_compacted(store, others)
    seen = _compacted_identities(store, others, identity) if identity_unique_in_folder else set()
    redundant = [k for k, t in sorted(sources.items())
                 if k.rsplit("/", 1)[-1] in held or (identity and set(_identities(t, identity)) <= seen)]
    if len(sources) < min_segments:
        doomed = redundant
    else:
        fresh = [sources[k] for k in sorted(sources) if k not in redundant]
        if fresh:
            table = pa.concat_tables(fresh).sort_by([(c, "ascending") for c in sort_by])
            if identity:  # without one (a merge of disjoint compacted segments) every row is kept
                keep = []
                for row_id in _identities(table, identity):
                    keep.append(row_id not in seen)
                    seen.add(row_id)
                table = table.filter(pa.array(keep, pa.bool_()))
            if write_sort:
                table = table.sort_by([(c, "ascending") for c in write_sort])
            if table.num_rows:
                key = f"{folder}/{COMPACT_PREFIX}{content_segment_id(table)}.parquet"
                if write_segment(store, key, table, schema, metadata=folded_metadata(sources),
                                 row_group_rows=COMPACTED_ROW_GROUP_ROWS):
                    report.written_segments += 1
        doomed = sorted(sources)
    for source in doomed:
        store.delete(source)
        report.compacted_segments += 1


def compact_folder(store: ObjectStore, table: LogTable, folder: str, keys: Iterable[str], *,
                   min_segments: int = 4, report: MaintenanceReport | None = None) -> MaintenanceReport:
    """Compact the segments ``keys`` of one folder of a log, as the hourly maintenance does (the
    folder's other compacted segments are what rows stored twice are checked against)."""
    report = report or MaintenanceReport()
    keys = sorted(keys)
    compacted = [k for k in list_segments(store, f"{folder}/") if is_compacted(k) and k not in keys]
    _compact(store, folder, _read_each(store, keys, table.schema, report), compacted, table.schema,
             list(table.compact_identity), list(table.compact_sort), min_segments, report,
             identity_unique_in_folder=table.name != "story_changes")
    return report


def _compacted_identities(store: ObjectStore, keys: list[str], identity: list[str]) -> set[tuple[object, ...]]:
    """The identities of the rows compacted segments hold, reading only those columns; a segment
    that cannot be read is left out (its rows still in sources are written again, into a new
    compacted segment, instead of being deleted with them)."""
    fs, base = filesystem_of(store)
    seen: set[tuple[object, ...]] = set()
    for key in keys:
        try:
            with fs.open_input_file(f"{base}/{key}") as handle:  # on this thread (warehouse.tables)
                table = pq.ParquetFile(handle, pre_buffer=False).read(columns=identity, use_threads=False)
        except (pa.ArrowException, OSError) as e:
            if store.head(key) is not None:
                record_damage(key, f"corrupt: unreadable Parquet: {describe_error(e)}", "skipped")
            continue
        seen.update(_identities(table, identity))
    return seen


def _worth_compacting(small: list[str], compacted: list[str], min_segments: int) -> bool:
    """Enough small segments to merge, or a compacted one that leftovers of a crashed run may repeat."""
    return bool(small) and (len(small) >= min_segments or bool(compacted))


def _read_each(store: ObjectStore, keys: Iterable[str], schema: pa.Schema,
               report: MaintenanceReport | None = None) -> dict[str, pa.Table]:
    """Each readable segment; a corrupt one is left out (recorded), so it is neither merged nor deleted.

    A segment with columns this release does not know was written by a newer one (a deployment
    being upgraded): it is left for that release to compact (a note, not damage), since merging it
    here would drop those columns (issue 32).
    """
    tables = {}
    newer = 0
    for key in keys:
        raw = stored_segment(store, key, "skipped")
        if raw is None:
            continue
        if any(schema.get_field_index(n) < 0 for n in raw.schema.names):
            newer += 1
            continue
        table = _evolved(raw, schema, key)
        if table is not None:
            tables[key] = table
    if newer and report is not None:
        report.notes.append(f"{newer} segments hold columns of a newer release: left for it to compact")
    return tables


def _evolved(raw: pa.Table, schema: pa.Schema, key: str) -> pa.Table | None:
    try:
        return evolve_to_schema(raw, schema, key=key)
    except SchemaMismatchError as e:
        record_damage(key, f"corrupt: {e.reason}", "skipped")
        return None


@dataclass(frozen=True, slots=True)
class RankConsumption:
    """What rank's story aggregates have folded: segments by key, each language's next change offset."""

    segments: frozenset[str]
    offsets: dict[str, int]


def rank_consumption(store: ObjectStore) -> RankConsumption | None:
    """What the story aggregates consumed; None when there are none, or they are unreadable (the
    next rank cycle rebuilds them from every segment, compacted ones too)."""
    pointer, _ = read_pointer(store)
    if pointer is None:
        return None
    try:
        manifest = read_manifest(store, pointer["manifest"])
    except AggregatesUnreadableError:
        return None
    segments = set(manifest["articles"]["consumed"]) | set((manifest.get("listings") or {}).get("consumed", []))
    return RankConsumption(frozenset(segments), {str(k): int(v) for k, v in manifest["offsets"].items()})


def compact_logs(store: ObjectStore, now: datetime, *, min_segments: int = 4) -> MaintenanceReport:
    """Merge small segments into compacted ones, per folder (see the module docstring).

    An article segment is merged once the writer of every language it holds, and every writer with
    a checkpoint, has consumed it (writers never read compacted segments; a language whose writer
    has not committed yet has consumed nothing). Fetch, listing and click segments are merged
    whenever there are enough, and story-change segments once their language writer has committed
    them (below its checkpoint's offset) and rank's aggregates folded them, per folder: every query
    plans its files from their footers (issue 28), so an hour's segments, not a day's, is what a
    query over the last hour opens.
    """
    report = MaintenanceReport()
    checkpoints = writer_checkpoints(store)
    consumed = set.intersection(*checkpoints.values()) if checkpoints else set()
    rank = rank_consumption(store)
    if rank is not None:
        consumed &= rank.segments
    waiting: set[str] = set()
    for folder, keys in sorted(_by_folder(list_segments(store, layout.ARTICLES_PREFIX)).items()):
        compacted = [k for k in keys if is_compacted(k)]
        candidates = [k for k in keys if not is_compacted(k) and k in consumed]
        if not _worth_compacting(candidates, compacted, min_segments):
            continue
        sources = {}
        for key, table in _read_each(store, candidates, ARTICLES_SCHEMA).items():
            languages = {v for v in table.column("language").to_pylist() if v}
            missing = {lang for lang in languages if key not in checkpoints.get(lang, set())}
            if missing:
                waiting |= missing
            else:
                sources[key] = table
        articles = LOG_TABLES["articles"]
        _compact(store, folder, sources, compacted, ARTICLES_SCHEMA, list(articles.compact_identity),
                 list(articles.compact_sort), min_segments, report)
    if waiting:
        report.notes.append(f"article segments wait for the first commit of the writer of {', '.join(sorted(waiting))}")
    click_folders = _by_folder(list_segments(store, layout.CLICKS_PREFIX))
    for folder, keys in sorted(click_folders.items()):
        day = layout.partition_day(folder)
        compacted = [k for k in keys if is_compacted(k)]
        small = [k for k in keys if not is_compacted(k)]
        if day is None or not _worth_compacting(small, compacted, min_segments):
            continue
        # A click token lives a day (NEWSROOM_SERVING_CLICK_TOKEN_TTL_SECONDS): a reload can land in
        # the next day's folder, so the day before's clicks count as compacted ones too.
        previous = f"{layout.CLICKS_PREFIX}date={(datetime.strptime(day, '%Y-%m-%d') - timedelta(days=1)):%Y-%m-%d}"
        earlier = [k for k in click_folders.get(previous, []) if is_compacted(k)]
        clicks = LOG_TABLES["clicks"]
        _compact(store, folder, _read_each(store, small, CLICKS_SCHEMA), [*compacted, *earlier], CLICKS_SCHEMA,
                 list(clicks.compact_identity), list(clicks.compact_sort), min_segments, report)
    # Fetches and listings (the dashboards' logs, issue 18): one segment per run, complete once
    # written, so merged at every maintenance run, today's too (every rank and health run reads
    # them through warehouse.duck.connect, and a day holds one segment per minute).
    for metric in (LOG_TABLES["fetches"], LOG_TABLES["listings"]):
        for folder, keys in sorted(_by_folder(list_segments(store, metric.prefix)).items()):
            compacted = [k for k in keys if is_compacted(k)]
            small = [k for k in keys if not is_compacted(k)
                     and (rank is None or metric.name != "listings" or k in rank.segments)]
            if layout.partition_day(folder) is None or not _worth_compacting(small, compacted, min_segments):
                continue
            _compact(store, folder, _read_each(store, small, metric.schema), compacted, metric.schema,
                     list(metric.compact_identity), list(metric.compact_sort), min_segments, report)
    first_uncommitted = _first_uncommitted_changes(store)
    for folder, keys in sorted(_by_folder(list_segments(store, layout.STORY_CHANGES_PREFIX)).items()):
        compacted = [k for k in keys if is_compacted(k)]
        small = sorted(k for k in keys if not is_compacted(k) and k < first_uncommitted.get(folder, ""))
        if not _worth_compacting(small, compacted, min_segments):
            continue
        tables = _read_each(store, small, STORY_CHANGES_SCHEMA)
        if rank is not None:  # only changes the story aggregates folded (a prefix of the offsets)
            folded = rank.offsets.get(folder.rsplit("language=", 1)[-1], 0)
            tables = {k: t for k, t in tables.items()
                      if t.num_rows and (pc.max(t.column("offset")).as_py() or 0) < folded}
            if not _worth_compacting(list(tables), compacted, min_segments):
                continue
        _compact(store, folder, tables, compacted, STORY_CHANGES_SCHEMA, ["change_id"], ["offset"],
                 min_segments, report, identity_unique_in_folder=False)
    return report


MERGE_MAX_BYTES = 512 * 1024 * 1024
"""Most uncompressed bytes (as the footers count them) one merged segment of a closed day holds:
a day past this is merged into several, so maintenance's memory stays bounded at any volume."""


def merge_closed_days(store: ObjectStore, now: datetime, *, max_bytes: int = MERGE_MAX_BYTES,
                      report: MaintenanceReport | None = None) -> MaintenanceReport:
    """Merge each closed day's compacted segments into one (or a few, past ``max_bytes``).

    A day folder of a log before ``now``'s day that holds only compacted segments, two or more, is
    merged, its rows sorted by the table's ``merge_sort`` (articles by id, so a lookup by article
    id reads a row group per merged segment); story changes are merged per language and UTC day of
    their newest change. The merged segment names the segments it holds (readers leave them out
    at once), then they are deleted: a query over a month opens a few dozen files, not thousands.
    Segments from a newer release (columns this one does not know) are left as they are.
    """
    report = report or MaintenanceReport()
    today = now.strftime("%Y-%m-%d")
    fs, base = filesystem_of(store)
    for name, table in LOG_TABLES.items():
        for folder, keys in sorted(_by_folder(list_segments(store, table.prefix)).items()):
            day = layout.partition_day(folder)
            if name != "story_changes" and (day is None or day >= today or not all(map(is_compacted, keys))):
                continue
            compacted = sorted(k for k in keys if is_compacted(k))
            held = held_by_compacted(store, compacted)
            for key in compacted:  # held by a merge that died before deleting it
                if key.rsplit("/", 1)[-1] in held:
                    store.delete(key)
                    report.compacted_segments += 1
            groups: dict[str, list[tuple[str, int]]] = defaultdict(list)
            for key in (k for k in compacted if k.rsplit("/", 1)[-1] not in held):
                try:
                    metadata = pq.read_metadata(f"{base}/{key}", filesystem=fs)
                except (pa.ArrowException, OSError):
                    continue  # damaged or gone: left for `newsroom doctor`
                if any(table.schema.get_field_index(n) < 0 for n in metadata.schema.to_arrow_schema().names):
                    continue
                group = day or _newest_day(metadata, table.time_column)
                if group is None or group >= today:
                    continue
                size = sum(metadata.row_group(g).total_byte_size for g in range(metadata.num_row_groups))
                groups[group].append((key, size))
            for members in groups.values():
                for batch in _size_bounded(members, max_bytes):
                    if len(batch) < 2:
                        continue
                    sources = _read_each(store, batch, table.schema, report)
                    if len(sources) == len(batch):
                        _compact(store, folder, sources, [], table.schema, [], list(table.merge_sort), 2,
                                 report, identity_unique_in_folder=False)
    return report


def _newest_day(metadata: pq.FileMetaData, column: str) -> str | None:
    """The UTC day of a segment's newest ``column`` value, from its statistics."""
    newest = None
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            if chunk.path_in_schema == column and chunk.statistics is not None and chunk.statistics.has_min_max:
                value = chunk.statistics.max
                newest = value if newest is None or value > newest else newest
    return newest.strftime("%Y-%m-%d") if isinstance(newest, datetime) else None


def _size_bounded(members: list[tuple[str, int]], max_bytes: int) -> list[list[str]]:
    """Consecutive runs of ``members`` whose sizes add up to at most ``max_bytes`` (a larger one alone).

    >>> _size_bounded([("a", 4), ("b", 4), ("c", 4), ("d", 9)], 8)
    [['a', 'b'], ['c'], ['d']]
    """
    batches: list[list[str]] = []
    total = 0
    for key, size in members:
        if not batches or total + size > max_bytes:
            batches.append([])
            total = 0
        batches[-1].append(key)
        total += size
    return batches


def prune_writer_states(store: ObjectStore, *, keep: int = 3, report: MaintenanceReport | None = None
                        ) -> MaintenanceReport:
    """Delete a language writer's state objects and blobs no commit can need again.

    Version 4 objects (``base-*``, ``delta-*``; issue 15): every one the checkpoint's chain does
    not name, up to its offset, is deleted, except the newest compaction's base (the writer may
    still adopt it). JSON state blobs (``state-*``): the newest ``keep`` and the one the checkpoint
    names stay. An object or blob past the checkpoint's offset is never deleted: it may be the one
    a crashed run's change segment names, which the writer's restart loads to roll forward.
    """
    report = report or MaintenanceReport()
    for folder, keys in sorted(_by_folder(store.list(layout.STORY_STATE_PREFIX)).items()):
        checkpoint_key = f"{folder}/checkpoint.json"
        if checkpoint_key not in keys:
            continue
        checkpoint = read_json_payload(store, checkpoint_key)
        if checkpoint is None:
            continue  # unknown: keep every blob, the writer rebuilds the checkpoint from them
        current, committed = checkpoint.get("state_key"), int(checkpoint.get("offset", 0))
        chain = {current, *checkpoint.get("deltas", [])}
        note = read_json_payload(store, f"{folder}/compacted.json") if f"{folder}/compacted.json" in keys else None
        adoptable = note.get("base") if note else None
        states = sorted(k for k in keys if k.rsplit("/", 1)[-1].startswith("state-"))
        doomed = [k for k in states[:-keep] if k != current]
        doomed += [k for k in keys if k.endswith(".nrws") and k not in chain and k != adoptable]
        for key in doomed:
            offset = layout.state_object_offset(key)
            if offset is not None and offset <= committed:
                store.delete(key)
                report.pruned_writer_states += 1
    return report


def prune_rank_aggregates(store: ObjectStore, *, keep: int = 5, report: MaintenanceReport | None = None
                          ) -> MaintenanceReport:
    """Delete rank aggregates' objects (``state/rank/``) that neither the live manifest names nor a
    fold of the last ``keep`` could still be writing: a cycle that read the live manifest folds onto
    what it names, and writes under the next sequence number. Nothing is pruned while the pointer
    or its manifest is unreadable (the next cycle rebuilds, and writes past them)."""
    report = report or MaintenanceReport()
    pointer, _ = read_pointer(store)
    if pointer is None:
        return report
    try:
        manifest = read_manifest(store, pointer["manifest"])
    except AggregatesUnreadableError:
        return report
    live = int(pointer["seq"])
    named = {pointer["manifest"], *manifest["stories"], *manifest["members"],
             *(manifest[k] for k in ("pending", "ledger", "aliases") if k in manifest),
             *([manifest["member_cache"]["key"]] if isinstance(manifest.get("member_cache"), dict) else [])}
    for key in store.list(AGGREGATES_PREFIX):
        seq = seq_of_key(key)
        if seq is not None and seq < live - keep and key not in named:
            store.delete(key)
            report.pruned_rank_aggregates += 1
    return report


def apply_retention(store: ObjectStore, now: datetime, *, article_days: int = 30, click_days: int = 90,
                    report: MaintenanceReport | None = None) -> MaintenanceReport:
    """Delete article partitions older than ``article_days`` and click partitions older than ``click_days``;
    fetch and listing partitions (the dashboards' logs) go with the articles.

    Story changes follow their articles: a compacted story-change segment whose newest change is
    older than ``article_days`` is deleted.
    """
    report = report or MaintenanceReport()
    for prefix, days in [(layout.ARTICLES_PREFIX, article_days), (layout.CLICKS_PREFIX, click_days),
                         (layout.FETCHES_PREFIX, article_days), (layout.LISTINGS_PREFIX, article_days)]:
        cutoff = (now - timedelta(days=days)).strftime("%Y-%m-%d")
        for key in list_segments(store, prefix):
            day = layout.partition_day(key)
            if day is not None and day < cutoff:
                store.delete(key)
                report.deleted_for_retention += 1
    horizon = now - timedelta(days=article_days)
    for key in list_segments(store, layout.STORY_CHANGES_PREFIX):
        if not is_compacted(key):
            continue
        with collect_damage() as damaged:
            table = read_segments(store, [key], STORY_CHANGES_SCHEMA, skip_damaged=True)
        if damaged:
            continue  # unknown age: kept for `newsroom doctor`
        newest = pc.max(table.column("changed_at")).as_py()
        if newest is not None and newest < horizon:
            store.delete(key)
            report.deleted_for_retention += 1
    return report


def prune_page_versions(store: ObjectStore, now: datetime | None = None, *, keep: int = 20,
                        keep_for: timedelta = timedelta(hours=48), report: MaintenanceReport | None = None
                        ) -> MaintenanceReport:
    """Delete page versions that neither a rollback nor time travel can need.

    A version stays when it is live or newer, among the ``keep`` before the live one (rollback), or
    published within ``keep_for`` of ``now`` (``newsroom rank --as-of`` rebuilds and compares it).
    """
    report = report or MaintenanceReport()
    horizon = (now - keep_for).strftime("%Y-%m-%dT%H:%M:%SZ") if now is not None else None
    for folder, keys in sorted(_by_folder(store.list(layout.PAGES_PREFIX)).items()):
        pointer_key = f"{folder}/latest.json"
        if pointer_key not in keys:
            continue
        pointer = read_json_payload(store, pointer_key)
        try:
            live = int(pointer["version"]) if pointer is not None else None
        except (KeyError, TypeError, ValueError):
            live = None
        if live is None:
            continue  # the live version is unknown: prune nothing until the pointer is replaced
        for key in keys:
            name = key.rsplit("/", 1)[-1]
            if not (name.startswith("v") and name.endswith(".json") and name[1:-5].isdigit()):
                continue
            if int(name[1:-5]) >= live - keep:
                continue
            if horizon is not None:
                payload = read_json_payload(store, key)
                if payload is None or str(payload.get("as_of") or "") >= horizon:
                    continue  # a corrupt one is left for `newsroom doctor`, which quarantines it
            store.delete(key)
            report.pruned_page_versions += 1
    return report


def delete_stale_temporaries(store: ObjectStore, *, older_than_seconds: float = TEMPORARY_MAX_AGE_SECONDS,
                             report: MaintenanceReport | None = None) -> MaintenanceReport:
    """Delete what puts killed mid-write left behind (issue 16), once older than any put in flight.

    Local: the ``.<name>.<uuid>.tmp`` file a put writes before moving it into place; S3: an
    unfinished multipart upload. Neither is an object any reader lists, so nothing else ever
    removes them.
    """
    report = report or MaintenanceReport()
    for temporary in list_temporaries(store):
        if temporary.age_seconds >= older_than_seconds:
            delete_temporary(store, temporary)
            report.deleted_temporaries += 1
    return report
