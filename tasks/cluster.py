"""The cluster writer: one per language, fenced by a conditional put on its checkpoint.

Each run reads the article segments it has not consumed, assigns every new article of its language
to a story (or flags it as a copy), appends the decisions to ``log/story_changes`` and then replaces
the checkpoint with If-Match. A second writer for the same language loses that put (412) and stops,
so exactly one set of decisions is kept.

A commit writes three objects, in order: the run's state blob, under a key of its own (its offset
and a hash of its bytes; never contested, so a blob left by a run that died is garbage and never in
the way), then the change segment at the checkpoint's offset (written once: the first run's
decisions hold it), which names that state blob in its Parquet metadata, then the checkpoint. A
run that died after its change segment is rolled forward by the next, to the state the segment names.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.crashpoints import crash_point
from tasks.errors import WriterFencedError
from transforms.clustering import ClusterParams, LanguageClusterer
from transforms.features import features_from_row
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
from warehouse.state_blobs import decode_state, encode_state
from warehouse.store import ObjectStore
from warehouse.tables import (
    list_segments,
    parquet_bytes_to_table,
    read_segment,
    read_segments,
    rows_to_table,
    write_segment,
)

log = logging.getLogger(__name__)

SEEN_ARTICLES_KEPT = 200_000
STATE_KEY_METADATA = b"newsroom.state_key"
"""Key of a change segment's Parquet metadata naming the state blob its decisions lead to."""
_STATE_PUT_ATTEMPTS = 5
_STATE_PUT_PAUSE_SECONDS = 0.05


def _has_history(store: ObjectStore, language: str) -> bool:
    """Whether a writer of ``language`` ever committed: a state blob or a change segment exists."""
    return bool(store.list(f"{layout.STORY_STATE_PREFIX}{language}/")) or \
        bool(list_segments(store, f"{layout.STORY_CHANGES_PREFIX}language={language}/"))


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while many long-lived objects are built (a checkpoint
    parsed and rebuilt: none of them can be garbage yet), and restore it as it was.

    The collector would otherwise walk them again and again as they are allocated
    (bench/writer_checkpoint.py). The writer's own switch, not the clustering code's:
    :mod:`transforms.clustering` builds the objects and never touches the interpreter.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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
    """The offset a state blob's key names (``state-<offset>[-<hash>].json.zst|.json.gz``)."""
    digits = key.rsplit("/", 1)[-1][6:22]
    return int(digits) if digits.isdigit() else None


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
        try:
            table = parquet_bytes_to_table(store.get(key).data, key)
        except ObjectNotFoundError:
            continue
        except CorruptObjectError as e:
            record_damage(key, f"corrupt: {e.reason}", "skipped while rebuilding the checkpoint")
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
             if k.rsplit("/", 1)[-1].startswith("state-") and _state_offset(k) == end]
    for key in sorted(blobs, key=lambda k: (k != named, k)):
        try:
            with paused_gc():
                blob = decode_state(store.get(key).data)
        except (ObjectNotFoundError, StateBlobError):
            continue
        updated_at = blob.get("updated_at")
        return WriterCheckpoint(end, key, tuple(blob.get("consumed") or ()),
                                updated_at if isinstance(updated_at, str) else None)
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
    damaged = checkpoint.state_key if checkpoint else None
    blobs = [k for k in store.list(f"{layout.STORY_STATE_PREFIX}{language}/")
             if k.rsplit("/", 1)[-1].startswith("state-") and k != damaged and (_state_offset(k) or 0) <= offset]
    rewound = WriterCheckpoint(offset, updated_at=now.astimezone(UTC).isoformat())
    for blob_key in sorted(blobs, key=lambda k: (_state_offset(k) or 0, k), reverse=True):
        try:
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
    keys = list_segments(store, layout.ARTICLES_PREFIX)
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


def _put_state(store: ObjectStore, key: str, blob: bytes) -> None:
    """Create the state blob ``key`` names (by a hash of ``blob``): if it exists, it holds these bytes.

    A conditional put that failed while the key stays absent (S3 409: a concurrent put of the same
    bytes was in flight, and may have failed) is tried again, so the blob exists before a change
    segment names it.
    """
    for attempt in range(1, _STATE_PUT_ATTEMPTS + 1):
        try:
            store.put(key, blob, if_none_match=True)
        except PreconditionFailedError:
            if store.head(key) is None:
                time.sleep(_STATE_PUT_PAUSE_SECONDS * attempt)
                continue
        return
    raise PreconditionFailedError("conditional put kept conflicting with no object stored", key=key)


def commit_writer(store: ObjectStore, language: str, etag: str | None, offset: int, changes: list[StoryChange],
                  clusterer: LanguageClusterer, seen: dict[str, str], consumed: list[str], now: datetime,
                  kill_before_checkpoint: bool = False, state_key: str | None = None) -> int:
    """Commit a writer's decisions, fenced: state blob, then change segment, then the checkpoint
    with If-Match. A writer that loses the change segment to other decisions, or the checkpoint
    to any other commit, raises :class:`WriterFencedError` and nothing of its own becomes visible.

    The state blob's key is this state's own (its offset and a hash of its bytes), so it is never
    contested: a blob a crashed run left at the same offset is not in the way. The change segment
    names it, for :func:`open_writer`'s roll-forward.

    Args:
        state_key: The state the checkpoint names now. A commit without changes (only newly
            consumed segments) keeps it, instead of storing another, when given.

    Returns:
        The new offset.
    """
    new_offset = offset + len(changes)
    if len(seen) > SEEN_ARTICLES_KEPT:
        seen = dict(list(seen.items())[-SEEN_ARTICLES_KEPT:])
    updated_at = now.astimezone(UTC).isoformat()
    stored = False  # whether the checkpoint will name this run's state (else it may not be kept)
    if changes or state_key is None:
        stored = True
        with paused_gc():
            # ``seen`` as pairs, oldest first: the order it is trimmed by must survive the key sorting.
            state = {"clusterer": clusterer.to_state(), "seen": list(seen.items()), "consumed": consumed,
                     "updated_at": updated_at}
        blob = encode_state(state)
        del state
        state_key = layout.story_state_key(language, new_offset, hashlib.blake2b(blob, digest_size=10).hexdigest())
        _put_state(store, state_key, blob)
        del blob
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
    new_etag = put_checkpoint(store, language, WriterCheckpoint(new_offset, state_key, tuple(consumed), updated_at),
                              etag)
    if stored:
        KEPT_STATES.put(store, language, new_etag, clusterer, seen)
    return new_offset


def cluster_language(store: ObjectStore, language: str, now: datetime, kill_before_checkpoint: bool = False,
                     params: ClusterParams | None = None) -> dict[str, Any]:
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
                                        params=params)
        return with_damage(summary, damaged)
    finally:
        gc.unfreeze()


def with_damage(summary: dict[str, Any], damaged: list[DamagedObject]) -> dict[str, Any]:
    """``summary`` with ``damaged``: what the run could not read and did instead (when anything)."""
    return {**summary, "damaged": [asdict(d) for d in damaged]} if damaged else summary


def _cluster_language(store: ObjectStore, language: str, now: datetime, kill_before_checkpoint: bool = False,
                     params: ClusterParams | None = None) -> dict[str, Any]:
    """Assign this language's unconsumed articles to stories and commit, fenced. Returns a summary.

    ``kill_before_checkpoint`` (crash tests only) makes the process SIGKILL itself after its
    change segment is written and before its checkpoint moves. ``params`` apply to a language's
    first run only; later runs keep the parameters stored in the state.
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
    for row in rows:
        if seen.get(row["article_id"]) == row["content_hash"]:
            kinds["duplicate_input"] += 1
            continue
        seen[row["article_id"]] = row["content_hash"]
        decision = clusterer.assign(features_from_row(row))
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
    new_offset = commit_writer(store, language, etag, offset, changes, clusterer, seen, new_consumed, now,
                               kill_before_checkpoint=kill_before_checkpoint, state_key=checkpoint.state_key)
    log.info("cluster_committed language=%s articles=%d offset=%d", language, len(changes), new_offset)
    return {"language": language, "articles": len(changes), "committed": True, "offset": new_offset,
            "stories": stories, "sizes": sizes, **dict(kinds)}


@task(name="cluster_language", retries=1, retry_delay_seconds=2, timeout_seconds=900, cache_policy=NO_CACHE,
      retry_condition_fn=lambda task, run, state: not isinstance(state.result(raise_on_failure=False), WriterFencedError))
def cluster_language_task(store: ObjectStore, language: str, now: datetime) -> dict[str, Any]:
    return cluster_language(store, language, now)


@task(name="languages_in_log", retries=2, retry_delay_seconds=2, timeout_seconds=120, cache_policy=NO_CACHE)
def languages_in_log_task(store: ObjectStore) -> list[str]:
    return languages_in_log(store)
