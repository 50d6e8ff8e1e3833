"""Rank & publish builds the search index of the live window once per published version (issue 30),
and writes Breaking news as live events keyed by time.

Real LocalStore, DuckDB and tantivy over a synthetic world (tests/rank_world.py), no mocks.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from rank_world import quiet_world

from tasks.live import record_live_breaking
from tasks.rank.publish import publish_all
from tasks.settings import RankSettings
from warehouse import layout
from warehouse.search_index import SearchIndex, parse_query
from warehouse.search_versions import read_search_pointer
from warehouse.snapshots import read_live_stories
from warehouse.store import LocalStore

# Short pages, so most active stories are listed on none and the index must still hold them.
SETTINGS = RankSettings(top_stories=4, section_stories=3, min_section_stories=3)


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


def _index(store: LocalStore, tmp_path: Path) -> SearchIndex:
    found = read_search_pointer(store)
    assert found is not None
    return SearchIndex.from_bytes(store.get(found[0].key).data, str(tmp_path))


def test_the_index_holds_every_active_story_listed_or_not(store: LocalStore, tmp_path: Path) -> None:
    _world, ids, now = quiet_world(store, stories=40)
    summary = publish_all(store, now, SETTINGS)
    assert summary["search"]["published"] and summary["search"]["documents"] == 40, summary["search"]
    index = _index(store, tmp_path)
    listed = set(json.loads(read_live_stories(store).data)["stories"])
    assert 0 < len(listed) < 40
    for sid in ids:
        hits = index.search(parse_query(sid), limit=3).hits
        assert hits and hits[0].story_id == sid, sid  # each found by its own headline's first word
        assert hits[0].card["has_coverage"] is (sid in listed)  # Full Coverage opens for listed ones only
        assert hits[0].card["sources"], sid
    pointer, raw = read_search_pointer(store) or (None, {})
    assert pointer is not None and raw["as_of"] == now.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_an_unchanged_window_builds_nothing_and_old_stories_leave(store: LocalStore, tmp_path: Path) -> None:
    _world, ids, now = quiet_world(store, stories=12)
    first = publish_all(store, now, SETTINGS)["search"]
    again = publish_all(store, now, SETTINGS)["search"]
    assert first["published"] and not again["published"] and again["reason"] == "unchanged"
    assert store.list("pages/search/") == ["pages/search/latest.json", "pages/search/v1.tar"]
    later = now + timedelta(hours=SETTINGS.active_hours + 1)  # every story went quiet for longer than the window
    publish_all(store, later, SETTINGS)
    pointer, raw = read_search_pointer(store) or (None, {})
    assert pointer is not None and raw["documents"] < 12
    assert _index(store, tmp_path).search(parse_query(ids[0])).total == 0


def test_a_new_breaking_story_is_a_live_event_once(store: LocalStore) -> None:
    _world, ids, now = quiet_world(store, stories=3)
    breaking = [{"story_id": ids[0], "breaking_since": "2026-12-01T09:55:00Z", "editions": ["en-US"],
                 "publisher_ids": ["pub01"]}]
    stories = {ids[0]: {"title": "A headline", "language": "en"}}
    assert record_live_breaking(store, breaking, now, stories) == [ids[0]]
    assert record_live_breaking(store, breaking, now, stories) == [ids[0]]  # a rerun: the same key, kept
    keys = store.list(layout.LIVE_EVENTS_PREFIX)
    assert keys == [layout.live_event_key(now, "story.breaking", ids[0])]
    event = json.loads(store.get(keys[0]).data)
    assert event["title"] == "A headline" and event["editions"] == ["en-US"]
    store.put(layout.event_key("story.breaking", ids[0]), b"{}")  # what record_breaking writes next
    assert record_live_breaking(store, breaking, now + timedelta(minutes=1), stories) == []
    assert len(store.list(layout.LIVE_EVENTS_PREFIX)) == 1
