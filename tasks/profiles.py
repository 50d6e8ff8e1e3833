"""The profiles fold: new click segments → decayed topic/source/term weights in the profile store.

The profile store is serving's SQLite file (``NEWSROOM_SERVING_PROFILES_PATH``). This task owns
three of its tables, ``weights``, ``clicks_consumed`` (segment keys read, so a segment is read
once) and ``clicks_folded`` (click ids counted), and writes them in one transaction, so a click
counts exactly once even if a run dies half way (the next run redoes it), and also when
compaction moves it into a new ``compact-*`` segment or a crashed compaction left it in two.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from transforms.affinity import (
    ClickSignal,
    StoredWeight,
    WeightKey,
    fold_weights,
)
from warehouse import layout
from warehouse.errors import SnapshotNotFoundError
from warehouse.maintenance import is_compacted
from warehouse.profiles import PROFILE_TABLES_SQL, title_terms
from warehouse.schemas import CLICKS_SCHEMA
from warehouse.snapshots import read_live_stories
from warehouse.store import ObjectStore
from warehouse.tables import list_segments, read_segments

log = logging.getLogger(__name__)



def _story_index(store: ObjectStore) -> tuple[dict[str, Any], dict[str, str]]:
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


def _signal(click: dict[str, Any], stories: dict[str, Any], aliases: dict[str, str]) -> ClickSignal:
    story = stories.get(_resolve(str(click["story_id"]), aliases)) or {}
    publisher = next(
        (s.get("publisher_id") for s in story.get("sources") or [] if s.get("article_id") == click["article_id"]),
        None,
    )
    topics = tuple(str(s) for s in story.get("sections") or [])
    topics += tuple(str(e).lower() for e in story.get("entities") or [] if isinstance(e, str))
    return ClickSignal(topics, publisher, title_terms(str(story.get("title") or "")), click["clicked_at"])


_ID_CHUNK = 500


def _folded_ids(db: sqlite3.Connection, ids: list[str], consumed: set[str]) -> set[str]:
    """Which of ``ids`` were folded before: recorded by id, or read (before ids were recorded) from
    their own one-click segment, ``log/clicks/date=.../<click_id>.parquet``."""
    found = {k.rsplit("/", 1)[-1].removesuffix(".parquet") for k in consumed if not is_compacted(k)} & set(ids)
    for i in range(0, len(ids), _ID_CHUNK):
        chunk = ids[i : i + _ID_CHUNK]
        marks = ",".join("?" * len(chunk))
        found.update(c for (c,) in db.execute(f"select click_id from clicks_folded where click_id in ({marks})", chunk))
    return found


def fold_clicks(store: ObjectStore, profiles_path: str, now: datetime, half_life_hours: float) -> dict[str, int]:
    """Fold every click not yet folded into its reader's weights.

    Segments already read are skipped by key; the clicks of the others are folded unless their
    ``click_id`` was folded before (a compacted segment holds clicks already read under their
    own keys). Click ids of days older than the oldest click folder left (retention) are forgotten.

    Returns:
        Counts: ``segments`` read, ``clicks`` folded, ``readers`` updated.
    """
    if profiles_path != ":memory:":
        Path(profiles_path).parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(profiles_path, timeout=30, isolation_level=None)
    try:
        db.execute("pragma journal_mode=wal")
        db.executescript(PROFILE_TABLES_SQL)
        consumed = {k for (k,) in db.execute("select segment_key from clicks_consumed")}
        listed = list_segments(store, layout.CLICKS_PREFIX)
        keys = sorted(k for k in listed if k not in consumed)
        if not keys:
            return {"segments": 0, "clicks": 0, "readers": 0}
        table = read_segments(store, keys, CLICKS_SCHEMA).sort_by([("clicked_at", "ascending"), ("click_id", "ascending")])
        done = _folded_ids(db, sorted(set(table.column("click_id").to_pylist())), consumed)
        clicks = []
        for click in table.to_pylist():
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
        db.execute("begin immediate")
        try:
            for reader_hash, signals in sorted(by_reader.items()):
                current: dict[WeightKey, StoredWeight] = {
                    (kind, key): StoredWeight(weight, datetime.fromtimestamp(as_of, UTC))
                    for kind, key, weight, as_of in db.execute(
                        "select kind, key, weight, as_of from weights where reader_hash = ?", (reader_hash,)
                    )
                }
                folded = fold_weights(current, signals, now, half_life_hours=half_life_hours)
                db.execute("delete from weights where reader_hash = ?", (reader_hash,))
                db.executemany(
                    "insert into weights values (?, ?, ?, ?, ?)",
                    [(reader_hash, kind, key, w, stamp) for (kind, key), w in sorted(folded.items())],
                )
            db.executemany("insert or ignore into clicks_folded values (?, ?, ?)",
                           [(c["click_id"], (c["clicked_at"] or now).strftime("%Y-%m-%d"), stamp) for c in clicks])
            db.executemany("insert into clicks_consumed values (?, ?)", [(k, stamp) for k in keys])
            if oldest_day is not None:  # older clicks were deleted by retention: they cannot come back
                db.execute("delete from clicks_folded where day < ?", (oldest_day,))
        except BaseException:
            db.execute("rollback")
            raise
        db.execute("commit")
    finally:
        db.close()
    return {"segments": len(keys), "clicks": len(clicks), "readers": len(by_reader)}


@task(name="fold_clicks", retries=2, retry_delay_seconds=5, timeout_seconds=50, cache_policy=NO_CACHE)
def fold_clicks_task(store: ObjectStore, profiles_path: str, now: datetime, half_life_hours: float) -> dict[str, int]:
    return fold_clicks(store, profiles_path, now, half_life_hours)
