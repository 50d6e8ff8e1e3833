"""What each flow reads and writes in the store, as Prefect assets (issue 31).

The tasks that commit a step's output (ingest's commit, a language writer's commit, rank's
publish) run as Prefect materializations of the store's tables: the UI's Assets page then shows
the lineage ``registry -> log/articles -> log/story_changes -> pages`` with every run that
materialized each, per store (the asset keys are the store's URI plus the table's prefix, so two
stores never mix).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from prefect import Task
from prefect.assets import Asset, AssetProperties
from prefect.cache_policies import NO_CACHE
from prefect.tasks import MaterializingTask

from warehouse import layout
from warehouse.store import ObjectStore

TABLES: dict[str, tuple[str, str]] = {
    "registry": ("registry", "publishers and their feeds"),
    "feeds": ("state/feeds", "each feed's polling state"),
    "articles": (layout.ARTICLES_PREFIX.rstrip("/"), "normalised articles, one segment per ingest run"),
    "story_changes": (layout.STORY_CHANGES_PREFIX.rstrip("/"), "assignments, new stories, merges and splits"),
    "pages": ("pages", "published page snapshots and the story snapshot"),
}
"""Asset name -> (key prefix in the store, description)."""

_MADE: dict[tuple[str, str, tuple[str, ...], tuple[str, ...]], MaterializingTask[Any, Any]] = {}


def store_asset(store: ObjectStore, name: str) -> Asset:
    """The asset of one of the store's tables (:data:`TABLES`)."""
    prefix, description = TABLES[name]
    return Asset(key=f"{store.uri.rstrip('/')}/{prefix}",
                 properties=AssetProperties(name=f"newsroom {name}", description=description))


def materializing(task: Task[Any, Any], store: ObjectStore, writes: Sequence[str], reads: Sequence[str]
                  ) -> Callable[..., Any]:
    """``task`` run as the materialization of the store's ``writes`` tables, upstream of ``reads``
    (same function, name, retries and timeout)."""
    key = (task.name, store.uri, tuple(writes), tuple(reads))
    made = _MADE.get(key)
    if made is None:
        made = MaterializingTask(
            fn=task.fn, assets=[store_asset(store, w) for w in writes],
            asset_deps=[store_asset(store, r) for r in reads], name=task.name, retries=task.retries,
            retry_delay_seconds=task.retry_delay_seconds, timeout_seconds=task.timeout_seconds,
            retry_condition_fn=task.retry_condition_fn, cache_policy=NO_CACHE)
        _MADE[key] = made
    return made
