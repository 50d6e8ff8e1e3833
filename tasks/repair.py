"""The repair writer: merges and splits through the same fenced checkpoint as the cluster writer.

A repair run loads the language writer's checkpoint and state, runs
:func:`transforms.repair.repair_stories` over the stories active in the last six hours, appends
one ``log/story_changes`` row per moved article (kind ``merge``: ``story_id`` is the survivor and
``other_story_id`` the merged-away story, which becomes an alias; kind ``split``: ``story_id`` is
the new half and ``other_story_id`` the story it left), and commits with the cluster writer's
If-Match on the checkpoint. A repair and a cluster run of one language never both commit: the
second put loses with 412 (:class:`tasks.cluster.WriterFencedError`).
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.cluster import (
    KEPT_STATES,
    WriterFencedError,
    change_row,
    commit_writer,
    load_writer_state,
    open_writer,
)
from transforms.repair import RepairParams, repair_stories
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)


def repair_language(store: ObjectStore, language: str, now: datetime,
                    params: RepairParams | None = None) -> dict[str, Any]:
    """Merge and split this language's recently active stories and commit, fenced. Returns a summary."""
    checkpoint, etag = open_writer(store, language)
    if checkpoint["state_key"] is None:
        return {"language": language, "committed": False, "merge": 0, "split": 0}
    clusterer, seen = KEPT_STATES.take(store, language, etag) or load_writer_state(store, language, checkpoint)
    repairs = repair_stories(clusterer, now, params)
    if not repairs:  # nothing applied, nothing changed: the state in memory is still the stored one
        KEPT_STATES.put(store, language, etag, clusterer, seen)
        return {"language": language, "committed": False, "merge": 0, "split": 0}
    offset = checkpoint["offset"]
    changes: list[dict[str, Any]] = []
    kinds: Counter[str] = Counter()
    for r in repairs:
        kinds[r.kind] += 1
        target, source = (r.story_id, r.other_story_id) if r.kind == "merge" else (r.other_story_id, r.story_id)
        for article_id, copy_of in r.moved:
            changes.append(change_row(language, offset + len(changes), r.kind, target, article_id, copy_of,
                                      source, r.score, now))
    new_offset = commit_writer(store, language, etag, offset, changes, clusterer, seen,
                               list(checkpoint["consumed"]), now)
    log.info("repair_committed language=%s merges=%d splits=%d offset=%d", language, kinds["merge"],
             kinds["split"], new_offset)
    return {"language": language, "committed": True, "offset": new_offset, "merge": kinds["merge"],
            "split": kinds["split"]}


@task(name="repair_language", retries=1, retry_delay_seconds=2, timeout_seconds=900, cache_policy=NO_CACHE,
      retry_condition_fn=lambda task, run, state: not isinstance(state.result(raise_on_failure=False), WriterFencedError))
def repair_language_task(store: ObjectStore, language: str, now: datetime) -> dict[str, Any]:
    return repair_language(store, language, now)
