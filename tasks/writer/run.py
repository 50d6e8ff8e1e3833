"""A language writer's run, the per-minute flow's and the long-running writer's alike: read the
article segments not yet consumed, then load → assign → commit (``tasks.writer.session``).
"""

from __future__ import annotations

import gc
import logging
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TypedDict

from tasks.writer.kept import KeptStates
from tasks.writer.session import WriterSession, assign, commit, load, release
from tasks.writer.state import COMPACT_EVERY, compact_writer_state
from transforms.clustering import ClusterParams
from transforms.records import ArticleRow
from warehouse import layout
from warehouse.damage import DamagedObject, collect_damage, record_damage
from warehouse.errors import CorruptObjectError, ObjectNotFoundError, SchemaMismatchError
from warehouse.maintenance import is_compacted
from warehouse.schemas import ARTICLES_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import list_segments, read_segment, read_segments

log = logging.getLogger(__name__)


class WriterSummary(TypedDict, total=False):
    """What a language writer's run (cluster or repair) reports: logged one line per language,
    published as the run's artifact, returned by the flow run."""

    language: str
    committed: bool
    articles: int
    offset: int
    stories: int
    sizes: dict[int, int]
    """Active stories by their number of members."""
    state_bytes: int
    state_kind: str
    chain: int
    compacted: str | None
    new_story: int
    assign: int
    copy: int
    version: int
    duplicate_input: int
    foreign_embedding: int
    merge: int
    split: int
    error: str
    fenced: str
    damaged: list[dict[str, str]]
    at: str
    """Stream time of a long-running writer's batch, or of a writer session's tick."""
    segments: int
    lag_max_seconds: float | None
    tick: int
    kind: str
    """A writer session's run: ``cluster`` or ``repair``."""


def languages_in_log(store: ObjectStore) -> list[str]:
    """Languages that have articles in the log (read from segment metadata-light scans)."""
    return languages_of_segments(store, list_segments(store, layout.ARTICLES_PREFIX))


def languages_of_segments(store: ObjectStore, keys: list[str]) -> list[str]:
    """Languages that have articles in the article segments ``keys`` (damaged ones skipped)."""
    if not keys:
        return []
    table = read_segments(store, keys, ARTICLES_SCHEMA, skip_damaged=True).select(["language"])
    return sorted({v for v in table.column("language").to_pylist() if v})


def cluster_language(store: ObjectStore, language: str, now: datetime, kill_before_checkpoint: bool = False,
                     params: ClusterParams | None = None, compact_every: int | None = None,
                     kept: KeptStates | None = None) -> WriterSummary:
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
                                        params=params, compact_every=compact_every, kept=kept)
        return with_damage(summary, damaged)
    finally:
        gc.unfreeze()


def with_damage(summary: WriterSummary, damaged: list[DamagedObject]) -> WriterSummary:
    """``summary`` with ``damaged``: what the run could not read and did instead (when anything)."""
    return {**summary, "damaged": [asdict(d) for d in damaged]} if damaged else summary


@dataclass(frozen=True, slots=True)
class PendingArticles:
    """The article segments a run reads: the language's rows in stream order, the segments it
    consumes, and every segment listed (keys compaction or retention removed are forgotten)."""

    rows: list[ArticleRow]
    ready: list[str]
    existing: list[str]


def read_pending(store: ObjectStore, session: WriterSession, now: datetime) -> PendingArticles:
    """The rows of the session's language in the article segments it has not consumed, sorted by
    first seen time, then id and version.

    A segment holding a row first seen after ``now`` (written by an ingest run ahead of this clock)
    is left for a later run; a corrupt one is recorded and left unconsumed, so a repaired one is
    read later (issue 16).
    """
    consumed = set(session.checkpoint.consumed)
    existing = list_segments(store, layout.ARTICLES_PREFIX)
    # Compacted segments hold only rows every writer has consumed (warehouse.maintenance).
    pending = [k for k in existing if k not in consumed and not is_compacted(k)]
    rows: list[ArticleRow] = []
    ready: list[str] = []
    for key in pending:
        try:
            segment = ArticleRow.from_table(read_segment(store, key, ARTICLES_SCHEMA))
        except ObjectNotFoundError:
            continue  # compacted or expired since the listing
        except (CorruptObjectError, SchemaMismatchError) as e:
            # Not consumed: a repaired segment (restored, or rewritten by a rerun of its ingest)
            # is read by a later run, and until then every run names it again (issue 16).
            record_damage(key, f"corrupt: {e.reason}", "skipped; not marked consumed, so a repaired one is read later")
            continue
        if any(r.first_seen_at > now for r in segment):
            continue  # written by an ingest run ahead of this clock; consumed once ``now`` reaches it
        ready.append(key)
        rows.extend(r for r in segment if r.language == session.language)
    rows.sort(key=lambda r: (r.first_seen_at, r.article_id, r.version))
    return PendingArticles(rows, ready, existing)


def _freeze_state(session: WriterSession) -> None:
    """Keep the session's long-lived state out of the cyclic collector's scans while the run goes on.

    Doing so doubled assignment throughput with 50,000 active stories (bench/cluster_speed.py). A
    state kept from the previous run is frozen as it is: a full collection would walk all of it
    again (anything frozen is handed back to the collector when the run ends).
    """
    if not session.reused:
        gc.collect()
    gc.freeze()


def _cluster_language(store: ObjectStore, language: str, now: datetime, kill_before_checkpoint: bool = False,
                      params: ClusterParams | None = None, compact_every: int | None = None,
                      kept: KeptStates | None = None) -> WriterSummary:
    """Assign this language's unconsumed articles to stories and commit, fenced. Returns a summary.

    ``kill_before_checkpoint`` (crash tests only) makes the process SIGKILL itself after its
    change segment is written and before its checkpoint moves. ``params`` apply to a language's
    first run only; later runs keep the parameters stored in the state. Once its chain holds
    ``compact_every`` deltas (default: the setting), the run folds it into a new base after its
    commit, unless a long-running writer compacts in the background (``compact_every=0``).
    """
    session = load(store, language, kept, params)
    _freeze_state(session)
    pending = read_pending(store, session, now)
    foreign_before = session.clusterer.foreign_embeddings
    assigned = assign(session, pending.rows)
    kinds = assigned.kinds
    foreign = session.clusterer.foreign_embeddings - foreign_before
    if foreign:
        # Articles embedded by another model than this release's: placed without their embedding (issue 33).
        kinds["foreign_embedding"] += foreign
        log.warning("cluster_foreign_embeddings language=%s articles=%d model=%s", language, foreign,
                    session.clusterer.embedding_model)
    consumed = set(session.checkpoint.consumed)
    # Keys compaction or retention removed are forgotten, so the checkpoint stays small.
    session.consumed = sorted((consumed | set(pending.ready)) & set(pending.existing))
    if not assigned.changes and session.consumed == sorted(consumed):
        release(session)  # nothing to commit and nothing changed
        return {"language": language, "articles": 0, "committed": False, **dict(kinds)}
    session.clusterer.expire(now)
    # Read before the commit: once committed, the state may be kept and taken by the next run.
    stories, sizes = session.clusterer.active_story_count, session.clusterer.story_size_counts()
    every = compact_every if compact_every is not None else writer_compact_every()
    committed = commit(session, assigned.changes, now, compact_every=every or COMPACT_EVERY,
                       kill_before_checkpoint=kill_before_checkpoint)
    stored = committed.state
    log.info("cluster_committed language=%s articles=%d offset=%d", language, len(assigned.changes), committed.offset)
    summary: WriterSummary = {
        "language": language, "articles": len(assigned.changes), "committed": True, "offset": committed.offset,
        "stories": stories, "sizes": sizes, "state_bytes": stored.bytes, "state_kind": stored.kind,
        "chain": len(stored.chain), **dict(kinds)}  # type: ignore[typeddict-item]  # the kinds are keys of the summary
    if every and len(stored.chain) - 1 >= every:
        # After the commit: the fold reads stored objects only, and the next commit adopts it.
        summary["compacted"] = compact_writer_state(store, language, min_deltas=every)
    return summary


def writer_compact_every() -> int:
    """Deltas after which a per-minute run folds its chain (``NEWSROOM_SCALE_WRITER_COMPACT_EVERY``)."""
    from tasks.settings import get_scale_settings

    return get_scale_settings().writer_compact_every
