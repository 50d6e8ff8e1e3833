"""The cluster writer: one per language, fenced by a conditional put on its checkpoint.

Each run reads the article segments it has not consumed, assigns every new article of its language
to a story (or flags it as a copy), appends the decisions to ``log/story_changes`` and then replaces
the checkpoint with If-Match. A second writer for the same language loses that put (412) and stops,
so exactly one set of decisions is kept.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from transforms.clustering import LanguageClusterer
from transforms.features import features_from_row
from warehouse import layout
from warehouse.errors import NewsroomError, ObjectNotFoundError, PreconditionFailedError
from warehouse.schemas import ARTICLES_SCHEMA, STORY_CHANGES_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import list_segments, read_segments, rows_to_table, write_segment

log = logging.getLogger(__name__)

SEEN_ARTICLES_KEPT = 200_000


class WriterFencedError(NewsroomError):
    """Another writer moved this language's checkpoint first; this run's decisions are dropped."""


def _load_checkpoint(store: ObjectStore, language: str) -> tuple[dict[str, Any], str | None]:
    try:
        obj = store.get(layout.story_checkpoint_key(language))
    except ObjectNotFoundError:
        return {"offset": 0, "state_key": None, "consumed": []}, None
    return json.loads(obj.data), obj.etag


def _load_writer_state(store: ObjectStore, language: str, checkpoint: dict[str, Any]
                       ) -> tuple[LanguageClusterer, dict[str, str]]:
    if checkpoint["state_key"] is None:
        return LanguageClusterer(language), {}
    blob = json.loads(gzip.decompress(store.get(checkpoint["state_key"]).data))
    return LanguageClusterer.from_state(blob["clusterer"]), dict(blob["seen"])


def languages_in_log(store: ObjectStore) -> list[str]:
    """Languages that have articles in the log (read from segment metadata-light scans)."""
    keys = list_segments(store, layout.ARTICLES_PREFIX)
    if not keys:
        return []
    table = read_segments(store, keys, ARTICLES_SCHEMA).select(["language"])
    return sorted({v for v in table.column("language").to_pylist() if v})


def cluster_language(store: ObjectStore, language: str, now: datetime) -> dict[str, Any]:
    """Assign this language's unconsumed articles to stories and commit, fenced. Returns a summary."""
    checkpoint, etag = _load_checkpoint(store, language)
    consumed = set(checkpoint["consumed"])
    pending = [k for k in list_segments(store, layout.ARTICLES_PREFIX) if k not in consumed]
    clusterer, seen = _load_writer_state(store, language, checkpoint)
    rows: list[dict[str, Any]] = []
    ready: list[str] = []
    for key in pending:
        segment = read_segments(store, [key], ARTICLES_SCHEMA).to_pylist()
        if any(r["first_seen_at"] > now for r in segment):
            continue  # written by an ingest run ahead of this clock; consumed once ``now`` reaches it
        ready.append(key)
        rows.extend(r for r in segment if r["language"] == language)
    rows.sort(key=lambda r: (r["first_seen_at"], r["article_id"], r["version"]))
    offset = checkpoint["offset"]
    changes: list[dict[str, Any]] = []
    kinds: Counter[str] = Counter()
    for row in rows:
        if seen.get(row["article_id"]) == row["content_hash"]:
            kinds["duplicate_input"] += 1
            continue
        seen[row["article_id"]] = row["content_hash"]
        decision = clusterer.assign(features_from_row(row))
        kind = "copy" if decision.copy_of else ("new_story" if decision.is_new_story else "assign")
        kinds[kind] += 1
        changes.append({
            "change_id": f"{language}:{offset + len(changes)}", "offset": offset + len(changes),
            "language": language, "kind": kind, "story_id": decision.story_id, "article_id": row["article_id"],
            "copy_of": decision.copy_of, "other_story_id": None, "score": decision.score,
            "changed_at": row["first_seen_at"],
        })
    clusterer.expire(now)
    new_consumed = sorted(consumed | set(ready))
    if not changes and new_consumed == sorted(consumed):
        return {"language": language, "articles": 0, "committed": False, **dict(kinds)}
    if changes:
        write_segment(store, layout.story_changes_key(language, offset), rows_to_table(changes, STORY_CHANGES_SCHEMA),
                      STORY_CHANGES_SCHEMA)
    new_offset = offset + len(changes)
    if len(seen) > SEEN_ARTICLES_KEPT:
        seen = dict(list(seen.items())[-SEEN_ARTICLES_KEPT:])
    state_key = layout.story_state_key(language, new_offset)
    blob = gzip.compress(json.dumps({"clusterer": clusterer.to_state(), "seen": seen}, sort_keys=True).encode(), mtime=0)
    try:
        store.put(state_key, blob, if_none_match=True)
    except PreconditionFailedError:
        pass  # the same offset's state, written by a run that died before its checkpoint
    new_checkpoint = {"offset": new_offset, "state_key": state_key, "consumed": new_consumed,
                      "updated_at": now.astimezone(UTC).isoformat()}
    data = json.dumps(new_checkpoint, sort_keys=True).encode()
    try:
        if etag is None:
            store.put(layout.story_checkpoint_key(language), data, if_none_match=True)
        else:
            store.put(layout.story_checkpoint_key(language), data, if_match=etag)
    except PreconditionFailedError as e:
        raise WriterFencedError(f"checkpoint of {language} moved by another writer",
                                key=layout.story_checkpoint_key(language)) from e
    log.info("cluster_committed language=%s articles=%d offset=%d", language, len(changes), new_offset)
    return {"language": language, "articles": len(changes), "committed": True, "offset": new_offset,
            "stories": clusterer.active_story_count, **dict(kinds)}


@task(name="cluster_language", retries=1, retry_delay_seconds=2, timeout_seconds=900, cache_policy=NO_CACHE,
      retry_condition_fn=lambda task, run, state: not isinstance(state.result(raise_on_failure=False), WriterFencedError))
def cluster_language_task(store: ObjectStore, language: str, now: datetime) -> dict[str, Any]:
    return cluster_language(store, language, now)


@task(name="languages_in_log", retries=2, retry_delay_seconds=2, timeout_seconds=120, cache_policy=NO_CACHE)
def languages_in_log_task(store: ObjectStore) -> list[str]:
    return languages_in_log(store)
