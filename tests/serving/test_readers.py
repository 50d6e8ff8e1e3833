"""Readers: top per locale, topics, versions, sessions, follows/hides, For you, signed clicks."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest
from conftest import HMAC_KEY, flush_clicks, settings_for
from fastapi.testclient import TestClient

from serving.app import create_app
from serving.profiles import SqliteProfileStore
from warehouse import layout
from warehouse.schemas import CLICKS_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import list_segments, read_segments

SHARED = "public, s-maxage=60, stale-while-revalidate=60, stale-if-error=3600"
TECH_STORY = "0196f1c2a3b40005"


def sign_in(client: TestClient, reader: str) -> dict[str, str]:
    response = client.post("/v1/session", json={"reader": reader})
    assert response.status_code == 200
    assert response.headers["cache-control"] == "private"
    return {"Authorization": f"Bearer {response.json()['token']}"}


# -- shared endpoints ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("locale", "edition"),
    [("en-US", "en-US"), ("en-us", "en-US"), ("en-GB", "en-GB"), ("en-AU", "en-GB"), ("fr-FR", "en-GB")],
    ids=["exact", "case", "other-edition", "same-language", "fallback"],
)
def test_top_for_a_locale_is_that_editions_front_page(client: TestClient, locale: str, edition: str) -> None:
    top = client.get("/v1/top", params={"locale": locale})
    page = client.get(f"/v1/editions/{edition}/top")
    assert top.status_code == 200
    assert top.content == page.content
    assert top.headers["cache-control"] == SHARED
    assert top.headers["etag"] == page.headers["etag"]


def test_topic_pages_page_without_reshuffling_and_expire_with_the_snapshot(
    client: TestClient, local_store: ObjectStore
) -> None:
    first = client.get("/v1/topics/world", params={"limit": 1})
    assert first.status_code == 200
    assert first.headers["cache-control"] == SHARED
    body = first.json()
    assert [s["story_id"] for s in body["stories"]] == ["0196f1c2a3b40001"]
    assert body["next_cursor"] is None
    assert client.get("/v1/topics/world", headers={"If-None-Match": first.headers["etag"]}).status_code == 304

    everything = client.get("/v1/topics/world", params={"limit": 50}).json()
    assert everything["label"] == "World"
    assert client.get("/v1/topics/no-such-topic").status_code == 404

    # Paging: two stories about "en" do not exist, so use the edition filter on a section with one.
    paged = client.get("/v1/topics/business", params={"limit": 1, "edition": "en-US"}).json()
    assert paged["stories"][0]["story_id"] == "0196f1c2a3b40002"
    assert client.get("/v1/topics/business", params={"cursor": "garbage"}).status_code == 400


def test_topic_cursor_pins_the_snapshot_version(client: TestClient, local_store: ObjectStore) -> None:
    from conftest import accept, stories_payload

    from warehouse.snapshots import publish_stories

    cache = client.app.state.cache  # type: ignore[attr-defined]
    # Make "world" span two pages by tagging a second story with it in a new snapshot version.
    stories = [dict(s) for s in cache.parsed_stories().values()]
    stories[1] = dict(stories[1], sections=["world", "business"])
    result = publish_stories(local_store, stories_payload(stories, ["en-US"], _now(), {}), now=_now(), validate=accept)
    assert result.published
    cache.refresh()
    page1 = client.get("/v1/topics/world", params={"limit": 1}).json()
    assert page1["next_cursor"]
    page2 = client.get("/v1/topics/world", params={"limit": 1, "cursor": page1["next_cursor"]}).json()
    assert {s["story_id"] for s in page1["stories"]} | {s["story_id"] for s in page2["stories"]} == {
        "0196f1c2a3b40001", "0196f1c2a3b40002"}
    result = publish_stories(local_store, stories_payload(stories[:3], ["en-US"], _now(), {}), now=_now(), validate=accept)
    cache.refresh()
    gone = client.get("/v1/topics/world", params={"limit": 1, "cursor": page1["next_cursor"]})
    assert gone.status_code == 410


def _now():  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    return datetime.now(UTC).replace(microsecond=0)


def test_version_endpoint_names_the_live_version(client: TestClient) -> None:
    response = client.get("/v1/editions/en-US/top/version")
    assert response.status_code == 200
    assert response.headers["cache-control"] == SHARED
    assert response.json()["version"] == 1
    assert client.get("/v1/editions/xx-XX/top/version").status_code == 404


def test_full_coverage_has_timeline_publishers_local_sources_opinion_and_links(client: TestClient) -> None:
    story = client.get("/v1/stories/0196f1c2a3b40001").json()
    assert [s["first_seen_at"] for s in story["timeline"]] == sorted(s["first_seen_at"] for s in story["timeline"])
    assert {p["publisher_id"] for p in story["publishers"]} == {s["publisher_id"] for s in story["sources"]}
    assert story["local_sources"]["en-GB"] == [
        s["article_id"] for s in story["sources"] if s["region"] == "GB"
    ]
    assert story["opinion_count"] == 1
    assert story["linked"] == []
    assert client.get("/v1/stories/0196f1c2a3b40003").json()["linked"] == [
        {"story_id": "0196f1c2a3b4f003", "language": "de", "title": "Bahnstreik beendet"}
    ]


def test_two_readers_get_byte_identical_shared_pages(client: TestClient) -> None:
    alice, bob = sign_in(client, "alice"), sign_in(client, "bob")
    client.put("/v1/me/follows/topic/technology", headers=alice)
    client.post("/v1/me/hide", json={"source": "valley-post"}, headers=bob)
    paths = ["/v1/editions", "/v1/editions/en-US/top", "/v1/editions/en-GB/top", "/v1/top?locale=en-US",
             "/v1/stories/0196f1c2a3b40001", "/v1/topics/world", "/v1/editions/en-US/world/version"]
    for path in paths:
        a = client.get(path, headers={**alice, "Cookie": "session=alice"})
        b = client.get(path, headers={**bob, "Cookie": "session=bob"})
        anonymous = client.get(path)
        assert a.status_code == 200, path
        assert a.content == b.content == anonymous.content, path
        assert a.headers["etag"] == b.headers["etag"], path
        assert a.headers["cache-control"] == SHARED, path
        # never varies on who asks (Cookie, Authorization); a page varies on Accept-Encoding only (#20)
        assert "set-cookie" not in a.headers and a.headers.get("vary") in (None, "Accept-Encoding"), path
        assert b"alice" not in a.content and b"bob" not in b.content


# -- personal endpoints -------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/feed"), ("GET", "/v1/me"),
                                            ("PUT", "/v1/me/follows/topic/world")], ids=["feed", "me", "follow"])
def test_personal_endpoints_need_a_session(client: TestClient, method: str, path: str) -> None:
    response = client.request(method, path)
    assert response.status_code == 401
    assert response.headers["cache-control"] == "private"


def test_a_forged_session_is_no_session(client: TestClient) -> None:
    forged = {"Authorization": "Bearer " + base64.urlsafe_b64encode(b'[1,"alice",9999999999]' + b"x" * 32).decode()}
    assert client.get("/v1/me", headers=forged).status_code == 401


def test_for_you_without_a_profile_is_the_top_stories(client: TestClient) -> None:
    feed = client.get("/v1/feed", headers=sign_in(client, "carol"))
    assert feed.status_code == 200
    assert feed.headers["cache-control"] == "private"
    body = feed.json()
    assert body["mode"] == "top_stories"
    assert [s["story_id"] for s in body["stories"]] == [
        "0196f1c2a3b40001", "0196f1c2a3b40002", "0196f1c2a3b40003", "0196f1c2a3b40004", "0196f1c2a3b40005"]
    assert all(s["reason"] == "Top story in your edition" for s in body["stories"])


def test_follow_and_hide_write_through_and_reshape_for_you(client: TestClient) -> None:
    alice = sign_in(client, "alice")
    profile = client.put("/v1/me/follows/topic/technology", headers=alice).json()
    assert profile["follows"]["topic"] == ["technology"]
    profile = client.post("/v1/me/hide", json={"source": "valley-post"}, headers=alice).json()
    assert profile["hides"]["source"] == ["valley-post"]
    assert client.post("/v1/me/hide", json={"source": "a", "story": "b"}, headers=alice).status_code == 422

    feed = client.get("/v1/feed", headers=alice).json()
    assert feed["mode"] == "for_you"
    by_id = {s["story_id"]: s for s in feed["stories"]}
    assert by_id[TECH_STORY]["reason"] == "Because you follow Technology"
    publishers = {src["publisher_id"] for s in feed["stories"] for src in s["sources"]}
    assert "valley-post" not in publishers
    assert all(src["click_url"].startswith("/r/") for s in feed["stories"] for src in s["sources"])

    client.delete("/v1/me/follows/topic/technology", headers=alice)
    assert client.get("/v1/me", headers=alice).json()["follows"]["topic"] == []


def test_feed_cursor_pages_through_the_pool_once(client: TestClient) -> None:
    alice = sign_in(client, "alice")
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        body = client.get("/v1/feed", params=params, headers=alice).json()
        seen += [s["story_id"] for s in body["stories"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 5
    assert client.get("/v1/feed", params={"cursor": "nope"}, headers=alice).status_code == 400


def test_profile_store_failure_falls_back_to_labelled_top_stories(local_store: ObjectStore, tmp_path: Path) -> None:
    profiles = SqliteProfileStore(tmp_path / "p.sqlite3")
    with TestClient(create_app(local_store, settings_for(tmp_path), profiles=profiles)) as client:
        alice = sign_in(client, "alice")
        profiles.close()  # the store is gone: every call now fails
        feed = client.get("/v1/feed", headers=alice)
        assert feed.status_code == 200
        assert feed.json()["mode"] == "top_stories_fallback"
        assert len(feed.json()["stories"]) == 5
        follow = client.put("/v1/me/follows/topic/world", headers=alice)
        assert follow.status_code == 503 and follow.headers["retry-after"]


def test_overload_sheds_for_you_first_and_shared_pages_still_answer(
    local_store: ObjectStore, tmp_path: Path
) -> None:
    with TestClient(create_app(local_store, settings_for(tmp_path, personal_max_in_flight=2))) as client:
        alice = sign_in(client, "alice")
        limit = client.app.state.personal_limit  # type: ignore[attr-defined]
        assert limit.try_acquire() and limit.try_acquire()  # two slow For-you requests in flight
        shed = client.get("/v1/feed", headers=alice)
        assert shed.status_code == 503
        assert shed.headers["retry-after"] == "5"
        assert client.get("/v1/editions/en-US/top").status_code == 200
        limit.release()
        assert client.get("/v1/feed", headers=alice).status_code == 200


# -- clicks -------------------------------------------------------------------------------------


def test_click_is_buffered_redirected_at_once_and_written_with_the_next_flush(
    client: TestClient, local_store: ObjectStore
) -> None:
    alice = sign_in(client, "alice")
    card = client.get("/v1/feed", headers=alice).json()["stories"][0]
    source = card["sources"][0]
    # The reader page mints a personal click with the session (that records the read) ...
    minted = client.post("/v1/click-token", headers=alice,
                         json={"article_id": source["article_id"], "surface": "for_you", "position": 0})

    response = client.get(minted.json()["click_url"], follow_redirects=False)

    assert response.status_code == 302
    assert response.headers["location"] == source["url"]
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-click-logged"] == "buffered"
    assert list_segments(local_store, layout.CLICKS_PREFIX) == []  # in the replica's buffer, not yet written
    assert flush_clicks(client) == 1
    keys = list_segments(local_store, layout.CLICKS_PREFIX)
    assert len(keys) == 1 and layout.is_click_batch(keys[0])
    rows = read_segments(local_store, keys, CLICKS_SCHEMA).to_pylist()
    assert rows[0]["article_id"] == source["article_id"]
    assert rows[0]["story_id"] == card["story_id"]
    assert rows[0]["surface"] == "for_you" and rows[0]["position"] == 0
    assert len(rows[0]["reader_hash"]) == 32 and "alice" not in rows[0]["reader_hash"]
    # The same link again is the same click, not a second one, written or not.
    again = client.get(minted.json()["click_url"], follow_redirects=False)
    assert again.status_code == 302 and again.headers["x-click-logged"] == "buffered"
    assert flush_clicks(client) == 0
    assert len(list_segments(local_store, layout.CLICKS_PREFIX)) == 1
    # Reading it hides it from For you until it develops.
    assert card["story_id"] not in {s["story_id"] for s in client.get("/v1/feed", headers=alice).json()["stories"]}
    # ... while the card's own click_url is anonymous: it redirects and logs, but names no reader.
    assert client.get(source["click_url"], follow_redirects=False).status_code == 302
    assert flush_clicks(client) == 1
    rows = read_segments(local_store, list_segments(local_store, layout.CLICKS_PREFIX), CLICKS_SCHEMA).to_pylist()
    anonymous, personal = sorted(r["reader_hash"] for r in rows)
    assert anonymous == "" and len(personal) == 32


def test_click_token_for_shared_pages_signs_only_live_urls(client: TestClient) -> None:
    page = client.get("/v1/editions/en-US/top").json()
    source = page["stories"][1]["sources"][0]
    minted = client.post("/v1/click-token", json={"article_id": source["article_id"], "surface": "top", "position": 1})
    assert minted.status_code == 200
    redirect = client.get(minted.json()["click_url"], follow_redirects=False)
    assert redirect.status_code == 302 and redirect.headers["location"] == source["url"]
    assert client.post("/v1/click-token", json={"article_id": "not-an-article"}).status_code == 404


def _bad_click_token(client: TestClient, kind: str) -> str:
    from serving.signing import Signer

    if kind == "tampered":
        minted = client.post("/v1/click-token", json={"article_id": "0196f1c2a3b40001-a0"}).json()["token"]
        raw = bytearray(base64.urlsafe_b64decode(minted + "=" * (-len(minted) % 4)))
        raw[10] ^= 1  # flip a bit of the payload
        return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    if kind == "forged":
        other_key = Signer(b"x" * 32, click_ttl_seconds=60, session_ttl_seconds=60)
        return other_key.issue_click(article_id="a", story_id="s", url="https://evil.example/", reader_hash="",
                                     surface="top", position=0)
    if kind == "expired":
        ours = Signer(HMAC_KEY.encode(), click_ttl_seconds=60, session_ttl_seconds=60)
        return ours.issue_click(article_id="a", story_id="s", url="https://x.example/", reader_hash="",
                                surface="top", position=0, now=time.time() - 2 * 86400)
    return {"empty": "", "not-base64": "%%%", "huge": "A" * 5000}[kind]


@pytest.mark.parametrize("kind", ["tampered", "forged", "expired", "empty", "not-base64", "huge"])
def test_forged_tampered_and_expired_tokens_never_redirect(client: TestClient, kind: str) -> None:
    response = client.get(f"/r/{_bad_click_token(client, kind)}", follow_redirects=False)
    assert response.status_code in (400, 404, 422)
    assert "location" not in response.headers
