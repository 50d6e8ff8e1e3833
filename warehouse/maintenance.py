"""Maintenance of the store: compaction, retention and page-version pruning.

Every step is safe to interrupt and to rerun. A compacted segment is written (content-keyed, so a
rerun writes the same key) before its sources are deleted; until then the views count each row once.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from warehouse import layout
from warehouse.schemas import ARTICLES_SCHEMA, CLICKS_SCHEMA, STORY_CHANGES_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import content_segment_id, list_segments, read_segments, write_segment

COMPACT_PREFIX = "compact-"


@dataclass(slots=True)
class MaintenanceReport:
    compacted_segments: int = 0
    written_segments: int = 0
    deleted_for_retention: int = 0
    pruned_page_versions: int = 0
    pruned_writer_states: int = 0
    notes: list[str] = field(default_factory=list)


def is_compacted(key: str) -> bool:
    return key.rsplit("/", 1)[-1].startswith(COMPACT_PREFIX)


def _partition_day(key: str) -> str | None:
    for part in key.split("/"):
        if part.startswith("date="):
            return part[5:]
    return None


def _by_folder(keys: Iterable[str]) -> dict[str, list[str]]:
    folders: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        folders[key.rsplit("/", 1)[0]].append(key)
    return folders


def consumed_by_every_writer(store: ObjectStore) -> set[str]:
    """Article segments that every language writer has consumed (compaction may touch only these)."""
    sets = [set(json.loads(store.get(k).data).get("consumed", []))
            for k in store.list(layout.STORY_STATE_PREFIX) if k.endswith("/checkpoint.json")]
    return set.intersection(*sets) if sets else set()


def _compact(store: ObjectStore, keys: list[str], schema: pa.Schema, folder: str, sort_by: list[str],
             report: MaintenanceReport) -> None:
    table = read_segments(store, sorted(keys), schema)
    table = table.sort_by([(c, "ascending") for c in sort_by])
    key = f"{folder}/{COMPACT_PREFIX}{content_segment_id(table)}.parquet"
    if write_segment(store, key, table, schema):
        report.written_segments += 1
    for source in keys:
        if source != key:
            store.delete(source)
            report.compacted_segments += 1


def compact_logs(store: ObjectStore, now: datetime, *, min_segments: int = 4) -> MaintenanceReport:
    """Merge small segments into one per folder.

    Article segments are merged once every language writer has consumed them (writers never read
    compacted segments); click segments of days before ``now``'s day, and story-change segments
    whose changes all precede ``now``'s day, are merged per folder.
    """
    report = MaintenanceReport()
    consumed = consumed_by_every_writer(store)
    today = now.strftime("%Y-%m-%d")
    for folder, keys in sorted(_by_folder(list_segments(store, layout.ARTICLES_PREFIX)).items()):
        ready = [k for k in keys if not is_compacted(k) and k in consumed]
        if len(ready) >= min_segments:
            _compact(store, ready + [k for k in keys if is_compacted(k)], ARTICLES_SCHEMA, folder,
                     ["first_seen_at", "article_id", "version", "content_hash"], report)
    for folder, keys in sorted(_by_folder(list_segments(store, layout.CLICKS_PREFIX)).items()):
        day = _partition_day(folder)
        if day is not None and day < today and len([k for k in keys if not is_compacted(k)]) >= min_segments:
            _compact(store, keys, CLICKS_SCHEMA, folder, ["clicked_at", "click_id"], report)
    for folder, keys in sorted(_by_folder(list_segments(store, layout.STORY_CHANGES_PREFIX)).items()):
        small = sorted(k for k in keys if not is_compacted(k))
        if len(small) < min_segments:
            continue
        table = read_segments(store, small, STORY_CHANGES_SCHEMA)
        last_day = pc.max(table.column("changed_at")).as_py()
        if last_day is not None and last_day.strftime("%Y-%m-%d") < today:
            _compact(store, small, STORY_CHANGES_SCHEMA, folder, ["offset"], report)
    return report


def prune_writer_states(store: ObjectStore, *, keep: int = 3, report: MaintenanceReport | None = None
                        ) -> MaintenanceReport:
    """Delete a language writer's old state blobs, keeping the one its checkpoint names and the newest."""
    report = report or MaintenanceReport()
    for folder, keys in sorted(_by_folder(store.list(layout.STORY_STATE_PREFIX)).items()):
        checkpoint_key = f"{folder}/checkpoint.json"
        if checkpoint_key not in keys:
            continue
        current = json.loads(store.get(checkpoint_key).data).get("state_key")
        states = sorted(k for k in keys if k.rsplit("/", 1)[-1].startswith("state-"))
        for key in states[:-keep]:
            if key != current:
                store.delete(key)
                report.pruned_writer_states += 1
    return report


def apply_retention(store: ObjectStore, now: datetime, *, article_days: int = 30, click_days: int = 90,
                    report: MaintenanceReport | None = None) -> MaintenanceReport:
    """Delete article partitions older than ``article_days`` and click partitions older than ``click_days``.

    Story changes follow their articles: a compacted story-change segment whose newest change is
    older than ``article_days`` is deleted.
    """
    report = report or MaintenanceReport()
    for prefix, days in [(layout.ARTICLES_PREFIX, article_days), (layout.CLICKS_PREFIX, click_days)]:
        cutoff = (now - timedelta(days=days)).strftime("%Y-%m-%d")
        for key in list_segments(store, prefix):
            day = _partition_day(key)
            if day is not None and day < cutoff:
                store.delete(key)
                report.deleted_for_retention += 1
    horizon = now - timedelta(days=article_days)
    for key in list_segments(store, layout.STORY_CHANGES_PREFIX):
        if not is_compacted(key):
            continue
        newest = pc.max(read_segments(store, [key], STORY_CHANGES_SCHEMA).column("changed_at")).as_py()
        if newest is not None and newest < horizon:
            store.delete(key)
            report.deleted_for_retention += 1
    return report


def prune_page_versions(store: ObjectStore, now: datetime | None = None, *, keep: int = 20,
                        keep_for: timedelta = timedelta(hours=48), report: MaintenanceReport | None = None
                        ) -> MaintenanceReport:
    """Delete page versions that neither a rollback nor time travel can need.

    A version stays when it is live or newer, among the ``keep`` before the live one (rollback), or
    published within ``keep_for`` of ``now`` (``newsroom rank --as-of`` rebuilds and compares it).
    """
    report = report or MaintenanceReport()
    horizon = (now - keep_for).strftime("%Y-%m-%dT%H:%M:%SZ") if now is not None else None
    for folder, keys in sorted(_by_folder(store.list(layout.PAGES_PREFIX)).items()):
        pointer_key = f"{folder}/latest.json"
        if pointer_key not in keys:
            continue
        live = int(json.loads(store.get(pointer_key).data)["version"])
        for key in keys:
            name = key.rsplit("/", 1)[-1]
            if not (name.startswith("v") and name.endswith(".json") and name[1:-5].isdigit()):
                continue
            if int(name[1:-5]) >= live - keep:
                continue
            if horizon is not None and str(json.loads(store.get(key).data).get("as_of") or "") >= horizon:
                continue
            store.delete(key)
            report.pruned_page_versions += 1
    return report
