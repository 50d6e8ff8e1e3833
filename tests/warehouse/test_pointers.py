"""Pointer objects as records: every kind of move writes the documented keys, and reading a stored
pointer into a ``PagePointer`` and writing it back gives the same bytes (docs/snapshots.md)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from warehouse import layout
from warehouse.errors import SnapshotNotFoundError
from warehouse.pointers import PagePointer, pointer_from_bytes, pointer_json
from warehouse.search_index import SearchCardJson, SearchDocument, build_search_index
from warehouse.search_versions import publish_search_index
from warehouse.snapshot_json import SnapshotJson
from warehouse.snapshots import dump_snapshot, publish_page, repoint_to_newest_valid, rollback_page
from warehouse.store import LocalStore, ObjectStore

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
POINTER = layout.page_pointer_key("en-US", "top")


def _page(at: datetime, ids: str) -> SnapshotJson:
    return {"schema": "newsroom.page/1", "edition": "en-US", "section": "top",
            "as_of": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "stories": [{"story_id": i, "title": i} for i in ids]}


def _publish(store: ObjectStore, at: datetime, ids: str) -> None:
    assert publish_page(store, "en-US", "top", _page(at, ids), now=at, validate=lambda new, prev: None).published


def _rewritten(store: ObjectStore, pointer_key: str) -> bytes:
    """The pointer at ``pointer_key`` read into a record and written again as its move wrote it."""
    data = store.get(pointer_key).data
    raw = json.loads(data)
    pointer = PagePointer.from_json(raw)
    moved = pointer_json(pointer.version, pointer.key, store.get(pointer.key).data,
                         datetime.strptime(pointer.published_at, "%Y-%m-%dT%H:%M:%SZ"),
                         high_water=raw.get("high_water"), rolled_back_from=pointer.rolled_back_from,
                         orphans=pointer.orphans)
    extra = {k: raw[k] for k in ("as_of", "digest", "documents") if k in raw}
    return dump_snapshot({**moved, **extra})


def test_a_publish_writes_version_key_sha256_and_time_only(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    _publish(store, T0, "ab")
    data = store.get(POINTER).data
    version = store.get(layout.page_version_key("en-US", "top", 1)).data
    assert data == (b'{"key":"pages/en-US/top/v1.json","published_at":"2026-01-01T12:00:00Z","sha256":"'
                    + hashlib.sha256(version).hexdigest().encode() + b'","version":1}')
    assert _rewritten(store, POINTER) == data


def test_every_kind_of_move_round_trips_byte_for_byte(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    _publish(store, T0, "ab")
    _publish(store, T0 + timedelta(minutes=1), "abc")
    store.put(layout.page_version_key("en-US", "top", 3), b"{}")  # an orphan: a publisher died before its pointer
    _publish(store, T0 + timedelta(minutes=2), "abcd")
    published = json.loads(store.get(POINTER).data)
    assert published["orphans"] == [3] and "high_water" not in published
    assert _rewritten(store, POINTER) == store.get(POINTER).data

    assert rollback_page(store, "en-US", "top", 1, now=T0 + timedelta(minutes=3)).published
    rolled = json.loads(store.get(POINTER).data)
    assert (rolled["version"], rolled["high_water"], rolled["rolled_back_from"], rolled["orphans"]) == (1, 4, 4, [3])
    assert _rewritten(store, POINTER) == store.get(POINTER).data

    store.put(POINTER, b"not a pointer")
    assert repoint_to_newest_valid(store, POINTER, now=T0 + timedelta(minutes=4)).published  # type: ignore[union-attr]
    repointed = json.loads(store.get(POINTER).data)
    assert (repointed["version"], repointed["high_water"]) == (4, 4) and "rolled_back_from" not in repointed
    assert _rewritten(store, POINTER) == store.get(POINTER).data


def test_the_search_pointer_carries_what_the_index_holds(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    card: SearchCardJson = {"story_id": "s1", "title": "Sea walls", "has_coverage": True}
    docs = [SearchDocument("s1", "en", "2026-01-01T11:00:00Z", "Sea walls", (), "", (("harbor", "Harbor Times"),),
                           (), ("world",), ("en-US",), card)]
    data = build_search_index(docs, {"as_of": "2026-01-01T12:00:00Z"})
    result = publish_search_index(store, lambda: data, digest="d1", as_of="2026-01-01T12:00:00Z", documents=1,
                                  now=T0, validate=lambda _: None)
    assert result.published
    raw = json.loads(store.get(layout.search_index_pointer_key()).data)
    assert sorted(raw) == ["as_of", "digest", "documents", "key", "published_at", "sha256", "version"]
    assert _rewritten(store, layout.search_index_pointer_key()) == store.get(layout.search_index_pointer_key()).data


@pytest.mark.parametrize("raw", [
    b'{"version": 1, "key": "pages/en-US/top/v1.json", "sha256": "x"}',
    b'{"version": [1], "key": "pages/en-US/top/v1.json", "sha256": "x", "published_at": "t"}',
    b'{"version": 1, "key": "pages/en-US/top/v1.json", "sha256": "x", "published_at": "t", "orphans": 5}',
    b'{"version": 2, "key": "pages/en-US/world/v2.json", "sha256": "x", "published_at": "t"}',
    b'[1, 2]',
], ids=["no-time", "version-not-a-number", "orphans-not-a-list", "another-page", "not-an-object"])
def test_an_unreadable_pointer_is_refused(raw: bytes) -> None:
    with pytest.raises(SnapshotNotFoundError):
        pointer_from_bytes(raw, POINTER)


def test_old_pointers_with_numbers_as_strings_still_read() -> None:
    pointer = pointer_from_bytes(b'{"version": "2", "key": "pages/en-US/top/v2.json", "sha256": "x", '
                                 b'"published_at": "t", "high_water": "5", "orphans": ["4", 3]}', POINTER)
    assert (pointer.version, pointer.high_water, pointer.orphans) == (2, 5, (3, 4))
