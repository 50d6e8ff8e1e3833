"""The search index's versions (issue 30): published beside the pages, as a page is, but not JSON.

A version is a tar (``pages/search/v{n}.tar``, built by :mod:`warehouse.search_index`); its pointer
is a page's with what the index holds (``as_of``, ``digest``, ``documents``), so the same rules
hold: validated, put, then the pointer moved with If-Match; numbers never reused; a stale
``as_of`` refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import cast

from warehouse import layout
from warehouse.damage import record_damage
from warehouse.errors import ObjectNotFoundError, PreconditionFailedError, SnapshotNotFoundError
from warehouse.pointers import (
    LOST_RACE,
    PagePointer,
    PublishResult,
    SearchPointerJson,
    pointer_from_bytes,
    pointer_json,
    put_pointer,
    read_pointer_at,
    stored_versions,
)
from warehouse.snapshots import PUBLISH_ATTEMPTS, dump_snapshot, put_new_version, skipped_orphans
from warehouse.store import ObjectStore


def read_search_pointer(store: ObjectStore) -> tuple[PagePointer, SearchPointerJson] | None:
    """The search index's pointer and its JSON (``digest``, ``as_of``, ``documents``, ...), or None
    before the first publish. Raises SnapshotNotFoundError when it is unreadable."""
    pointer_key = layout.search_index_pointer_key()
    found = read_pointer_at(store, pointer_key)
    if found is None:
        return None
    raw = cast("SearchPointerJson", json.loads(store.get(pointer_key).data))
    return found[0], raw


def publish_search_index(store: ObjectStore, build: Callable[[], bytes], *, digest: str, as_of: str,
                         documents: int, now: datetime, validate: Callable[[bytes], str | None]) -> PublishResult:
    """Publish a search index version beside the pages: validated, put, then the pointer moved.

    Nothing is built or published when the live version indexes the same documents (``digest``),
    and a version whose ``as_of`` is older than the live one's is refused (``stale: ...``), as for
    a page. Otherwise ``build()`` makes the bytes (once), ``validate(data)`` opens them as a replica
    would and returns a reason to refuse, or None; only then is the version put and the pointer
    moved (If-Match on the pointer read, so a rival publisher is fenced and the loser starts
    over). A damaged pointer is recorded and replaced; numbers are never reused.
    """
    made: list[bytes] = []
    pointer_key = layout.search_index_pointer_key()
    lost = PublishResult(pointer_key, 0, False, LOST_RACE)
    for _ in range(PUBLISH_ATTEMPTS):
        try:
            obj = store.get(pointer_key)
        except ObjectNotFoundError:
            obj = None
        pointer: PagePointer | None = None
        raw: dict[str, object] = {}
        if obj is not None:
            try:
                pointer = pointer_from_bytes(obj.data, pointer_key)
                raw = json.loads(obj.data)
            except SnapshotNotFoundError as e:
                record_damage(pointer_key, f"corrupt: {e.reason}", "replaced by this publish")
        if pointer is not None and raw.get("digest") == digest and store.head(pointer.key) is not None:
            return PublishResult(pointer.key, pointer.version, False, "unchanged")
        if pointer is not None and str(raw.get("as_of") or "") > as_of:
            return PublishResult(pointer.key, pointer.version, False,
                                 f"stale: as_of {as_of} is older than the live version's {raw.get('as_of')}")
        high_water = pointer.high_water if pointer else 0
        if not made:
            made.append(build())
        data = made[0]
        problem = validate(data)
        if problem is not None:
            return PublishResult(layout.search_index_key(high_water + 1), high_water + 1, False, f"invalid: {problem}")
        version, key, _ = put_new_version(store, layout.search_index_key, high_water + 1, lambda _: made[0],
                                          "application/x-tar")
        # As for a page: numbers skipped on the way (a crashed publish's, a rival's) never go live.
        moved: SearchPointerJson = {
            **pointer_json(version, key, data, now, orphans=skipped_orphans(pointer, high_water, version)),
            "as_of": as_of, "digest": digest, "documents": documents,
        }
        try:
            put_pointer(store, pointer_key, dump_snapshot(moved), obj.etag if obj is not None else None)
        except PreconditionFailedError:
            lost = PublishResult(key, version, False, LOST_RACE)
            continue
        return PublishResult(key, version, True, "published", previous=pointer.version if pointer else None,
                             moved_at=moved["published_at"])
    return lost


def prune_search_versions(store: ObjectStore, *, keep: int) -> list[str]:
    """Delete search index versions more than ``keep`` below the live one (none while the pointer
    is unreadable). Returns the keys deleted. Nothing rebuilds a past index (``rank --as-of``
    rebuilds pages), so the ``keep`` before the live one are only what a replica falls back to."""
    try:
        found = read_pointer_at(store, layout.search_index_pointer_key())
    except SnapshotNotFoundError:
        return []
    if found is None:
        return []
    live = found[0].version
    deleted = []
    for version in sorted(stored_versions(store, layout.search_index_key)):
        if version < live - keep:
            key = layout.search_index_key(version)
            store.delete(key)
            deleted.append(key)
    return deleted
