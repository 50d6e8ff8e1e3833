"""Page snapshots: immutable versions, validated, then a pointer moved last.

The write side is used by rank & publish; the read side (``read_live_*``, ``list_live_pages``)
is all that serving may use. See docs/snapshots.md for the JSON contract.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from warehouse import layout
from warehouse.errors import ObjectNotFoundError, PreconditionFailedError, SnapshotNotFoundError
from warehouse.store import ObjectStore

PAGE_SCHEMA = "newsroom.page/1"
STORIES_SCHEMA = "newsroom.stories/1"


@dataclass(frozen=True, slots=True)
class PagePointer:
    version: int
    key: str
    sha256: str
    published_at: str


@dataclass(frozen=True, slots=True)
class LivePage:
    """The bytes of a live page version, exactly as published (the ETag is their sha256)."""

    pointer: PagePointer
    data: bytes


@dataclass(frozen=True, slots=True)
class PublishResult:
    key: str
    version: int
    published: bool
    reason: str


def dump_snapshot(payload: Mapping[str, Any]) -> bytes:
    """Serialise a snapshot deterministically: sorted keys, compact, UTF-8."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _pointer_from_bytes(data: bytes, key: str) -> PagePointer:
    try:
        raw = json.loads(data)
        return PagePointer(int(raw["version"]), str(raw["key"]), str(raw["sha256"]), str(raw["published_at"]))
    except (ValueError, KeyError, TypeError) as e:
        raise SnapshotNotFoundError("unreadable pointer", key=key) from e


def _read_pointer_at(store: ObjectStore, pointer_key: str) -> tuple[PagePointer, str] | None:
    try:
        obj = store.get(pointer_key)
    except ObjectNotFoundError:
        return None
    return _pointer_from_bytes(obj.data, pointer_key), obj.etag


def _read_live_at(store: ObjectStore, pointer_key: str) -> LivePage:
    found = _read_pointer_at(store, pointer_key)
    if found is None:
        raise SnapshotNotFoundError("no live version", key=pointer_key)
    pointer, _ = found
    try:
        data = store.get(pointer.key).data
    except ObjectNotFoundError as e:
        raise SnapshotNotFoundError("pointer names a missing version", key=pointer.key) from e
    if hashlib.sha256(data).hexdigest() != pointer.sha256:
        raise SnapshotNotFoundError("version bytes do not match the pointer's sha256", key=pointer.key)
    return LivePage(pointer, data)


def read_pointer(store: ObjectStore, edition: str, section: str) -> PagePointer | None:
    found = _read_pointer_at(store, layout.page_pointer_key(edition, section))
    return found[0] if found else None


def read_live_page(store: ObjectStore, edition: str, section: str) -> LivePage:
    """The live version of one page. Raises SnapshotNotFoundError."""
    return _read_live_at(store, layout.page_pointer_key(edition, section))


def read_live_stories(store: ObjectStore) -> LivePage:
    """The live story snapshot (Full Coverage). Raises SnapshotNotFoundError."""
    return _read_live_at(store, layout.story_snapshot_pointer_key())


def list_live_pages(store: ObjectStore) -> list[tuple[str, str]]:
    """Every (edition, section) that has a pointer, sorted."""
    pages = []
    for key in store.list(layout.PAGES_PREFIX):
        parts = key.split("/")
        if (len(parts) == 4 and parts[3] == "latest.json" and parts[1] != layout.STORIES_PAGE
                and parts[2] != layout.POOL_SECTION):
            pages.append((parts[1], parts[2]))
    return sorted(pages)


def _publish_at(
    store: ObjectStore,
    pointer_key: str,
    version_key: Callable[[int], str],
    payload: dict[str, Any],
    now: datetime,
    validate: Callable[[dict[str, Any], dict[str, Any] | None], str | None],
) -> PublishResult:
    current = _read_pointer_at(store, pointer_key)
    previous: dict[str, Any] | None = None
    if current is not None:
        prev_data = store.get(current[0].key).data
        previous = json.loads(prev_data)
        comparable = dict(previous, version=None, as_of=None)
        if dump_snapshot(comparable) == dump_snapshot(dict(payload, version=None, as_of=None)):
            return PublishResult(current[0].key, current[0].version, False, "unchanged")
    version = _high_water(store, pointer_key, current[0].version) + 1 if current else 1
    payload = dict(payload, version=version)
    problem = validate(payload, previous)
    if problem is not None:
        return PublishResult(version_key(version), version, False, f"invalid: {problem}")
    data = dump_snapshot(payload)
    key = version_key(version)
    try:
        store.put(key, data, if_none_match=True, content_type="application/json")
    except PreconditionFailedError:
        # Left by a publisher that died before moving the pointer, or a concurrent one: versions
        # are immutable, so only an identical object may be adopted.
        if store.get(key).data != data:
            return PublishResult(key, version, False, "version exists with other bytes")
    pointer = {
        "version": version,
        "key": key,
        "sha256": hashlib.sha256(data).hexdigest(),
        "published_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    try:
        if current is None:
            store.put(pointer_key, dump_snapshot(pointer), if_none_match=True, content_type="application/json")
        else:
            store.put(pointer_key, dump_snapshot(pointer), if_match=current[1], content_type="application/json")
    except PreconditionFailedError:
        return PublishResult(key, version, False, "pointer moved by another publisher")
    return PublishResult(key, version, True, "published")


def publish_page(
    store: ObjectStore,
    edition: str,
    section: str,
    payload: dict[str, Any],
    *,
    now: datetime,
    validate: Callable[[dict[str, Any], dict[str, Any] | None], str | None],
) -> PublishResult:
    """Write the next immutable version, validate it against the live one, then move the pointer.

    A payload equal to the live version (ignoring ``version`` and ``as_of``) publishes nothing, so
    rerunning a cycle changes nothing. ``validate(new, previous)`` returns a reason to refuse, or None.
    """
    return _publish_at(
        store,
        layout.page_pointer_key(edition, section),
        lambda v: layout.page_version_key(edition, section, v),
        payload,
        now,
        validate,
    )


def publish_stories(
    store: ObjectStore,
    payload: dict[str, Any],
    *,
    now: datetime,
    validate: Callable[[dict[str, Any], dict[str, Any] | None], str | None],
) -> PublishResult:
    """Publish the story snapshot the same way as a page."""
    return _publish_at(
        store, layout.story_snapshot_pointer_key(), layout.story_snapshot_key, payload, now, validate
    )


def _high_water(store: ObjectStore, pointer_key: str, live_version: int) -> int:
    """The highest version ever written under a pointer: after a rollback the pointer names an older
    version and remembers the newest in ``high_water``, so the next version never reuses a number."""
    try:
        raw = json.loads(store.get(pointer_key).data)
    except (ObjectNotFoundError, ValueError):
        return live_version
    return max(live_version, int(raw.get("high_water") or 0))


def rollback_page(store: ObjectStore, edition: str, section: str, version: int, *, now: datetime) -> PublishResult:
    """Point a page back at an earlier published version, with a conditional put on the pointer.

    The version must exist and differ from the live one (a newer one undoes a rollback); readers
    check its bytes against the pointer's sha256 as usual.
    Raises SnapshotNotFoundError when there is no live pointer or no such version.
    """
    pointer_key = layout.page_pointer_key(edition, section)
    current = _read_pointer_at(store, pointer_key)
    if current is None:
        raise SnapshotNotFoundError("no live version", key=pointer_key)
    key = layout.page_version_key(edition, section, version)
    try:
        data = store.get(key).data
    except ObjectNotFoundError as e:
        raise SnapshotNotFoundError("no such version", key=key) from e
    if version == current[0].version:
        return PublishResult(key, version, False, "already the live version")
    pointer = {
        "version": version,
        "key": key,
        "sha256": hashlib.sha256(data).hexdigest(),
        "published_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "high_water": _high_water(store, pointer_key, current[0].version),
        "rolled_back_from": current[0].version,
    }
    try:
        store.put(pointer_key, dump_snapshot(pointer), if_match=current[1], content_type="application/json")
    except PreconditionFailedError:
        return PublishResult(key, version, False, "pointer moved by another publisher")
    return PublishResult(key, version, True, "rolled back")
