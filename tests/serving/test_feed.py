"""For you paging (serving/feed.py, serving/cursors.py): neither skips nor repeats while the profile
changes, and damaged or hostile cursors are refused (the serving review's D7). Since issue 29: a
section filter, the answer served as built bytes, and card links signed once per pool version.
"""

from __future__ import annotations

import base64
import json
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    FIRST_ARTICLE,
    SPORTS_STORY,
    publish_fixture,
    settings_for,
    sign_in,
    signer,
)
from fastapi.testclient import TestClient

from serving.app import create_app
from serving.cursors import decode_feed_cursor, encode_cursor
from serving.errors import BadCursorError
from serving.models import FeedPublic
from serving.profiles import SqliteProfileStore
from warehouse.store import ObjectStore

# -- D7: For-you paging while the profile changes ------------------------------------------------


def _page(client: TestClient, headers: dict[str, str], cursor: str | None) -> tuple[list[str], str | None]:
    params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
    body = client.get("/v1/feed", params=params, headers=headers).json()
    return [s["story_id"] for s in body["stories"]], body["next_cursor"]


def _page_through_with(client: TestClient, alice: dict[str, str], change: str) -> list[str]:
    first, cursor = _page(client, alice, None)
    if change == "follow":  # promotes the fourth story to the top of the ranking
        assert client.put("/v1/me/follows/topic/sports", headers=alice).status_code == 200
    else:  # reads the first story shown, as the reader page does: it leaves the ranking
        minted = client.post("/v1/click-token", headers=alice, json={"article_id": FIRST_ARTICLE, "surface": "for_you"})
        assert client.get(minted.json()["click_url"], follow_redirects=False).status_code == 302
    seen = list(first)
    while cursor:
        ids, cursor = _page(client, alice, cursor)
        seen += ids
    return seen


@pytest.mark.parametrize("change", ["follow", "read"])
def test_for_you_paging_neither_skips_nor_repeats_when_the_profile_changes(client: TestClient, change: str) -> None:
    alice = sign_in(client, "alice")
    if change == "read":
        client.put("/v1/me/follows/topic/world", headers=alice)  # a ranked (for_you) feed from the start
    everything = [s["story_id"] for s in client.get("/v1/feed?limit=50", headers=alice).json()["stories"]]
    seen = _page_through_with(client, alice, change)
    assert len(seen) == len(set(seen))
    assert sorted(seen) == sorted(everything)
    if change == "follow":
        assert seen[2] == SPORTS_STORY  # the promoted story comes next, instead of being skipped


def test_a_feed_cursor_from_before_shown_sets_still_pages_by_offset(client: TestClient) -> None:
    alice = sign_in(client, "alice")
    everything = [s["story_id"] for s in client.get("/v1/feed?limit=50", headers=alice).json()["stories"]]
    pool_key = client.app.state.pools.pool("en-US").key  # type: ignore[attr-defined]
    legacy = encode_cursor("feed:en-US:2", pool_key, 2)
    ids, _ = _page(client, alice, legacy)
    assert ids == everything[2:4]


@pytest.mark.parametrize(
    "cursor",
    [base64.urlsafe_b64encode(json.dumps(["feed:en-US:2", "k", 2, "!!"]).encode()).decode(),
     base64.urlsafe_b64encode(json.dumps(["feed:en-US:2", "k", 2, "eJzLSM3JyVcozy/KSQEAGgQEXQ"]).encode()).decode(),
     base64.urlsafe_b64encode(json.dumps(["feed:en-US:2", "k", 2, 7]).encode()).decode()],
    ids=["not-base64", "not-a-bitmap-of-this-pool", "not-a-string"],
)
def test_damaged_feed_cursors_are_400_or_410(client: TestClient, cursor: str) -> None:
    response = client.get("/v1/feed", params={"cursor": cursor, "limit": 2}, headers=sign_in(client, "alice"))
    assert response.status_code in (400, 410)


def _feed_cursor(*fields: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(fields)).encode()).rstrip(b"=").decode()


def test_a_deeply_nested_cursor_is_400_not_a_crash(client: TestClient) -> None:
    nested = base64.urlsafe_b64encode(b"[" * 3000).rstrip(b"=").decode()  # json.loads: RecursionError
    assert len(nested) <= 4096
    response = client.get("/v1/feed", params={"cursor": nested, "limit": 2}, headers=sign_in(client, "alice"))
    assert response.status_code == 400, response.text


def test_a_shown_set_bomb_is_refused_before_it_is_inflated(client: TestClient) -> None:
    # 64 KiB of set bits compress to ~100 bytes: a tiny cursor, half a million positions.
    bomb = base64.urlsafe_b64encode(zlib.compress(b"\xff" * 65536, 9)).rstrip(b"=").decode()
    cursor = _feed_cursor("feed:en-US:2", "k", 2, bomb)
    assert len(cursor) < 300
    with pytest.raises(BadCursorError):
        decode_feed_cursor(cursor, "feed:en-US:2")
    response = client.get("/v1/feed", params={"cursor": cursor, "limit": 2}, headers=sign_in(client, "alice"))
    assert response.status_code == 400, response.text


# -- issue 29: a section filter, the answer as bytes, click links signed once per pool version -------


def _all_pages(client: TestClient, headers: dict[str, str], **params: str) -> list[dict[str, Any]]:
    pages, cursor = [], None
    while True:
        query = {"limit": "1", **params, **({"cursor": cursor} if cursor else {})}
        response = client.get("/v1/feed", params=query, headers=headers)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        cursor = pages[-1]["next_cursor"]
        if cursor is None:
            return pages


@pytest.mark.parametrize("follows", [False, True], ids=["no-profile", "for-you"])
def test_a_section_filter_ranks_that_sections_stories_and_pages_them_once(client: TestClient, follows: bool) -> None:
    alice = sign_in(client, "alice")
    if follows:
        assert client.put("/v1/me/follows/topic/business", headers=alice).status_code == 200
        assert client.post("/v1/me/hide", json={"source": "metro-business"}, headers=alice).status_code == 200
    everything = client.get("/v1/feed?limit=50", headers=alice).json()
    world = [s["story_id"] for s in everything["stories"] if "world" in s["sections"]]
    pages = _all_pages(client, alice, section="world")
    assert [s["story_id"] for p in pages for s in p["stories"]] == world  # same order, nothing repeated
    business = client.get("/v1/feed", params={"section": "business"}, headers=alice).json()
    assert [s["story_id"] for s in business["stories"]] == ["0196f1c2a3b40002"]
    if follows:
        card = business["stories"][0]
        assert card["reason"] == "Because you follow Business"
        assert "metro-business" not in {src["publisher_id"] for src in card["sources"]}  # a blocked source
    none = client.get("/v1/feed", params={"section": "no-such-section"}, headers=alice)
    assert none.status_code == 200 and none.json()["stories"] == [] and none.json()["next_cursor"] is None


def test_a_cursor_pages_only_the_list_it_was_made_for(client: TestClient) -> None:
    alice = sign_in(client, "alice")
    cursor = client.get("/v1/feed", params={"limit": 1}, headers=alice).json()["next_cursor"]
    assert cursor
    assert client.get("/v1/feed", params={"limit": 1, "section": "world", "cursor": cursor},
                      headers=alice).status_code == 400


@pytest.mark.parametrize("setup", ["top-stories", "follows-and-hides", "second-page", "section", "fallback"])
def test_the_answer_bytes_are_the_feed_model(local_store: ObjectStore, tmp_path: Path, setup: str) -> None:
    """Served as built, never re-validated: the bytes must be what FeedPublic says, and nothing else."""
    profiles = SqliteProfileStore(tmp_path / "p.sqlite3")
    with TestClient(create_app(local_store, settings_for(tmp_path), profiles=profiles)) as client:
        alice = sign_in(client, "alice")
        params: dict[str, str | int] = {"limit": 2}
        if setup != "top-stories":
            client.put("/v1/me/follows/topic/sports", headers=alice)
            client.post("/v1/me/hide", json={"source": "harbor-times"}, headers=alice)
        if setup == "second-page":
            params["cursor"] = client.get("/v1/feed", params=params, headers=alice).json()["next_cursor"]
        if setup == "section":
            params["section"] = "world"
        if setup == "fallback":
            profiles.close()
        response = client.get("/v1/feed", params=params, headers=alice)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["cache-control"] == "private"
    body = response.content
    model = FeedPublic.model_validate_json(body)
    assert json.loads(body) == model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert body == json.dumps(json.loads(body), ensure_ascii=False, separators=(",", ":")).encode()  # compact JSON
    assert model.stories, setup


def test_card_links_are_signed_once_per_pool_version_and_name_no_reader(
    client: TestClient, local_store: ObjectStore
) -> None:
    alice, bob = sign_in(client, "alice"), sign_in(client, "bob")
    client.put("/v1/me/follows/topic/sports", headers=bob)  # another order: the link is the story's, not the list's

    def links(headers: dict[str, str]) -> dict[str, str]:
        feed = client.get("/v1/feed?limit=50", headers=headers).json()
        return {src["article_id"]: src["click_url"] for s in feed["stories"] for src in s["sources"]}

    first = links(alice)
    assert links(bob) == first == links(alice)
    pool = client.app.state.pools.pool("en-US")  # type: ignore[attr-defined]
    for article_id, url in first.items():
        click = signer().verify_click(url.removeprefix("/r/"))
        assert click.reader_hash == "" and click.surface == "for_you" and click.article_id == article_id
        assert pool.candidates.candidates[click.position].story_id == click.story_id  # its place in the pool

    later = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=5)
    publish_fixture(local_store, now=later)  # a new version of every page: a new pool, new links
    client.app.state.cache.refresh()  # type: ignore[attr-defined]
    assert set(links(alice).values()).isdisjoint(first.values())


# -- keyword follows (issue 30) ----------------------------------------------------------------------


def test_a_followed_keyword_lifts_its_stories_and_names_itself(client: TestClient) -> None:
    alice = sign_in(client, "alice")
    before = client.get("/v1/feed", headers=alice).json()
    assert before["mode"] == "top_stories"
    # "penalty shoot-out" is in the fourth story's headline, "disclosure" in another source's headline of the fifth.
    for query in ('"penalty shoot-out"', "security disclosure"):
        assert client.post("/v1/me/keywords", json={"query": query}, headers=alice).status_code == 200
    after = client.get("/v1/feed", headers=alice).json()
    assert after["mode"] == "for_you"
    reasons = {s["story_id"]: s["reason"] for s in after["stories"]}
    assert reasons[SPORTS_STORY] == "Because you follow \u201c\"penalty shoot out\"\u201d"
    assert reasons["0196f1c2a3b40005"] == "Because you follow \u201csecurity disclosure\u201d"
    order = [s["story_id"] for s in after["stories"]]
    assert order.index(SPORTS_STORY) < [s["story_id"] for s in before["stories"]].index(SPORTS_STORY)
    assert client.get("/v1/me", headers=alice).json()["follows"]["keyword"] == ['"penalty shoot out"',
                                                                               "security disclosure"]


def test_a_keyword_that_cannot_be_followed_is_refused_and_their_number_is_capped(client: TestClient) -> None:
    alice = sign_in(client, "alice")
    bad = client.post("/v1/me/keywords", json={"query": '"unclosed'}, headers=alice)
    assert bad.status_code == 400 and bad.json()["detail"] == "invalid query: a quote is not closed"
    for i in range(20):
        assert client.post("/v1/me/keywords", json={"query": f"word{i}"}, headers=alice).status_code == 200
    over = client.post("/v1/me/keywords", json={"query": "one more"}, headers=alice)
    assert over.status_code == 409 and "20 keywords" in over.json()["detail"]
    assert client.post("/v1/me/keywords", json={"query": "WORD3"}, headers=alice).status_code == 200  # followed already
    assert len(client.get("/v1/me", headers=alice).json()["follows"]["keyword"]) == 20
    assert client.delete("/v1/me/keywords", params={"q": "word3"}, headers=alice).json()["follows"]["keyword"].count(
        "word3") == 0
