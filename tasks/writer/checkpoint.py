"""A language writer's checkpoint: opened (a run that died after its change segment rolled
forward), put with If-Match, rebuilt from the change log when damaged, rewound when its state is lost."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime

from tasks.errors import WriterFencedError
from tasks.writer.state import (
    chain_named_by,
    load_chain,
    paused_gc,
    read_state_object,
)
from transforms.clustering import LanguageClusterer
from warehouse import layout
from warehouse.checkpoints import WriterCheckpoint
from warehouse.damage import record_damage
from warehouse.errors import (
    CorruptObjectError,
    ObjectNotFoundError,
    PreconditionFailedError,
    SchemaMismatchError,
    StateBlobError,
)
from warehouse.schemas import STORY_CHANGES_SCHEMA
from warehouse.state_blobs import decode_state
from warehouse.store import ObjectStore
from warehouse.tables import (
    list_segments,
    parquet_bytes_to_table,
    read_segment,
    stored_segment,
)

log = logging.getLogger(__name__)

STATE_KEY_METADATA = b"newsroom.state_key"
"""Key of a change segment's Parquet metadata naming the state (object or blob) its decisions lead to."""


def checkpoint_at(offset: int, chain: list[str], consumed: list[str], updated_at: object) -> WriterCheckpoint:
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
        return checkpoint_at(offset, chain, list(header.get("consumed") or []), header.get("updated_at"))
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
            rolled = checkpoint_at(checkpoint.offset + rows, chain, list(header["consumed"]), header["updated_at"])
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
