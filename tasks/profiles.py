"""The profiles fold: new click segments → decayed topic/source/term weights in the profile store.

The profile store is serving's: PostgreSQL when ``NEWSROOM_SERVING_PROFILES_URL`` names one (issue
19), else the SQLite file at ``NEWSROOM_SERVING_PROFILES_PATH``. This task owns three of its tables, ``weights``, ``clicks_consumed`` (segment keys read, so a segment is read
once) and ``clicks_folded`` (click ids counted), and writes them in one transaction, so a click
counts exactly once even if a run dies half way (the next run redoes it), and also when
compaction moves it into a new ``compact-*`` segment or a crashed compaction left it in two.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from datetime import UTC, datetime
from typing import TypedDict, cast

from prefect import task
from prefect.cache_policies import NO_CACHE

from transforms.affinity import (
    ClickSignal,
    StoredWeight,
    WeightKey,
    fold_weights,
)
from warehouse import layout
from warehouse.damage import collect_damage
from warehouse.errors import SnapshotNotFoundError
from warehouse.maintenance import is_compacted
from warehouse.profile_db import open_fold_store
from warehouse.profiles import title_terms
from warehouse.schemas import CLICKS_SCHEMA
from warehouse.snapshot_json import StoryJson
from warehouse.snapshots import read_live_stories
from warehouse.store import ObjectStore
from warehouse.tables import list_segments, read_segments

log = logging.getLogger(__name__)



class _ClickRow(TypedDict):
    """A row of the click log (:data:`warehouse.schemas.CLICKS_SCHEMA`)."""

    click_id: str
    article_id: str
    story_id: str
    reader_hash: str | None
    surface: str
    position: int | None
    clicked_at: datetime


def _story_index(store: ObjectStore) -> tuple[dict[str, StoryJson], dict[str, str]]:
    try:
        raw = json.loads(read_live_stories(store).data)
    except SnapshotNotFoundError:
        return {}, {}
    return dict(raw.get("stories") or {}), dict(raw.get("aliases") or {})


def _resolve(story_id: str, aliases: dict[str, str]) -> str:
    seen = {story_id}
    while story_id in aliases and aliases[story_id] not in seen:
        story_id = aliases[story_id]
        seen.add(story_id)
    return story_id


def _signal(click: _ClickRow, stories: dict[str, StoryJson], aliases: dict[str, str]) -> ClickSignal:
    story: StoryJson = stories.get(_resolve(str(click["story_id"]), aliases)) or {}
    publisher = next(
        (s.get("publisher_id") for s in story.get("sources") or [] if s.get("article_id") == click["article_id"]),
        None,
    )
    topics = tuple(str(s) for s in story.get("sections") or [])
    topics += tuple(str(e).lower() for e in story.get("entities") or [] if isinstance(e, str))
    return ClickSignal(topics, publisher, title_terms(str(story.get("title") or "")), click["clicked_at"])


def _is_single_click(key: str) -> bool:
    """A segment of the one-object-per-click layout, named by its click id."""
    return not is_compacted(key) and not layout.is_click_batch(key)


def _legacy_folded_ids(ids: list[str], consumed: set[str]) -> set[str]:
    """Which of ``ids`` were read, before ids were recorded, from their own one-click segment
    (``log/clicks/date=.../<click_id>.parquet``, the layout before batched segments)."""
    return {k.rsplit("/", 1)[-1].removesuffix(".parquet") for k in consumed if _is_single_click(k)} & set(ids)


def fold_clicks(store: ObjectStore, profiles_at: str, now: datetime, half_life_hours: float) -> dict[str, int]:
    """Fold every click not yet folded into its reader's weights.

    Segments already read are skipped by key; the clicks of the others are folded unless their
    ``click_id`` was folded before (a compacted segment holds clicks already read under their
    own keys, and a reload served by two replicas is in two batches). Click ids of days older than
    the oldest click folder left (retention) are forgotten.

    Args:
        store: The object store holding ``log/clicks/``.
        profiles_at: The profile store: a ``postgresql://`` URL, else a SQLite file path.
        now: The fold's instant (weights decay to it).
        half_life_hours: Hours for a click's weight to halve.

    Returns:
        Counts: ``segments`` read, ``clicks`` folded, ``readers`` updated.

    Raises:
        ProfileDbError: The profile store failed, or another fold read the same segments first
            (nothing was written: the next run redoes it).
    """
    db = open_fold_store(profiles_at)
    try:
        consumed = db.consumed_segments()
        listed = list_segments(store, layout.CLICKS_PREFIX)
        keys = sorted(k for k in listed if k not in consumed)
        if not keys:
            return {"segments": 0, "clicks": 0, "readers": 0}
        with collect_damage() as damaged:
            table = read_segments(store, keys, CLICKS_SCHEMA, skip_damaged=True)
        # A segment that could not be read is not marked consumed: once repaired, a later fold reads it.
        keys = [k for k in keys if k not in {d.key for d in damaged}]
        table = table.sort_by([("clicked_at", "ascending"), ("click_id", "ascending")])
        ids = sorted(set(table.column("click_id").to_pylist()))
        done = _legacy_folded_ids(ids, consumed) | db.folded_click_ids(ids)
        clicks: list[_ClickRow] = []
        for click in cast("list[_ClickRow]", table.to_pylist()):
            if click["click_id"] not in done:
                done.add(click["click_id"])
                clicks.append(click)
        stories, aliases = _story_index(store)
        by_reader: dict[str, list[ClickSignal]] = defaultdict(list)
        for click in clicks:
            if click["reader_hash"]:  # anonymous clicks feed analytics, not profiles
                by_reader[click["reader_hash"]].append(_signal(click, stories, aliases))
        stamp = now.timestamp()
        oldest_day = min(filter(None, map(layout.partition_day, listed)), default=None)
        with db.transaction() as tx:
            stored = tx.weights_of(sorted(by_reader))
            for reader_hash, signals in sorted(by_reader.items()):
                current: dict[WeightKey, StoredWeight] = {
                    (kind, key): StoredWeight(weight, datetime.fromtimestamp(as_of, UTC))  # type: ignore[misc]
                    for kind, key, weight, as_of in stored.get(reader_hash, [])
                }
                folded = fold_weights(current, signals, now, half_life_hours=half_life_hours)
                tx.replace_weights(reader_hash, [(kind, key, w, stamp) for (kind, key), w in sorted(folded.items())])
            tx.mark_folded([(c["click_id"], (c["clicked_at"] or now).strftime("%Y-%m-%d")) for c in clicks], stamp)
            tx.mark_consumed(keys, stamp)
            if oldest_day is not None:  # older clicks were deleted by retention: they cannot come back
                tx.forget_folded_before(oldest_day)
    finally:
        db.close()
    return {"segments": len(keys), "clicks": len(clicks), "readers": len(by_reader)}


@task(name="fold_clicks", retries=2, retry_delay_seconds=5, timeout_seconds=50, cache_policy=NO_CACHE)
def fold_clicks_task(store: ObjectStore, profiles_at: str, now: datetime, half_life_hours: float) -> dict[str, int]:
    return fold_clicks(store, profiles_at, now, half_life_hours)
