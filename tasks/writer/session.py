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
names (``tasks.writer.state``, issue 15); the checkpoint names the whole chain. State blobs of the
JSON format before (``state-*.json.zst``, ``.json.gz``) still load, and the first commit after one
writes a base.
"""

from __future__ import annotations

import logging
import os
import signal
from collections import Counter
from datetime import UTC, datetime

from tasks import events
from tasks.crashpoints import crash_point
from tasks.errors import WriterFencedError
from tasks.writer.checkpoint import (
    STATE_KEY_METADATA,
    _checkpoint_at,
    _load_checkpoint,
    put_checkpoint,
)
from tasks.writer.kept import KEPT_STATES
from tasks.writer.state import (
    COMPACT_EVERY,
    SEEN_ARTICLES_KEPT,
    StateObjectError,
    StoredState,
    load_chain,
    paused_gc,
    store_state,
)
from transforms.clustering import ClusterParams, LanguageClusterer
from transforms.clustering.columns import mark_committed
from transforms.records import StoryChange
from warehouse import layout
from warehouse.checkpoints import WriterCheckpoint
from warehouse.damage import describe_error, record_damage
from warehouse.errors import (
    CorruptObjectError,
    ObjectNotFoundError,
    PreconditionFailedError,
    StateBlobError,
)
from warehouse.schemas import STORY_CHANGES_SCHEMA
from warehouse.state_blobs import decode_state
from warehouse.store import ObjectStore
from warehouse.tables import (
    rows_to_table,
    write_segment,
)

log = logging.getLogger(__name__)

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
    (:func:`tasks.writer.state.store_state`; a base when there is none yet). Its key is its own
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
