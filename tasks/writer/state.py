"""A language writer's state in the store, version 4: a base snapshot and per-run deltas (issue 15).

A run stores only what it changed (``transforms.clustering.columns.state_changes``): the stories,
members, IDF counts and copy signatures it touched, the ids that left, the input it read. The
checkpoint names the chain the state is, ``state_key`` (the base) then ``deltas`` in order; each
delta's header names the chain before it, so a change segment that names a delta names a whole
state, and a run that died after its change segment is rolled forward from it.

Folding a chain into a new base (:func:`compact_writer_state`) is table work on stored objects
only (``warehouse.state_blobs.fold_states``), so it runs off the writer's critical path: after
every ``compact_every`` deltas, in a background thread of a long-running writer or after a
per-minute run's commit, and in the hourly maintenance. It never touches the checkpoint: it writes
the new base under its own key and a note naming what it folds (``compacted.json``), and the writer
adopts it at its next commit when the note folds a prefix of its chain. The checkpoint stays the
one object only the writer replaces, with If-Match.

Loading is the same fold, then building the objects once (``clusterer_from_columns``).
Checkpoints and blobs of the JSON format before still load; the first commit after writes a base.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from tasks.crashpoints import crash_point
from tasks.errors import StateObjectError
from transforms.clustering import LanguageClusterer
from transforms.clustering.columns import (
    StateColumns,
    clusterer_from_columns,
    state_changes,
    state_columns,
    state_meta,
)
from warehouse import layout
from warehouse.checkpoints import WriterCheckpoint
from warehouse.errors import ObjectNotFoundError, PreconditionFailedError, StateBlobError
from warehouse.state_blobs import (
    STATE_TABLE_SCHEMAS,
    StateHeader,
    StateObject,
    columns_to_table,
    decode_state_object,
    encode_state_object,
    fold_states,
    read_state_header,
    release_table_memory,
    table_to_columns,
)
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)

SEEN_ARTICLES_KEPT = 200_000
"""Input rows a writer remembers (article id → content hash), to skip one it reads again."""
COMPACT_EVERY = 30
"""Deltas after which a writer folds its chain into a new base (the default of the setting)."""
INLINE_BASE_AFTER = 4
"""A chain this many times ``compact_every`` long (compaction kept failing) gets a base inline."""
_PUT_ATTEMPTS = 5
_PUT_PAUSE_SECONDS = 0.05


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while many long-lived objects are built (a state
    loaded: none of them can be garbage yet), and restore it as it was.

    The collector would otherwise walk them again and again as they are allocated
    (bench/writer_checkpoint.py; rank's fold of its story rows and members, tasks/aggregates/cycle.py,
    where it took most of a cycle's CPU in bench/rank_incremental.py). A task's switch, not the pure code's:
    :mod:`transforms.clustering` builds the objects and never touches the interpreter.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def put_immutable(store: ObjectStore, key: str, data: bytes) -> None:
    """Create the object ``key`` names (by a hash of ``data``): if it exists, it holds these bytes.

    A conditional put that failed while the key stays absent (S3 409: a concurrent put of the same
    bytes was in flight, and may have failed) is tried again, so the object exists before a change
    segment or checkpoint names it.
    """
    for attempt in range(1, _PUT_ATTEMPTS + 1):
        try:
            store.put(key, data, if_none_match=True)
        except PreconditionFailedError:
            if store.head(key) is None:
                time.sleep(_PUT_PAUSE_SECONDS * attempt)
                continue
        return
    raise PreconditionFailedError("conditional put kept conflicting with no object stored", key=key)


def _content_id(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=10).hexdigest()


def read_state_object(store: ObjectStore, key: str) -> StateObject:
    """One stored state object, decoded and checked.

    Raises:
        ObjectNotFoundError: It is gone.
        StateBlobError: It is not a readable state object.
    """
    return decode_state_object(store.get(key).data)


def columns_of(obj: StateObject) -> tuple[StateColumns, list[tuple[str, str]]]:
    """A (folded) state object as the clusterer's columns, and its ``seen`` rows."""
    vocabulary: dict[str, str] = {}
    tables = {name: table_to_columns(obj.tables[name], vocabulary) for name in STATE_TABLE_SCHEMAS}
    meta = state_meta(obj.header)
    columns = StateColumns(meta, tables["stories"], tables["members"], tables["norms"], tables["recent"], tables["df"],
                           list(tables["dropped_stories"]["story_id"]), list(tables["dropped_recent"]["article_id"]))
    seen = list(zip(tables["seen"]["article_id"], tables["seen"]["content_hash"], strict=True))
    return columns, seen


def load_chain(store: ObjectStore, chain: Sequence[str]) -> tuple[LanguageClusterer, dict[str, str], StateHeader]:
    """Rebuild a writer from its base and deltas: fold them (tables), then build the objects once.
    The tables are let go before the objects are built, so a load peaks at the objects plus
    their flat columns, not the tables too.

    Returns:
        The clusterer (marked as committed), its seen-article map, and the folded state's header.

    Raises:
        ObjectNotFoundError: An object of the chain is gone (``key`` names it).
        StateBlobError: One is unreadable (raised with its key as ``StateObjectError``).
    """
    objects = []
    for key in chain:
        try:
            objects.append(read_state_object(store, key))
        except StateBlobError as e:
            raise StateObjectError(e.reason, key) from e
    with paused_gc():
        folded = fold_states(objects[0], objects[1:], SEEN_ARTICLES_KEPT)
        del objects
        header = folded.header
        columns, seen = columns_of(folded)
        del folded
        release_table_memory()  # the tables' memory, back before the objects grow
        clusterer = clusterer_from_columns(columns, LanguageClusterer)
        del columns
    return clusterer, dict(seen), header


@dataclass(frozen=True, slots=True)
class StoredState:
    """What a commit stored: the object's key, the chain the checkpoint names with it, its size
    and rows per table."""

    key: str
    chain: list[str]
    kind: str
    bytes: int
    rows: dict[str, int]


def _seen_table(rows: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    return {"article_id": [a for a, _ in rows], "content_hash": [h for _, h in rows]}


def adopt_compacted(store: ObjectStore, language: str, chain: list[str]) -> list[str]:
    """``chain`` with the prefix a compaction folded replaced by its new base, when the
    compaction note names a prefix of it and that base is stored; else ``chain`` as it is."""
    try:
        note = json.loads(store.get(layout.story_compacted_key(language)).data)
    except (ObjectNotFoundError, ValueError):
        return chain
    if not isinstance(note, dict):
        return chain
    folds, base = note.get("folds"), note.get("base")
    if not isinstance(folds, list) or not isinstance(base, str) or len(folds) < 2 or chain[:len(folds)] != folds:
        return chain
    if store.head(base) is None:
        return chain
    log.info("writer_adopted_compaction language=%s base=%s folded=%d", language, base, len(folds))
    return [base, *chain[len(folds):]]


def store_state(store: ObjectStore, language: str, offset: int, chain: list[str], clusterer: LanguageClusterer,
                seen: dict[str, str], seen_added: Sequence[tuple[str, str]], consumed: list[str], updated_at: str,
                compact_every: int = COMPACT_EVERY) -> StoredState:
    """Store a writer's state at ``offset`` as the next link of ``chain``: a delta of what changed
    since the clusterer was last marked committed, or a base of everything when there is no
    version 4 chain yet (a first commit, or one after a JSON state), the clusterer was never marked
    (loaded from JSON), or the chain has grown past what compaction should have kept it under.

    Returns:
        What was stored, and the chain a checkpoint names with it.
    """
    header: StateHeader = {"format": "newsroom-writer-state", "offset": offset, "consumed": consumed,
                              "updated_at": updated_at}
    full = (not chain or not layout.is_state_object_key(chain[0]) or clusterer.journal is None
            or len(chain) > INLINE_BASE_AFTER * compact_every)
    if full:
        columns = state_columns(clusterer)
        kind, seen_rows, parents = "base", list(seen.items()), []
    else:
        chain = adopt_compacted(store, language, chain)
        columns = state_changes(clusterer)
        kind, seen_rows, parents = "delta", list(seen_added), chain
        header.update(base=chain[0], parents=chain[1:])
    tables = {name: columns_to_table(name, getattr(columns, name)) for name in ("stories", "members", "norms",
                                                                               "recent", "df")}
    tables["dropped_stories"] = columns_to_table("dropped_stories", {"story_id": columns.dropped_stories})
    tables["dropped_recent"] = columns_to_table("dropped_recent", {"article_id": columns.dropped_recent})
    tables["seen"] = columns_to_table("seen", _seen_table(seen_rows))
    data = encode_state_object({**columns.meta, **header, "kind": kind}, tables)
    key = layout.story_state_object_key(language, kind, offset, _content_id(data))
    put_immutable(store, key, data)
    rows = {**columns.counts(), "seen": len(seen_rows)}
    return StoredState(key, [key] if kind == "base" else [*parents, key], kind, len(data), rows)


def chain_named_by(store: ObjectStore, key: str) -> tuple[list[str], StateHeader]:
    """The chain a state object stands for (a base: itself; a delta: the chain its header names,
    then itself) and its header.

    Raises:
        ObjectNotFoundError: It is gone.
        StateBlobError: Its header is unreadable.
    """
    header = read_state_header(store.get(key).data)
    if header.get("kind") == "delta":
        return [str(header["base"]), *map(str, header.get("parents", [])), key], header
    return [key], header


def compact_writer_state(store: ObjectStore, language: str, min_deltas: int = 1) -> str | None:
    """Fold a writer's chain into a new base, off its critical path (see the module doc).

    Reads the checkpoint without fencing it and never writes it: the writer adopts the new base at
    its next commit. A crash between the base and its note leaves an unnamed base, which
    maintenance deletes.

    Returns:
        The new base's key, or None when the chain has fewer than ``min_deltas`` deltas (or is
        no version 4 chain).
    """
    try:
        checkpoint = WriterCheckpoint.parse(store.get(layout.story_checkpoint_key(language)).data)
    except ObjectNotFoundError:
        return None
    chain = checkpoint.chain if checkpoint is not None else []
    if len(chain) - 1 < min_deltas or not layout.is_state_object_key(chain[0]):
        return None
    objects = [read_state_object(store, key) for key in chain]
    folded = fold_states(objects[0], objects[1:], SEEN_ARTICLES_KEPT)
    del objects
    data = encode_state_object({**folded.header, "folds": chain}, folded.tables)
    key = layout.story_state_object_key(language, "base", int(folded.header["offset"]), _content_id(data))
    put_immutable(store, key, data)
    crash_point("cluster.after_fold")
    store.put(layout.story_compacted_key(language), json.dumps({"base": key, "folds": chain}).encode())
    log.info("writer_compacted language=%s base=%s folded=%d bytes=%d", language, key, len(chain), len(data))
    return key
