"""A language writer's session: what one run holds between loading its state and committing.

The writer is one per language, fenced by a conditional put on its checkpoint. A run loads its
session (:func:`load`: the checkpoint and its ETag, the clusterer and the articles it has read,
taken from the owner's :class:`~tasks.writer.kept.KeptStates` when its own last commit left them
there), assigns articles (:func:`assign`), then commits (:func:`commit`). A second writer for the
same language loses the checkpoint's put (412) and stops, so exactly one set of decisions is kept.

A commit writes three objects, in order: the run's state object, under a key of its own (its
offset and a hash of its bytes; never contested, so one left by a run that died is garbage and
never in the way), then the change segment at the checkpoint's offset (written once: the first
run's decisions hold it), which names that state object in its Parquet metadata, then the
checkpoint. A run that died after its change segment is rolled forward by the next, to the state
the segment names (:func:`tasks.writer.checkpoint.open_writer`).

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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from tasks import events
from tasks.crashpoints import crash_point
from tasks.errors import WriterFencedError
from tasks.writer.checkpoint import STATE_KEY_METADATA, checkpoint_at, open_writer, put_checkpoint
from tasks.writer.kept import KeptStates
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
from transforms.features import ArticleFeatures, features_of_row
from transforms.records import ArticleRow, ChangeKind, StoryChange
from warehouse import layout
from warehouse.checkpoints import WriterCheckpoint
from warehouse.damage import describe_error, record_damage
from warehouse.errors import CorruptObjectError, ObjectNotFoundError, PreconditionFailedError, StateBlobError
from warehouse.schemas import STORY_CHANGES_SCHEMA
from warehouse.state_blobs import decode_state
from warehouse.store import ObjectStore
from warehouse.tables import rows_to_table, write_segment

log = logging.getLogger(__name__)


@dataclass(slots=True)
class WriterSession:
    """One run of a language writer, from its load to its commit.

    ``checkpoint`` and ``etag`` are what the run opened: its commit is fenced on that ETag, and its
    state becomes the next link of the chain the checkpoint names. ``clusterer`` and ``seen`` (input
    rows read, article id → content hash) change as the run assigns; ``seen_added`` lists the rows
    read since the stored state, ``consumed`` the article segments the commit marks consumed.
    """

    store: ObjectStore
    language: str
    checkpoint: WriterCheckpoint
    etag: str | None
    clusterer: LanguageClusterer
    seen: dict[str, str]
    kept: KeptStates | None = None
    """The owner's states kept in memory (a long-running process), or None."""
    reused: bool = False
    """Whether the state was taken from ``kept`` rather than loaded from the store."""
    seen_added: list[tuple[str, str]] = field(default_factory=list)
    consumed: list[str] = field(default_factory=list)

    @classmethod
    def fresh(cls, store: ObjectStore, language: str, clusterer: LanguageClusterer) -> WriterSession:
        """A session before the language's first commit, holding ``clusterer`` (a state built
        elsewhere: a benchmark's synthetic window)."""
        return cls(store, language, WriterCheckpoint(), None, clusterer, {})

    @property
    def offset(self) -> int:
        """The change log offset the run's first decision takes."""
        return self.checkpoint.offset


@dataclass(frozen=True, slots=True)
class Assigned:
    """What :func:`assign` decided: the changes in log order, and how many of each kind (the
    decision kinds, and ``duplicate_input`` for rows read before with the same content)."""

    changes: list[StoryChange]
    kinds: Counter[str]


@dataclass(frozen=True, slots=True)
class Committed:
    """What :func:`commit` stored: the new offset, and the state object with the chain it ends."""

    offset: int
    state: StoredState


def load(store: ObjectStore, language: str, kept: KeptStates | None = None,
         params: ClusterParams | None = None) -> WriterSession:
    """Open a language writer's session: its checkpoint (a run that died after its change segment
    rolled forward first), then its state, taken from ``kept`` while the checkpoint is still the one
    its last commit left, else loaded from the store (a fresh one with ``params`` before the first
    commit; later runs keep the parameters stored in the state).

    Raises:
        CorruptObjectError: The checkpoint or the state it names is damaged beyond rebuilding.
        WriterFencedError: The checkpoint kept moving while it was opened.
    """
    checkpoint, etag = open_writer(store, language)
    taken = kept.take(store, language, etag) if kept is not None else None
    clusterer, seen = taken or load_writer_state(store, language, checkpoint, params)
    return WriterSession(store, language, checkpoint, etag, clusterer, seen, kept, reused=taken is not None,
                         consumed=list(checkpoint.consumed))


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


def _with_copy_keys(clusterer: LanguageClusterer, rows: list[ArticleRow], chunk: int = 1_000
                    ) -> Iterator[tuple[ArticleRow, ArticleFeatures, list[int] | None]]:
    """Each row with its features and its signature's LSH keys, the keys computed a chunk of
    rows at a time in one vectorised step (issue 15)."""
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        batch = [features_of_row(row) for row in part]
        yield from zip(part, batch, clusterer.copy_keys(batch), strict=True)


def assign(session: WriterSession, rows: list[ArticleRow]) -> Assigned:
    """Assign each row (in the order given) to a story, or flag it as a copy or a new version,
    numbering the changes from the session's offset. A row read before with the same content is
    skipped (``duplicate_input``); every other is remembered in ``seen``."""
    clusterer, seen = session.clusterer, session.seen
    changes: list[StoryChange] = []
    kinds: Counter[str] = Counter()
    for row, features, keys in _with_copy_keys(clusterer, rows):
        if seen.get(row.article_id) == row.content_hash:
            kinds["duplicate_input"] += 1
            continue
        # Most recently read last (a re-read moves to the end), so the newest SEEN_ARTICLES_KEPT
        # are kept, whether trimmed at every commit or once when a state is folded.
        seen.pop(row.article_id, None)
        seen[row.article_id] = row.content_hash
        session.seen_added.append((row.article_id, row.content_hash))
        decision = clusterer.assign(features, keys)
        if decision.is_new_version:
            # A new version of an article the writer holds: the same member of the same story
            # (its features replaced), so not an assignment; the row keeps the state and the
            # log in step (story_assignments reads only assignment kinds).
            kind: ChangeKind = "version"
        else:
            kind = "copy" if decision.copy_of else ("new_story" if decision.is_new_story else "assign")
        kinds[kind] += 1
        changes.append(StoryChange.at(session.language, session.offset + len(changes), kind, decision.story_id,
                                      article_id=row.article_id, copy_of=decision.copy_of, score=decision.score,
                                      changed_at=row.first_seen_at))
    return Assigned(changes, kinds)


def release(session: WriterSession) -> None:
    """Hand a session that commits nothing back to its owner's kept states: its state in memory is
    still the stored one, so the next run need not load it."""
    if session.kept is not None and session.checkpoint.state_key is not None:
        session.kept.put(session.store, session.language, session.etag, session.clusterer, session.seen)


def commit(session: WriterSession, changes: Iterable[StoryChange], now: datetime, *,
           compact_every: int = COMPACT_EVERY, kill_before_checkpoint: bool = False) -> Committed:
    """Commit a session's decisions, fenced: state object, then change segment, then the checkpoint
    with If-Match on the ETag the session opened. A writer that loses the change segment to other
    decisions, or the checkpoint to any other commit, raises :class:`WriterFencedError` and nothing
    of its own becomes visible.

    A commit that holds is announced as a ``newsroom.stories.committed`` event (rank acts on it at
    once, issue 31), a fenced one as ``newsroom.writer.fenced`` (an automation alerts on it). The
    committed state goes back to the owner's kept states, valid while the new checkpoint is.

    The state object is a delta of what changed since the chain the checkpoint names
    (:func:`tasks.writer.state.store_state`; a base when there is none yet). Its key is its own
    (its offset and a hash of its bytes), so it is never contested: one a crashed run left at the
    same offset is not in the way. The change segment names it, for ``open_writer``'s roll-forward,
    and the delta's header names the chain before it.

    Args:
        session: The session, as loaded and assigned.
        changes: Its decisions, numbered from ``session.offset``.
        now: The commit's time (the checkpoint's ``updated_at``).
        compact_every: Deltas after which the chain is due to fold; a chain several times longer
            (compaction kept failing) gets a base inline.
        kill_before_checkpoint: Crash tests only: SIGKILL this process after the change segment.

    Raises:
        WriterFencedError: Another writer committed first.
    """
    changes = list(changes)
    language = session.language
    try:
        committed = _commit(session, changes, now, compact_every, kill_before_checkpoint)
    except WriterFencedError as e:
        events.emit(events.WRITER_FENCED, events.resource_id("writer", language),
                    {"language": language, "offset": session.offset, "reason": str(e)[:500]})
        raise
    if changes:  # a commit that only marks segments consumed changes no story
        events.emit(events.STORIES_COMMITTED, events.resource_id("writer", language),
                    {"language": language, "offset": committed.offset, "changes": len(changes),
                     "kinds": dict(Counter(c.kind for c in changes))})
    return committed


def _trim_seen(seen: dict[str, str]) -> None:
    """Forget the oldest rows read past the newest ``SEEN_ARTICLES_KEPT``."""
    if len(seen) > SEEN_ARTICLES_KEPT:
        for article_id in list(seen)[:len(seen) - SEEN_ARTICLES_KEPT]:
            del seen[article_id]


def _write_changes(store: ObjectStore, language: str, offset: int, changes: list[StoryChange], state_key: str) -> None:
    """The change segment at ``offset``, naming the state its decisions lead to; written once.

    Raises:
        WriterFencedError: Another writer's decisions hold the offset.
    """
    # When another run wrote the same rows first, its segment names that run's state, which made
    # the same decisions.
    schema = STORY_CHANGES_SCHEMA.with_metadata({STATE_KEY_METADATA: state_key.encode()})
    key = layout.story_changes_key(language, offset)
    try:
        write_segment(store, key, rows_to_table([c.to_row() for c in changes], schema), schema)
    except PreconditionFailedError as e:
        raise WriterFencedError(f"changes of {language} at {offset} written by another writer", key=key) from e


def _commit(session: WriterSession, changes: list[StoryChange], now: datetime, compact_every: int,
            kill_before_checkpoint: bool) -> Committed:
    """See :func:`commit`."""
    store, language = session.store, session.language
    new_offset = session.offset + len(changes)
    _trim_seen(session.seen)
    updated_at = now.astimezone(UTC).isoformat()
    stored = store_state(store, language, new_offset, session.checkpoint.chain, session.clusterer, session.seen,
                         session.seen_added, session.consumed, updated_at, compact_every)
    crash_point("cluster.after_state")
    if changes:
        _write_changes(store, language, session.offset, changes, stored.key)
    crash_point("cluster.after_changes")
    if kill_before_checkpoint:
        os.kill(os.getpid(), signal.SIGKILL)
    new_etag = put_checkpoint(store, language, checkpoint_at(new_offset, stored.chain, session.consumed, updated_at),
                              session.etag)
    mark_committed(session.clusterer)
    if session.kept is not None:
        session.kept.put(store, language, new_etag, session.clusterer, session.seen)
    log.info("writer_state_stored language=%s kind=%s bytes=%d chain=%d rows=%s", language, stored.kind,
             stored.bytes, len(stored.chain), stored.rows)
    return Committed(new_offset, stored)
