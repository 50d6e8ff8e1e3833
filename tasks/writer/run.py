"""A language writer's run: assign the language's unconsumed articles to stories and commit, fenced."""

from __future__ import annotations

import gc
import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict
from datetime import datetime
from typing import Any

from tasks.writer.checkpoint import open_writer
from tasks.writer.kept import KEPT_STATES
from tasks.writer.session import commit_writer_state, load_writer_state
from tasks.writer.state import (
    COMPACT_EVERY,
    compact_writer_state,
)
from transforms.clustering import ClusterParams, LanguageClusterer
from transforms.features import ArticleFeatures, features_from_row
from transforms.records import ChangeKind, StoryChange
from warehouse import layout
from warehouse.damage import DamagedObject, collect_damage, record_damage
from warehouse.errors import (
    CorruptObjectError,
    ObjectNotFoundError,
    SchemaMismatchError,
)
from warehouse.maintenance import is_compacted
from warehouse.schemas import ARTICLES_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import (
    list_segments,
    read_segment,
    read_segments,
)

log = logging.getLogger(__name__)


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
