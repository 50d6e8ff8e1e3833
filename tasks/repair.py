"""The repair writer: merges and splits through the same fenced checkpoint as the cluster writer.

A repair run loads the language writer's checkpoint and state, runs
:func:`transforms.clustering.repair.repair_stories` over the stories active in the last six hours, appends
one ``log/story_changes`` row per moved article (kind ``merge``: ``story_id`` is the survivor and
``other_story_id`` the merged-away story, which becomes an alias; kind ``split``: ``story_id`` is
the new half and ``other_story_id`` the story it left), and commits with the cluster writer's
If-Match on the checkpoint. A repair and a cluster run of one language never both commit: the
second put loses with 412 (:class:`tasks.errors.WriterFencedError`).

A split keeps the story id with the half holding the story's representative, the headline the
pages show: the ``representative_id`` of the story snapshot that was live at the repair's ``now``
(:func:`published_representatives`). A story it does not hold yet (new since that publish, or
never on a page) falls back to the representative the story snapshot would choose, from the
registry's publisher authorities; with no registered publisher among its members, to its first
article (the rule before representatives were passed). See
:func:`transforms.clustering.repair.story_representative`.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.errors import WriterFencedError
from tasks.registry import load_registry
from tasks.writer.kept import KeptStates
from tasks.writer.run import WriterSummary, with_damage
from tasks.writer.session import commit, load, release
from transforms.clustering import RepairParams, repair_stories
from transforms.records import StoryChange
from warehouse.damage import collect_damage
from warehouse.snapshots import story_snapshot_at
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)


SNAPSHOT_SEARCH_VERSIONS = 20
"""Most story snapshot versions read back from the live one to find the one live at ``now``."""


def published_representatives(store: ObjectStore, now: datetime) -> dict[str, str]:
    """Story id → representative article id, from the story snapshot that was live at ``now``.

    That is the newest published version whose ``as_of`` is not after ``now``: the live one in a
    run on time, an older one in a rerun at an earlier ``now``. Published versions never change, so
    a rerun at the same ``now`` reads the same representatives and makes the same decisions (the
    writer's fence needs that: a rerun after a crash must write the same bytes). The one exception
    is a publish with an ``as_of`` up to ``now`` that lands between two runs (a rank cycle begun
    before ``now`` and finished after the first run read the snapshot).

    Returns:
        An empty mapping before the first publish, or when none of the ``SNAPSHOT_SEARCH_VERSIONS``
        newest published versions (still stored) is old enough.
    """
    payload = story_snapshot_at(store, now, search=SNAPSHOT_SEARCH_VERSIONS)
    if payload is None:
        return {}
    return {sid: str(story["representative_id"]) for sid, story in sorted(payload["stories"].items())
            if isinstance(story, dict) and story.get("representative_id")}


def publisher_authority(store: ObjectStore) -> dict[str, float]:
    """Publisher id → authority, from the registry (what the pages choose representatives by)."""
    return {pid: float(p["authority"] or 0.0) for pid, p in load_registry(store).publishers.items()}


@dataclass(frozen=True, slots=True)
class RepairInputs:
    """What every language's repair reads besides its own writer: the representatives of the story
    snapshot live at ``now`` and the registry's authorities."""

    representatives: dict[str, str]
    authority: dict[str, float]


class RepairInputsOnce:
    """The :class:`RepairInputs` of one flow run (or one tick of a writer session), read when the
    first language needs them and shared by the others (issue 15: the story snapshot and the
    registry were read again for every language). Safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read: tuple[datetime, RepairInputs] | None = None

    def __call__(self, store: ObjectStore, now: datetime) -> RepairInputs:
        with self._lock:
            if self._read is None or self._read[0] != now:
                self._read = (now, RepairInputs(published_representatives(store, now), publisher_authority(store)))
            return self._read[1]


def repair_language(store: ObjectStore, language: str, now: datetime, params: RepairParams | None = None,
                    inputs: RepairInputsOnce | None = None, kept: KeptStates | None = None) -> WriterSummary:
    """Merge and split this language's recently active stories and commit, fenced. Returns a summary.

    A split keeps the id with the half holding the representative of the story snapshot live at
    ``now``; a story without one there falls back to the representative the snapshot would choose
    (registry authority), then to the story's first article (see the module doc). Objects it could
    not read are named in ``damaged`` (issue 16).

    Args:
        inputs: The flow run's shared reader of the snapshot and registry (one of its own by default).
        kept: The owner's writer states kept in memory (a long-running process), if any.
    """
    with collect_damage() as damaged:
        summary = _repair_language(store, language, now, params, inputs or RepairInputsOnce(), kept)
    return with_damage(summary, damaged)


def _repair_language(store: ObjectStore, language: str, now: datetime, params: RepairParams | None,
                     inputs: RepairInputsOnce, kept: KeptStates | None) -> WriterSummary:
    session = load(store, language, kept)
    if session.checkpoint.state_key is None:
        return {"language": language, "committed": False, "merge": 0, "split": 0}
    shared = inputs(store, now)
    repairs = repair_stories(session.clusterer, now, params, shared.representatives, shared.authority)
    if not repairs:  # nothing applied, nothing changed: the state in memory is still the stored one
        release(session)
        return {"language": language, "committed": False, "merge": 0, "split": 0}
    offset = session.offset
    changes: list[StoryChange] = []
    kinds: Counter[str] = Counter()
    for r in repairs:
        kinds[r.kind] += 1
        target, source = (r.story_id, r.other_story_id) if r.kind == "merge" else (r.other_story_id, r.story_id)
        for article_id, copy_of in r.moved:
            changes.append(StoryChange.at(language, offset + len(changes), r.kind, target, article_id=article_id,
                                          copy_of=copy_of, other_story_id=source, score=r.score, changed_at=now))
    new_offset = commit(session, changes, now).offset
    log.info("repair_committed language=%s merges=%d splits=%d offset=%d", language, kinds["merge"],
             kinds["split"], new_offset)
    return {"language": language, "committed": True, "offset": new_offset, "merge": kinds["merge"],
            "split": kinds["split"]}


@task(name="repair_language", retries=1, retry_delay_seconds=2, timeout_seconds=900, cache_policy=NO_CACHE,
      retry_condition_fn=lambda task, run, state: not isinstance(state.result(raise_on_failure=False), WriterFencedError))
def repair_language_task(store: ObjectStore, language: str, now: datetime,
                         inputs: RepairInputsOnce | None = None, kept: KeptStates | None = None) -> WriterSummary:
    return repair_language(store, language, now, inputs=inputs, kept=kept)
