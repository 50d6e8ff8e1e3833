"""What a replica serves over a damaged store (issue 32): every page is the newest version that
passes its pointer's checks (sha256, parses, its own edition and section), every story a served
page lists opens, and ``/healthz`` names every version it passed over and why.

Two cycles are published with the real warehouse write side: version 1 of four pages and of the
story snapshot, then version 2 of both top pages and of the snapshot, with a new story on both top
pages. Each test damages one object the way the store-fault rules name (docs/store-faults.md) and
starts a fresh replica over it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import accept, make_stories, page_payload, publish_fixture, settings_for, stories_payload
from fastapi.testclient import TestClient

from serving.app import create_app
from serving.cache import SnapshotCache
from warehouse import layout
from warehouse.snapshots import publish_page, publish_stories, read_pointer, repoint_to_newest_valid
from warehouse.store import LocalStore, ObjectStore

T1 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
T2 = T1 + timedelta(minutes=1)
NEW_STORY = "0196f1c2a3b40006"
"""On both top pages from version 2 on; only story snapshot version 2 holds it."""
SHA = "version bytes do not match the pointer's sha256"
MISSING = "pointer names a missing version"
LATEST = {("en-US", "top"): 2, ("en-GB", "top"): 2, ("en-US", "world"): 1, ("en-US", "business"): 1}


def _new_story(now: datetime) -> dict[str, Any]:
    story = copy.deepcopy(make_stories(now)[1])
    story["story_id"] = NEW_STORY
    story["title"] = "Ferry operators add night crossings after the bridge closes for repairs"
    for i, source in enumerate(story["sources"]):
        source["article_id"] = f"{NEW_STORY}-a{i}"
    return story


def publish_two_cycles(store: ObjectStore) -> None:
    publish_fixture(store, T1)
    stories = make_stories(T2)
    new = _new_story(T2)
    for edition, listed in (("en-US", [new, *stories]), ("en-GB", [new, *reversed(stories[:3])])):
        assert publish_page(store, edition, "top", page_payload(edition, "top", listed, T2), now=T2,
                            validate=accept).published
    snapshot = stories_payload([new, *stories], ["en-GB", "en-US"], T2, {})
    assert publish_stories(store, snapshot, now=T2, validate=accept).version == 2


def _put_pointer(store: ObjectStore, pointer_key: str, **fields: Any) -> None:
    pointer = json.loads(store.get(pointer_key).data)
    pointer.update(fields)
    store.put(pointer_key, json.dumps(pointer).encode())


def edit_page_bytes(store: ObjectStore) -> None:
    """Valid JSON, the right page, other bytes than published: a hand edit or a bad restore."""
    key = layout.page_version_key("en-US", "top", 2)
    page = json.loads(store.get(key).data)
    page["stories"][0]["title"] = "Edited after publishing"
    store.put(key, json.dumps(page).encode())


def replace_page_with_a_stub(store: ObjectStore) -> None:
    store.put(layout.page_version_key("en-US", "top", 2), b'{"version": 2}')


def rewrite_page_and_sha(store: ObjectStore) -> None:
    """Another page's bytes under en-US/top, and the pointer's sha256 made to match them."""
    data = store.get(layout.page_version_key("en-GB", "top", 2)).data
    store.put(layout.page_version_key("en-US", "top", 2), data)
    _put_pointer(store, layout.page_pointer_key("en-US", "top"), sha256=hashlib.sha256(data).hexdigest())


def delete_live_page(store: ObjectStore) -> None:
    store.delete(layout.page_version_key("en-US", "top", 2))


def garble_pointer(store: ObjectStore) -> None:
    store.put(layout.page_pointer_key("en-US", "top"), b'{"version": 2, "key": "pages/en-US/top/v2.js')


def point_at_another_page(store: ObjectStore) -> None:
    """A pointer naming en-GB's live version, with that version's sha256."""
    other = read_pointer(store, "en-GB", "top")
    assert other is not None
    _put_pointer(store, layout.page_pointer_key("en-US", "top"), key=other.key, sha256=other.sha256)


def delete_story_snapshot(store: ObjectStore) -> None:
    store.delete(layout.story_snapshot_key(2))


def repair_torn_story_snapshot(store: ObjectStore) -> None:
    """What ``newsroom doctor --repair`` does to a torn live story snapshot: the pointer goes back
    to version 1 (which lacks the new story both live top pages list), the torn one is moved away."""
    key = layout.story_snapshot_key(2)
    store.put(key, store.get(key).data[:100])
    moved = repoint_to_newest_valid(store, layout.story_snapshot_pointer_key(), now=T2)
    assert moved is not None and moved.version == 1
    store.delete(key)


def _page(what: str, problem: str, version: int | None, *skipped: tuple[int, str]) -> dict[str, Any]:
    return {"what": what, "problem": problem, "serving_version": version,
            "skipped": [{"version": v, "problem": p} for v, p in skipped]}


FROM_CARDS = "in no valid story snapshot; answered from the cards of en-GB/top, en-US/top"
CASES: dict[str, tuple[Callable[[ObjectStore], None], dict[tuple[str, str], int], list[dict[str, Any]]]] = {
    "page-bytes-edited": (edit_page_bytes, {("en-US", "top"): 1},
                          [_page("en-US/top", SHA, 1, (2, SHA))]),
    "page-replaced-by-a-stub": (replace_page_with_a_stub, {("en-US", "top"): 1},
                                [_page("en-US/top", SHA, 1, (2, SHA))]),
    "page-and-sha-rewritten": (rewrite_page_and_sha, {("en-US", "top"): 1}, [
        _page("en-US/top", "a version of 'en-GB'/'top', not of en-US/top", 1,
              (2, "a version of 'en-GB'/'top', not of en-US/top"))]),
    "live-page-deleted": (delete_live_page, {("en-US", "top"): 1}, [_page("en-US/top", MISSING, 1, (2, MISSING))]),
    "pointer-garbled": (garble_pointer, {}, [_page("en-US/top", "unreadable pointer", 2)]),
    "pointer-names-another-page": (point_at_another_page, {}, [
        _page("en-US/top", "unreadable pointer: it names no version of its own page", 2)]),
    "story-snapshot-deleted": (delete_story_snapshot, {}, [
        _page("stories", MISSING, 1, (2, MISSING)), _page(f"stories/{NEW_STORY}", FROM_CARDS, None)]),
    "story-snapshot-rolled-back-by-the-doctor": (repair_torn_story_snapshot, {}, [
        _page(f"stories/{NEW_STORY}", FROM_CARDS, None)]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_replica_serves_the_newest_valid_version_and_every_story_its_pages_list(case: str, tmp_path: Path) -> None:
    damage, older, expected_degraded = CASES[case]
    store = LocalStore(tmp_path / "store")
    publish_two_cycles(store)
    damage(store)

    with TestClient(create_app(store, settings_for(tmp_path))) as client:
        listing = {(e["edition"], s) for e in client.get("/v1/editions").json() for s in e["sections"]}
        assert listing == set(LATEST)
        for (edition, section), latest in LATEST.items():
            page = client.get(f"/v1/editions/{edition}/{section}")
            assert page.status_code == 200, (edition, section)
            served = page.json()
            assert (served["edition"], served["section"]) == (edition, section)
            assert served["version"] == older.get((edition, section), latest), (edition, section)
            assert "Edited" not in page.text
            version = store.get(layout.page_version_key(edition, section, served["version"])).data
            assert page.content == version  # the published bytes, never a changed copy
            for story in served["stories"]:
                answer = client.get(f"/v1/stories/{story['story_id']}", follow_redirects=False)
                assert answer.status_code in (200, 301), (edition, section, story["story_id"])
        health = client.get("/healthz")
        assert health.status_code == 200
        assert health.json()["status"] == "degraded"
        assert sorted(health.json()["degraded"], key=lambda d: d["what"]) == \
            sorted(expected_degraded, key=lambda d: d["what"])


def test_a_story_missing_from_the_live_snapshot_is_answered_from_an_older_one(tmp_path: Path) -> None:
    """The live story snapshot is valid but lacks a story a live page lists (a page rolled back, or
    a snapshot published without it): the newest older valid snapshot holding it answers, named."""
    store = LocalStore(tmp_path / "store")
    publish_two_cycles(store)
    stories = make_stories(T2 + timedelta(minutes=1))
    kept = [_new_story(T2), *stories[:2], *stories[3:]]  # without story 3, which en-GB/top v2 lists
    later = T2 + timedelta(minutes=1)
    assert publish_stories(store, stories_payload(kept, ["en-US"], later, {}), now=later, validate=accept).version == 3
    store.put(layout.story_snapshot_key(2), b"{}")  # the newest older one holding it is damaged too

    with TestClient(create_app(store, settings_for(tmp_path))) as client:
        story = client.get(f"/v1/stories/{make_stories(T1)[2]['story_id']}")
        assert story.status_code == 200
        assert story.json()["title"] == make_stories(T1)[2]["title"]
        assert client.get("/v1/editions/en-GB/top").json()["version"] == 2  # the page stays: its story opens
        health = client.get("/healthz").json()
        assert health["status"] == "degraded" and health["stories_version"] == 3
        assert sorted(health["degraded"], key=lambda d: d["what"]) == [
            _page("stories", "older versions passed over looking for stories the pages list", 3,
                  (2, "names version None, not 2")),
            _page(f"stories/{make_stories(T1)[2]['story_id']}",
                  "not in the story snapshot served; answered from an older valid version", 1),
        ]


def test_a_story_no_valid_snapshot_holds_is_answered_from_the_cards_listing_it(tmp_path: Path) -> None:
    """The live pages stay (the newest valid versions); the story only the lost snapshot held opens
    with the articles its cards show, marked partial, and ``/healthz`` is never ``ok`` meanwhile."""
    store = LocalStore(tmp_path / "store")
    publish_two_cycles(store)
    delete_story_snapshot(store)

    with TestClient(create_app(store, settings_for(tmp_path))) as client:
        assert client.get("/v1/editions/en-US/top").json()["version"] == 2
        story = client.get(f"/v1/stories/{NEW_STORY}")
        assert story.status_code == 200
        body = story.json()
        card = _new_story(T2)
        assert body["is_partial"] is True and body["title"] == card["title"]
        assert [s["article_id"] for s in body["sources"]] == \
            [s["article_id"] for s in sorted(card["sources"], key=lambda s: (s["first_seen_at"], s["article_id"]))]
        assert body["editions"] == ["en-GB", "en-US"] and "rank" not in body and "score" not in body
        assert client.get(f"/v1/stories/{make_stories(T1)[0]['story_id']}").json().get("is_partial") is None
        article = card["sources"][0]["article_id"]
        token = client.post("/v1/click-token", json={"article_id": article})
        assert token.status_code == 200, token.text  # its articles are live: a reader may click them
        assert client.get("/healthz").json()["status"] == "degraded"


def test_a_running_replica_keeps_its_checked_version_and_looks_again_when_the_pointer_moves(
        tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    publish_two_cycles(store)
    with TestClient(create_app(store, settings_for(tmp_path))) as client:
        cache = client.app.state.cache  # type: ignore[attr-defined]
        delete_live_page(store)  # the replica holds the bytes it checked: it goes on serving them
        cache.refresh()
        assert client.get("/v1/editions/en-US/top").json()["version"] == 2
        assert client.get("/healthz").json()["status"] == "ok"
        later = T2 + timedelta(minutes=2)  # a publish moves the pointer to v3, which is then torn
        assert publish_page(store, "en-US", "top", page_payload("en-US", "top", make_stories(later), later),
                            now=later, validate=accept).version == 3
        key = layout.page_version_key("en-US", "top", 3)
        store.put(key, store.get(key).data[:200])
        cache.refresh()
        # v2, gone from the store, passed its checks when loaded: it stands in rather than v1
        assert client.get("/v1/editions/en-US/top").json()["version"] == 2
        assert _page("en-US/top", SHA, 2, (3, SHA)) in client.get("/healthz").json()["degraded"]
        fresh = SnapshotCache(store)  # a replica started now has only v1 to stand in
        fresh.refresh()
        assert fresh.page("en-US", "top").version == 1
