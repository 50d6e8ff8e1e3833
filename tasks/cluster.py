"""The cluster writer: one per language, fenced by a conditional put on its checkpoint.

Each run reads the article segments it has not consumed, assigns every new article of its language
to a story (or flags it as a copy), appends the decisions to ``log/story_changes`` and then replaces
the checkpoint with If-Match. A second writer for the same language loses that put (412) and stops,
so exactly one set of decisions is kept.

A commit writes three objects, in order: the run's state object, under a key of its own (its
offset and a hash of its bytes; never contested, so one left by a run that died is garbage and
never in the way), then the change segment at the checkpoint's offset (written once: the first
run's decisions hold it), which names that state object in its Parquet metadata, then the
checkpoint. A run that died after its change segment is rolled forward by the next, to the state
the segment names.

The state object is a delta of what the run changed, after the base and deltas the checkpoint
names (``tasks.writer_state``, issue 15); the checkpoint names the whole chain. State blobs of the
JSON format before (``state-*.json.zst``, ``.json.gz``) still load, and the first commit after one
writes a base.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks import events
from tasks.crashpoints import crash_point
from tasks.errors import WriterFencedError
from tasks.writer_state import (
    COMPACT_EVERY,
    SEEN_ARTICLES_KEPT,
    StateObjectError,
    StoredState,
    chain_named_by,
    compact_writer_state,
    load_chain,
    paused_gc,
    read_state_object,
    store_state,
)
from transforms.clustering import ClusterParams, LanguageClusterer
from transforms.clustering.columns import mark_committed
from transforms.features import ArticleFeatures, features_from_row
from transforms.records import ChangeKind, StoryChange
from warehouse import layout
from warehouse.checkpoints import WriterCheckpoint
from warehouse.damage import DamagedObject, collect_damage, describe_error, record_damage
from warehouse.errors import (
    CorruptObjectError,
    ObjectNotFoundError,
    PreconditionFailedError,
    SchemaMismatchError,
    StateBlobError,
)
from warehouse.maintenance import is_compacted
from warehouse.schemas import ARTICLES_SCHEMA, STORY_CHANGES_SCHEMA
from warehouse.state_blobs import decode_state
from warehouse.store import ObjectStore
from warehouse.tables import (
    list_segments,
    parquet_bytes_to_table,
    read_segment,
    read_segments,
    rows_to_table,
    stored_segment,
    write_segment,
)

log = logging.getLogger(__name__)

STATE_KEY_METADATA = b"newsroom.state_key"
"""Key of a change segment's Parquet metadata naming the state (object or blob) its decisions lead to."""


def _checkpoint_at(offset: int, chain: list[str], consumed: list[str], updated_at: object) -> WriterCheckpoint:
    """A checkpoint naming ``chain`` (a version 4 base and its deltas, or one JSON blob)."""
    return WriterCheckpoint(offset, chain[0] if chain else None, tuple(consumed),
                            updated_at if isinstance(updated_at, str) else None, tuple(chain[1:]))


def _has_history(store: ObjectStore, language: str) -> bool:
    """Whether a writer of ``language`` ever committed: a state blob or a change segment exists."""
    return bool(store.list(f"{layout.STORY_STATE_PREFIX}{language}/")) or \
        bool(list_segments(store, f"{layout.STORY_CHANGES_PREFIX}language={language}/"))


def _load_checkpoint(store: ObjectStore, language: str) -> tuple[WriterCheckpoint, str | None]:
    """The checkpoint and its ETag; a fresh one (ETag None) before the language's first commit.

    A corrupt checkpoint, or a missing one while the language has state blobs or change segments,
    is rebuilt from them (:func:`rebuild_checkpoint`) and put back fenced, If-Match on the corrupt
    bytes or If-None-Match; the damage is recorded (issue 16). Starting fresh instead would
    re-cluster every article under new story ids and collide with the change log's offsets.

    Raises:
        CorruptObjectError: It is damaged and no state blob matches the change log.
        WriterFencedError: Another writer replaced it first.
    """
    key = layout.story_checkpoint_key(language)
    try:
        obj = store.get(key)
    except ObjectNotFoundError:
        if not _has_history(store, language):
            return WriterCheckpoint(), None
        problem, etag = "missing: the language has state blobs or change segments", None
    else:
        checkpoint = WriterCheckpoint.parse(obj.data)
        if checkpoint is not None:
            return checkpoint, obj.etag
        problem, etag = "corrupt: not a checkpoint", obj.etag
    rebuilt = rebuild_checkpoint(store, language)
    if rebuilt is None:
        record_damage(key, problem, "the writer stops: no state blob matches the change log (newsroom doctor)")
        raise CorruptObjectError(f"{problem}; no state blob matches the change log to rebuild it from", key=key)
    new_etag = put_checkpoint(store, language, rebuilt, etag)
    record_damage(key, problem, f"rebuilt at offset {rebuilt.offset} from {rebuilt.state_key}")
    return rebuilt, new_etag


def _state_offset(key: str) -> int | None:
    """The offset a state blob's or object's key names (``state-<offset>[-<hash>].json.zst``,
    ``base-<offset>-<hash>.nrws``, ``delta-...``)."""
    return layout.state_object_offset(key)


def _is_state_key(key: str) -> bool:
    return key.rsplit("/", 1)[-1].startswith(("state-", "base-", "delta-"))


def _checkpoint_from_state(store: ObjectStore, key: str, offset: int) -> WriterCheckpoint | None:
    """The checkpoint at ``offset`` naming the state ``key`` stands for (a state object: its chain,
    every link readable; a JSON blob: itself), or None when it cannot be read."""
    if layout.is_state_object_key(key):
        try:
            chain, header = chain_named_by(store, key)
            for link in chain:  # every link must read whole: a rebuilt checkpoint is one the writer loads
                read_state_object(store, link)
        except (ObjectNotFoundError, StateBlobError):
            return None
        return _checkpoint_at(offset, chain, list(header.get("consumed") or []), header.get("updated_at"))
    try:
        with paused_gc():
            blob = decode_state(store.get(key).data)
    except (ObjectNotFoundError, StateBlobError):
        return None
    updated_at = blob.get("updated_at")
    return WriterCheckpoint(offset, key, tuple(blob.get("consumed") or ()),
                            updated_at if isinstance(updated_at, str) else None)


def rebuild_checkpoint(store: ObjectStore, language: str) -> WriterCheckpoint | None:
    """The checkpoint the language's last commit left, rebuilt from the change log and state blobs.

    Its offset is one past the highest change offset stored (a run that died after its change
    segment is rolled forward, as :func:`open_writer` does); its state is the blob the newest
    change segment names, or else a readable blob stored at that offset, and its consumed segments
    and time are those that blob holds. Segments consumed by later commits without changes are
    read again, and hold nothing new for the language. A corrupt change segment is skipped
    (recorded). None when no readable blob sits at that offset.
    """
    end, named, newest_first = 0, None, -1
    for key in list_segments(store, f"{layout.STORY_CHANGES_PREFIX}language={language}/"):
        table = stored_segment(store, key, "skipped while rebuilding the checkpoint")
        if table is None:
            continue
        offsets = [o for o in table.column("offset").to_pylist() if o is not None]
        if offsets:
            end = max(end, max(offsets) + 1)
        first = key.rsplit("/", 1)[-1].removesuffix(".parquet")
        if first.isdigit() and int(first) > newest_first:
            newest_first = int(first)
            value = (table.schema.metadata or {}).get(STATE_KEY_METADATA)
            named = value.decode() if value else None
    blobs = [k for k in store.list(f"{layout.STORY_STATE_PREFIX}{language}/")
             if _is_state_key(k) and _state_offset(k) == end]
    for key in sorted(blobs, key=lambda k: (k != named, k)):
        rebuilt = _checkpoint_from_state(store, key, end)
        if rebuilt is not None:
            return rebuilt
    return WriterCheckpoint() if end == 0 else None


@dataclass(slots=True)
class _KeptState:
    checkpoint_etag: str
    clusterer: LanguageClusterer
    seen: dict[str, str]


class KeptStates:
    """Writer states kept in memory between runs of one long-lived process (see
    :func:`keep_states_in_memory`), each valid only while the checkpoint's ETag is the one its
    own commit got back. Loading a 50,000-story state takes 17–19 s (bench/writer_checkpoint.py);
    a run that finds its state here skips that. A state is taken out before a run changes it and
    put back only after that run's commit, so a failed or fenced run never leaves a state that
    differs from the stored one.
    """

    def __init__(self) -> None:
        self._states: dict[tuple[int, str], _KeptState] = {}
        self.enabled = False
        self.hits = 0

    def take(self, store: ObjectStore, language: str, etag: str | None) -> tuple[LanguageClusterer, dict[str, str]] | None:
        kept = self._states.pop((id(store), language), None)
        if kept is None or etag is None or kept.checkpoint_etag != etag:
            return None
        self.hits += 1
        return kept.clusterer, kept.seen

    def put(self, store: ObjectStore, language: str, etag: str | None, clusterer: LanguageClusterer,
            seen: dict[str, str]) -> None:
        """Keep the state stored under the checkpoint with ``etag`` (nothing when there is no checkpoint)."""
        if self.enabled and etag is not None:
            self._states[(id(store), language)] = _KeptState(etag, clusterer, seen)

    def forget(self, store: ObjectStore, language: str) -> None:
        """Drop the state kept for ``language`` (the next run loads it from the store)."""
        self._states.pop((id(store), language), None)

    def clear(self) -> None:
        self._states.clear()


KEPT_STATES = KeptStates()


@contextmanager
def keep_states_in_memory() -> Iterator[KeptStates]:
    """Within this block, each writer run of this process reuses the state its previous run
    committed, instead of loading it again, as long as no other writer has committed since."""
    KEPT_STATES.enabled = True
    KEPT_STATES.hits = 0
    try:
        yield KEPT_STATES
    finally:
        KEPT_STATES.enabled = False
        KEPT_STATES.clear()


def rewind_writer(store: ObjectStore, language: str, now: datetime) -> WriterCheckpoint:
    """Point a language writer whose state is lost at its newest readable state blob, or a fresh one.

    For ``newsroom doctor --repair`` when the state blob the checkpoint names is missing or corrupt
    (or the checkpoint cannot be rebuilt). The offset stays past every change stored, so no
    decision in the log is overwritten; the articles consumed after the blob's state are read again
    and decided again, and their new rows supersede the old ones (an article's latest assignment
    wins, as for any reassignment). A fresh state re-clusters every article in segments not yet
    compacted. The checkpoint is put with If-Match on what was read, so a running writer is fenced.

    Returns:
        The new checkpoint.

    Raises:
        WriterFencedError: Another writer replaced the checkpoint meanwhile.
    """
    key = layout.story_checkpoint_key(language)
    try:
        obj = store.get(key)
    except ObjectNotFoundError:
        obj = None
    checkpoint = WriterCheckpoint.parse(obj.data) if obj is not None else None
    offset = max(checkpoint.offset if checkpoint else 0, _change_log_end(store, language))
    # The state the checkpoint names is the one lost; an earlier link of its chain may still load.
    damaged = (checkpoint.chain or [None])[-1] if checkpoint else None
    blobs = [k for k in store.list(f"{layout.STORY_STATE_PREFIX}{language}/")
             if _is_state_key(k) and k != damaged and (_state_offset(k) or 0) <= offset]
    rewound = WriterCheckpoint(offset, updated_at=now.astimezone(UTC).isoformat())
    for blob_key in sorted(blobs, key=lambda k: (_state_offset(k) or 0, k), reverse=True):
        try:
            if layout.is_state_object_key(blob_key):
                chain, header = chain_named_by(store, blob_key)
                load_chain(store, chain)
                rewound = replace(rewound, state_key=chain[0], deltas=tuple(chain[1:]),
                                  consumed=tuple(header.get("consumed") or ()))
                break
            with paused_gc():
                blob = decode_state(store.get(blob_key).data)
            LanguageClusterer.from_state(blob["clusterer"])
        except (ObjectNotFoundError, StateBlobError, KeyError, TypeError, ValueError):
            continue
        rewound = replace(rewound, state_key=blob_key, consumed=tuple(blob.get("consumed") or ()))
        break
    put_checkpoint(store, language, rewound, obj.etag if obj is not None else None)
    KEPT_STATES.forget(store, language)
    log.warning("writer_rewound language=%s offset=%d state_key=%s", language, offset, rewound.state_key)
    return rewound


def _change_log_end(store: ObjectStore, language: str) -> int:
    """One past the highest offset in the language's readable change segments (0 when none)."""
    end = 0
    for key in list_segments(store, f"{layout.STORY_CHANGES_PREFIX}language={language}/"):
        try:
            offsets = [o for o in read_segment(store, key, STORY_CHANGES_SCHEMA).column("offset").to_pylist()
                       if o is not None]
        except (ObjectNotFoundError, CorruptObjectError, SchemaMismatchError):
            continue
        end = max([end, *(o + 1 for o in offsets)])
    return end


def load_writer_state(store: ObjectStore, language: str, checkpoint: WriterCheckpoint,
                      params: ClusterParams | None = None) -> tuple[LanguageClusterer, dict[str, str]]:
    """The writer's clusterer and seen-article map; a fresh one (with ``params``) before the first commit."""
    if checkpoint.state_key is None:
        return LanguageClusterer(language, params), {}
    key = checkpoint.state_key
    stops = "the writer of this language stops until `newsroom doctor --repair` rewinds it"
    if layout.is_state_object_key(key):
        try:
            clusterer, seen, _ = load_chain(store, checkpoint.chain)
            return clusterer, seen
        except ObjectNotFoundError as e:
            lost = e.key or key
            record_damage(lost, "missing: a state object the checkpoint names", stops)
            raise ObjectNotFoundError("missing: a state object the checkpoint names", key=lost) from e
        except StateObjectError as e:
            record_damage(e.key, f"corrupt: {e.reason}", stops)
            raise CorruptObjectError(f"unreadable writer state: {e.reason}", key=e.key) from e
    try:
        data = store.get(key).data
    except ObjectNotFoundError as e:
        record_damage(key, "missing: the state blob the checkpoint names", stops)
        raise ObjectNotFoundError("missing: the state blob the checkpoint names", key=key) from e
    # Parsing builds millions of small objects, none of them garbage: the cyclic collector
    # would walk them again and again (bench/writer_checkpoint.py).
    try:
        with paused_gc():
            blob = decode_state(data)
            return LanguageClusterer.from_state(blob["clusterer"]), dict(blob["seen"])
    except (StateBlobError, KeyError, TypeError, ValueError) as e:
        record_damage(key, f"corrupt: {describe_error(e)}", stops)
        raise CorruptObjectError(f"unreadable writer state: {describe_error(e)}", key=key) from e


def languages_in_log(store: ObjectStore) -> list[str]:
    """Languages that have articles in the log (read from segment metadata-light scans)."""
    return languages_of_segments(store, list_segments(store, layout.ARTICLES_PREFIX))


def languages_of_segments(store: ObjectStore, keys: list[str]) -> list[str]:
    """Languages that have articles in the article segments ``keys`` (damaged ones skipped)."""
    if not keys:
        return []
    table = read_segments(store, keys, ARTICLES_SCHEMA, skip_damaged=True).select(["language"])
    return sorted({v for v in table.column("language").to_pylist() if v})


def _orphan_changes(store: ObjectStore, language: str, checkpoint: WriterCheckpoint) -> tuple[int, str | None] | None:
    """A change segment written at the checkpoint's offset by a run that died before its checkpoint
    (its state blob was written first, so it can be rolled forward): its number of rows and the
    state blob it names (None if written before segments named their state); None if none."""
    key = layout.story_changes_key(language, checkpoint.offset)
    try:
        obj = store.get(key)
    except ObjectNotFoundError:
        return None
    try:
        table = parquet_bytes_to_table(obj.data, key)
    except CorruptObjectError as e:
        # No commit names it, and its rows cannot be read to roll forward: this run's own
        # decisions replace it (``write_segment`` puts them over a corrupt segment, If-Match).
        record_damage(key, f"corrupt: {e.reason}", "not rolled forward; this run's decisions replace it")
        return None
    named = (table.schema.metadata or {}).get(STATE_KEY_METADATA)
    return int(table.num_rows), named.decode() if named else None


def _read_state(store: ObjectStore, key: str) -> tuple[str, bytes]:
    """The state blob at ``key`` or, written before the Zstandard format, at its gzip key."""
    try:
        return key, store.get(key).data
    except ObjectNotFoundError:
        legacy = layout.state_key_to_legacy(key)
        return legacy, store.get(legacy).data


def open_writer(store: ObjectStore, language: str) -> tuple[WriterCheckpoint, str | None]:
    """Load a language writer's checkpoint, first rolling forward a run that died between its
    change segment and its checkpoint (so none of its decisions is lost or made twice).

    The state rolled forward to is the one the change segment names; a segment written before
    segments named their state has its state at the one key of its offset.
    """
    for _ in range(3):
        checkpoint, etag = _load_checkpoint(store, language)
        orphan = _orphan_changes(store, language, checkpoint)
        if orphan is None:
            return checkpoint, etag
        rows, named = orphan
        if named is not None and layout.is_state_object_key(named):
            chain, header = chain_named_by(store, named)
            rolled = _checkpoint_at(checkpoint.offset + rows, chain, list(header["consumed"]), header["updated_at"])
        else:
            state_key, data = _read_state(store, named or layout.story_state_key(language, checkpoint.offset + rows))
            with paused_gc():
                blob = decode_state(data)
            rolled = WriterCheckpoint(checkpoint.offset + rows, state_key, tuple(blob["consumed"]), blob["updated_at"])
        try:
            put_checkpoint(store, language, rolled, etag)
            log.info("cluster_rolled_forward language=%s offset=%d", language, rolled.offset)
        except WriterFencedError:
            continue  # another run moved it first; read it again
    raise WriterFencedError(f"checkpoint of {language} keeps moving", key=layout.story_checkpoint_key(language))


def put_checkpoint(store: ObjectStore, language: str, checkpoint: WriterCheckpoint, etag: str | None) -> str:
    """Replace the checkpoint, fenced; returns its new ETag."""
    data = checkpoint.to_json()
    try:
        if etag is None:
            return store.put(layout.story_checkpoint_key(language), data, if_none_match=True)
        return store.put(layout.story_checkpoint_key(language), data, if_match=etag)
    except PreconditionFailedError as e:
        raise WriterFencedError(f"checkpoint of {language} moved by another writer",
                                key=layout.story_checkpoint_key(language)) from e


def commit_writer(store: ObjectStore, language: str, etag: str | None, offset: int, changes: list[StoryChange],
                  clusterer: LanguageClusterer, seen: dict[str, str], consumed: list[str], now: datetime,
                  kill_before_checkpoint: bool = False, state_key: str | None = None, *,
                  chain: list[str] | None = None, seen_added: list[tuple[str, str]] | None = None,
                  compact_every: int = COMPACT_EVERY) -> int:
    """Commit a writer's decisions, fenced (see :func:`commit_writer_state`).

    Returns:
        The new offset.
    """
    return commit_writer_state(store, language, etag, offset, changes, clusterer, seen, consumed, now,
                               kill_before_checkpoint, state_key, chain=chain, seen_added=seen_added,
                               compact_every=compact_every)[0]


def commit_writer_state(store: ObjectStore, language: str, etag: str | None, offset: int,
                        changes: list[StoryChange], clusterer: LanguageClusterer, seen: dict[str, str],
                        consumed: list[str], now: datetime, kill_before_checkpoint: bool = False,
                        state_key: str | None = None, *, chain: list[str] | None = None,
                        seen_added: list[tuple[str, str]] | None = None,
                        compact_every: int = COMPACT_EVERY) -> tuple[int, StoredState]:
    """Commit a writer's decisions, fenced: state object, then change segment, then the checkpoint
    with If-Match. A writer that loses the change segment to other decisions, or the checkpoint
    to any other commit, raises :class:`WriterFencedError` and nothing of its own becomes visible.

    A commit that holds is announced as a ``newsroom.stories.committed`` event (rank acts on it at
    once, issue 31), a fenced one as ``newsroom.writer.fenced`` (an automation alerts on it).

    The state object is a delta of what changed since the chain the checkpoint names
    (:func:`tasks.writer_state.store_state`; a base when there is none yet). Its key is its own
    (its offset and a hash of its bytes), so it is never contested: one a crashed run left at the
    same offset is not in the way. The change segment names it, for :func:`open_writer`'s
    roll-forward, and the delta's header names the chain before it.

    Args:
        state_key: The state the checkpoint names now (its base), when ``chain`` is not given.
        chain: The base and deltas the checkpoint names now.
        seen_added: The input rows read since that chain (``seen`` holds them too).

    Returns:
        The new offset, and what was stored.
    """
    try:
        new_offset, stored = _commit_writer_state(
            store, language, etag, offset, changes, clusterer, seen, consumed, now, kill_before_checkpoint,
            state_key, chain=chain, seen_added=seen_added, compact_every=compact_every)
    except WriterFencedError as e:
        events.emit(events.WRITER_FENCED, events.resource_id("writer", language),
                    {"language": language, "offset": offset, "reason": str(e)[:500]})
        raise
    if changes:  # a commit that only marks segments consumed changes no story
        events.emit(events.STORIES_COMMITTED, events.resource_id("writer", language),
                    {"language": language, "offset": new_offset, "changes": len(changes),
                     "kinds": dict(Counter(c.kind for c in changes))})
    return new_offset, stored


def _commit_writer_state(store: ObjectStore, language: str, etag: str | None, offset: int,
                         changes: list[StoryChange], clusterer: LanguageClusterer, seen: dict[str, str],
                         consumed: list[str], now: datetime, kill_before_checkpoint: bool = False,
                         state_key: str | None = None, *, chain: list[str] | None = None,
                         seen_added: list[tuple[str, str]] | None = None,
                         compact_every: int = COMPACT_EVERY) -> tuple[int, StoredState]:
    """See :func:`commit_writer_state`."""
    new_offset = offset + len(changes)
    if len(seen) > SEEN_ARTICLES_KEPT:
        for article_id in list(seen)[:len(seen) - SEEN_ARTICLES_KEPT]:
            del seen[article_id]
    updated_at = now.astimezone(UTC).isoformat()
    if chain is None:  # a caller naming only the state: the chain is the checkpoint's (fenced by ``etag``)
        chain = []
        if state_key is not None:
            stored_checkpoint, _ = _load_checkpoint(store, language)
            chain = stored_checkpoint.chain if stored_checkpoint.state_key == state_key else [state_key]
    current = chain
    stored = store_state(store, language, new_offset, current, clusterer, seen, seen_added or [], consumed,
                         updated_at, compact_every)
    state_key = stored.key
    crash_point("cluster.after_state")
    if changes:
        # The segment names the state its decisions lead to. When another run wrote the same rows
        # first, its segment names that run's state, which made the same decisions.
        schema = STORY_CHANGES_SCHEMA.with_metadata({STATE_KEY_METADATA: state_key.encode()})
        try:
            write_segment(store, layout.story_changes_key(language, offset),
                          rows_to_table([c.to_row() for c in changes], schema), schema)
        except PreconditionFailedError as e:
            raise WriterFencedError(f"changes of {language} at {offset} written by another writer",
                                    key=layout.story_changes_key(language, offset)) from e
    crash_point("cluster.after_changes")
    if kill_before_checkpoint:
        os.kill(os.getpid(), signal.SIGKILL)
    new_etag = put_checkpoint(store, language, _checkpoint_at(new_offset, stored.chain, consumed, updated_at), etag)
    mark_committed(clusterer)
    KEPT_STATES.put(store, language, new_etag, clusterer, seen)
    log.info("writer_state_stored language=%s kind=%s bytes=%d chain=%d rows=%s", language, stored.kind,
             stored.bytes, len(stored.chain), stored.rows)
    return new_offset, stored


def cluster_language(store: ObjectStore, language: str, now: datetime, kill_before_checkpoint: bool = False,
                     params: ClusterParams | None = None, compact_every: int | None = None) -> dict[str, Any]:
    """Assign this language's unconsumed articles to stories and commit, fenced. Returns a summary.

    See :func:`_cluster_language`; the writer's state is kept out of the cyclic garbage collector
    while the batch runs, and handed back to it afterwards.

    A language in the log that cannot name a writer (``"en us"``, written before the ingest
    normalised languages) is not clustered: the summary carries the ``error``, and the other
    languages' writers go on.
    """
    try:
        layout.story_checkpoint_key(language)
    except ValueError as e:
        log.error("cluster_language_refused language=%r error=%s", language, e)
        return {"language": language, "articles": 0, "committed": False, "error": f"{type(e).__name__}: {e}"}
    try:
        with collect_damage() as damaged:
            summary = _cluster_language(store, language, now, kill_before_checkpoint=kill_before_checkpoint,
                                        params=params, compact_every=compact_every)
        return with_damage(summary, damaged)
    finally:
        gc.unfreeze()


def with_damage(summary: dict[str, Any], damaged: list[DamagedObject]) -> dict[str, Any]:
    """``summary`` with ``damaged``: what the run could not read and did instead (when anything)."""
    return {**summary, "damaged": [asdict(d) for d in damaged]} if damaged else summary


def _with_copy_keys(clusterer: LanguageClusterer, rows: list[dict[str, Any]], chunk: int = 1_000
                    ) -> Iterator[tuple[dict[str, Any], ArticleFeatures, list[int] | None]]:
    """Each row with its features and its signature's LSH keys, the keys computed a chunk of
    rows at a time in one vectorised step (issue 15)."""
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        batch = [features_from_row(row) for row in part]
        yield from zip(part, batch, clusterer.copy_keys(batch), strict=True)


def _cluster_language(store: ObjectStore, language: str, now: datetime, kill_before_checkpoint: bool = False,
                     params: ClusterParams | None = None, compact_every: int | None = None) -> dict[str, Any]:
    """Assign this language's unconsumed articles to stories and commit, fenced. Returns a summary.

    ``kill_before_checkpoint`` (crash tests only) makes the process SIGKILL itself after its
    change segment is written and before its checkpoint moves. ``params`` apply to a language's
    first run only; later runs keep the parameters stored in the state. Once its chain holds
    ``compact_every`` deltas (default: the setting), the run folds it into a new base after its
    commit, unless a long-running writer compacts in the background (``compact_every=0``).
    """
    checkpoint, etag = open_writer(store, language)
    consumed = set(checkpoint.consumed)
    existing = list_segments(store, layout.ARTICLES_PREFIX)
    # Compacted segments hold only rows every writer has consumed (warehouse.maintenance).
    pending = [k for k in existing if k not in consumed and not is_compacted(k)]
    kept = KEPT_STATES.take(store, language, etag)
    clusterer, seen = kept or load_writer_state(store, language, checkpoint, params)
    # The loaded state is long-lived; keeping it out of the cyclic collector's scans doubled
    # assignment throughput with 50,000 active stories (bench/cluster_speed.py). A state kept
    # from the previous run is frozen as it is: a full collection would walk all of it again
    # (anything frozen is handed back to the collector when the run ends).
    if kept is None:
        gc.collect()
    gc.freeze()
    rows: list[dict[str, Any]] = []
    ready: list[str] = []
    for key in pending:
        try:
            segment = read_segment(store, key, ARTICLES_SCHEMA).to_pylist()
        except ObjectNotFoundError:
            continue  # compacted or expired since the listing
        except (CorruptObjectError, SchemaMismatchError) as e:
            # Not consumed: a repaired segment (restored, or rewritten by a rerun of its ingest)
            # is read by a later run, and until then every run names it again (issue 16).
            record_damage(key, f"corrupt: {e.reason}", "skipped; not marked consumed, so a repaired one is read later")
            continue
        if any(r["first_seen_at"] > now for r in segment):
            continue  # written by an ingest run ahead of this clock; consumed once ``now`` reaches it
        ready.append(key)
        rows.extend(r for r in segment if r["language"] == language)
    rows.sort(key=lambda r: (r["first_seen_at"], r["article_id"], r["version"]))
    offset = checkpoint.offset
    changes: list[StoryChange] = []
    kinds: Counter[str] = Counter()
    seen_added: list[tuple[str, str]] = []
    foreign_before = clusterer.foreign_embeddings
    for row, features, keys in _with_copy_keys(clusterer, rows):
        if seen.get(row["article_id"]) == row["content_hash"]:
            kinds["duplicate_input"] += 1
            continue
        # Most recently read last (a re-read moves to the end), so the newest SEEN_ARTICLES_KEPT
        # are kept, whether trimmed at every commit or once when a state is folded.
        seen.pop(row["article_id"], None)
        seen[row["article_id"]] = row["content_hash"]
        seen_added.append((row["article_id"], row["content_hash"]))
        decision = clusterer.assign(features, keys)
        if decision.is_new_version:
            # A new version of an article the writer holds: the same member of the same story
            # (its features replaced), so not an assignment; the row keeps the state and the
            # log in step (story_assignments reads only assignment kinds).
            kind: ChangeKind = "version"
        else:
            kind = "copy" if decision.copy_of else ("new_story" if decision.is_new_story else "assign")
        kinds[kind] += 1
        changes.append(StoryChange.at(language, offset + len(changes), kind, decision.story_id,
                                      article_id=row["article_id"], copy_of=decision.copy_of, score=decision.score,
                                      changed_at=row["first_seen_at"]))
    if clusterer.foreign_embeddings > foreign_before:
        # Articles embedded by another model than this release's: placed without their embedding (issue 33).
        kinds["foreign_embedding"] += clusterer.foreign_embeddings - foreign_before
        log.warning("cluster_foreign_embeddings language=%s articles=%d model=%s", language,
                    clusterer.foreign_embeddings - foreign_before, clusterer.embedding_model)
    # Keys compaction or retention removed are forgotten, so the checkpoint stays small.
    new_consumed = sorted((consumed | set(ready)) & set(existing))
    if not changes and new_consumed == sorted(consumed):
        # Nothing to commit and nothing changed: the state in memory is still the stored one.
        if checkpoint.state_key is not None:
            KEPT_STATES.put(store, language, etag, clusterer, seen)
        return {"language": language, "articles": 0, "committed": False, **dict(kinds)}
    clusterer.expire(now)
    # Read before the commit: once committed, the state may be kept and taken by the next run.
    stories, sizes = clusterer.active_story_count, clusterer.story_size_counts()
    every = compact_every if compact_every is not None else writer_compact_every()
    new_offset, stored = commit_writer_state(
        store, language, etag, offset, changes, clusterer, seen, new_consumed, now,
        kill_before_checkpoint=kill_before_checkpoint, chain=checkpoint.chain, seen_added=seen_added,
        compact_every=every or COMPACT_EVERY)
    log.info("cluster_committed language=%s articles=%d offset=%d", language, len(changes), new_offset)
    summary = {"language": language, "articles": len(changes), "committed": True, "offset": new_offset,
               "stories": stories, "sizes": sizes, "state_bytes": stored.bytes, "state_kind": stored.kind,
               "chain": len(stored.chain), **dict(kinds)}
    if every and len(stored.chain) - 1 >= every:
        # After the commit: the fold reads stored objects only, and the next commit adopts it.
        summary["compacted"] = compact_writer_state(store, language, min_deltas=every)
    return summary


def writer_compact_every() -> int:
    """Deltas after which a per-minute run folds its chain (``NEWSROOM_SCALE_WRITER_COMPACT_EVERY``)."""
    from tasks.settings import get_scale_settings

    return get_scale_settings().writer_compact_every


@task(name="cluster_language", retries=1, retry_delay_seconds=2, timeout_seconds=900, cache_policy=NO_CACHE,
      retry_condition_fn=lambda task, run, state: not isinstance(state.result(raise_on_failure=False), WriterFencedError))
def cluster_language_task(store: ObjectStore, language: str, now: datetime) -> dict[str, Any]:
    return cluster_language(store, language, now)


@task(name="languages_in_log", retries=2, retry_delay_seconds=2, timeout_seconds=120, cache_policy=NO_CACHE)
def languages_in_log_task(store: ObjectStore) -> list[str]:
    return languages_in_log(store)
