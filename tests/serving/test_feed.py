"""For you paging (serving/feed.py, serving/cursors.py): neither skips nor repeats while the profile
changes, and damaged or hostile cursors are refused (the serving review's D7).
"""

from __future__ import annotations

import base64
import json
import zlib

import pytest
from conftest import (
    FIRST_ARTICLE,
    SPORTS_STORY,
    sign_in,
)
from fastapi.testclient import TestClient

from serving.cursors import decode_feed_cursor, encode_cursor
from serving.errors import BadCursorError

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
