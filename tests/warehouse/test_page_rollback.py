"""Rollback moves a page pointer back with a conditional put; version numbers are never reused."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from warehouse.errors import SnapshotNotFoundError
from warehouse.snapshots import list_live_pages, publish_page, read_live_page, read_pointer, rollback_page
from warehouse.store import ObjectStore

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _payload(n: int) -> dict[str, object]:
    return {"schema": "newsroom.page/1", "edition": "en-US", "section": "top", "as_of": "x",
            "stories": [{"story_id": f"s{i}"} for i in range(n)]}


def test_rollback_then_publish_takes_a_new_number(store: ObjectStore) -> None:
    for n in (3, 4, 5):
        assert publish_page(store, "en-US", "top", _payload(n), now=NOW, validate=lambda new, prev: None).published
    assert rollback_page(store, "en-US", "top", 1, now=NOW).published
    live = read_live_page(store, "en-US", "top")
    assert live.pointer.version == 1 and b'"s2"' in live.data and b'"s3"' not in live.data
    assert not rollback_page(store, "en-US", "top", 1, now=NOW).published  # already live
    assert rollback_page(store, "en-US", "top", 2, now=NOW).published  # forward again undoes a rollback
    result = publish_page(store, "en-US", "top", _payload(6), now=NOW, validate=lambda new, prev: None)
    assert result.published and result.version == 4
    with pytest.raises(SnapshotNotFoundError):
        rollback_page(store, "en-US", "top", 9, now=NOW)


def test_the_pool_is_not_a_live_page(store: ObjectStore) -> None:
    publish_page(store, "en-US", "top", _payload(2), now=NOW, validate=lambda new, prev: None)
    publish_page(store, "en-US", "pool", _payload(2), now=NOW, validate=lambda new, prev: None)
    assert list_live_pages(store) == [("en-US", "top")]
    assert read_pointer(store, "en-US", "pool") is not None
