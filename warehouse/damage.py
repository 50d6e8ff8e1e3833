"""Damaged objects: a corrupt or missing object is named, recorded, and never stops the rest (issue 16).

A reader on the pipeline's or the site's path that finds an object it cannot use (truncated Parquet,
garbage JSON, a pointer naming a version that is gone) calls :func:`record_damage` with the key,
what is wrong and what it did instead (skipped it, read it as empty, rebuilt it, served an older
version), and goes on with everything else. The record is a warning in the log, and a job that
wraps its work in :func:`collect_damage` puts the records in its summary (rank, cluster, repair,
ingest and health do), so every such error is named with its key. What each kind of object gets
is the rule in docs/store-faults.md; :func:`kind_of_key` names the kinds.

``newsroom doctor --repair`` moves objects it cannot rebuild under :data:`QUARANTINE_PREFIX`
(:func:`quarantine_object`), where no reader looks and nothing is lost.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

from warehouse import layout
from warehouse.errors import ObjectNotFoundError, PreconditionFailedError
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)

QUARANTINE_PREFIX = "quarantine/"
"""Where ``newsroom doctor --repair`` moves objects it cannot rebuild: ``quarantine/<original key>``."""

ObjectKind = Literal[
    "page_pointer", "page_version", "pool_pointer", "pool_version", "story_pointer", "story_snapshot",
    "article_segment", "change_segment", "click_segment", "link_segment", "event", "checkpoint", "state_blob",
    "feed_state", "robots_cache", "registry", "identity_shard", "feed_boosts", "subscription", "push_marker",
    "rank_aggregates", "quarantined", "other",
]
_VERSION_NAME = re.compile(r"^v[0-9]+\.json$")


def kind_of_key(key: str) -> ObjectKind:
    """The kind of object a key holds, from the layout (``warehouse.layout``).

    >>> kind_of_key("pages/en-US/top/latest.json"), kind_of_key("pages/stories/v3.json")
    ('page_pointer', 'story_snapshot')
    >>> kind_of_key("state/stories/en/state-0000000000000007-ab12.json.zst")
    'state_blob'
    """
    parts = key.split("/")
    name = parts[-1]
    if key.startswith(QUARANTINE_PREFIX):
        return "quarantined"
    if key.startswith(layout.PAGES_PREFIX):
        pointer = name == "latest.json"
        if not pointer and not _VERSION_NAME.match(name):
            return "other"
        if len(parts) == 3 and parts[1] == layout.STORIES_PAGE:
            return "story_pointer" if pointer else "story_snapshot"
        if len(parts) == 4 and parts[2] == layout.POOL_SECTION:
            return "pool_pointer" if pointer else "pool_version"
        if len(parts) == 4:
            return "page_pointer" if pointer else "page_version"
        return "other"
    prefixes: list[tuple[str, ObjectKind]] = [
        (layout.ARTICLES_PREFIX, "article_segment"), (layout.STORY_CHANGES_PREFIX, "change_segment"),
        (layout.CLICKS_PREFIX, "click_segment"), ("log/article_links/", "link_segment"),
        (layout.EVENTS_PREFIX, "event"), ("registry/", "registry"), ("state/articles/", "identity_shard"),
        (layout.WEBSUB_PREFIX, "subscription"), (layout.PUSH_PREFIX, "push_marker"),
    ]
    if key == layout.FEED_STATE_KEY:
        return "feed_state"
    if key == layout.ROBOTS_CACHE_KEY:
        return "robots_cache"
    if key == layout.FEED_BOOSTS_KEY:
        return "feed_boosts"
    if key.startswith("state/rank/"):
        return "rank_aggregates"
    if key.startswith(layout.STORY_STATE_PREFIX) and len(parts) == 4:
        if name == "checkpoint.json":
            return "checkpoint"
        if name.startswith(("state-", "base-", "delta-")):
            return "state_blob"
    for prefix, kind in prefixes:
        if key.startswith(prefix):
            return kind
    return "other"


@dataclass(frozen=True, slots=True)
class DamagedObject:
    """One corrupt or missing object, as a reader found it.

    ``problem`` says what is wrong (``corrupt: ...``, ``missing: ...``); ``action`` what the reader
    did instead (``skipped``, ``read as empty``, ``rebuilt``, ``replaced``, ``quarantined``, ...).
    """

    key: str
    kind: str
    problem: str
    action: str


_ACTIVE: ContextVar[tuple[list[DamagedObject], ...]] = ContextVar("newsroom_damage", default=())


@contextmanager
def collect_damage() -> Iterator[list[DamagedObject]]:
    """Collect what :func:`record_damage` records in this context (this thread or task), in order.

    Collections nest: an inner one's records reach the outer ones too.
    """
    found: list[DamagedObject] = []
    token = _ACTIVE.set((*_ACTIVE.get(), found))
    try:
        yield found
    finally:
        _ACTIVE.reset(token)


def record_damage(key: str, problem: str, action: str) -> DamagedObject:
    """Name a corrupt or missing object: a warning in the log, and a record for every collector.

    Args:
        key: The object's key.
        problem: What is wrong, e.g. ``corrupt: ArrowInvalid: ...`` or ``missing: named by ...``.
        action: What the reader did instead.

    Returns:
        The record.
    """
    item = DamagedObject(key, kind_of_key(key), problem, action)
    log.warning("store_object_damaged key=%s kind=%s problem=%s action=%s", key, item.kind, problem, action)
    for found in _ACTIVE.get():
        if item not in found:
            found.append(item)
    return item


def describe_error(error: BaseException, limit: int = 300) -> str:
    """``Type: message``, on one line and at most ``limit`` characters, for a damage record."""
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quarantine_key(key: str) -> str:
    """Where :func:`quarantine_object` moves ``key``.

    >>> quarantine_key("log/articles/date=2026-12-01/ab.parquet")
    'quarantine/log/articles/date=2026-12-01/ab.parquet'
    """
    return f"{QUARANTINE_PREFIX}{key}"


def quarantine_object(store: ObjectStore, key: str) -> str | None:
    """Move an object under ``quarantine/``: copied first, then deleted, so a crash loses nothing.

    A second, different object quarantined under the same key goes beside the first, with its ETag
    in the name. Returns the quarantine key, or None when the object is already gone.
    """
    try:
        obj = store.get(key)
    except ObjectNotFoundError:
        return None
    target = quarantine_key(key)
    try:
        store.put(target, obj.data, if_none_match=True)
    except PreconditionFailedError:
        if store.head(target) != obj.etag:
            target = f"{target}.{obj.etag[:12]}"
            store.put(target, obj.data)
    store.delete(key)
    return target
