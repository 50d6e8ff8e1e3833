"""The API over snapshots published by our own warehouse code, on every store backend."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from conftest import ALIASES, FlakyStore, accept, page_payload, publish_fixture, stories_payload
from fastapi.testclient import TestClient

from serving.app import create_app
from serving.cache import SnapshotCache
from serving.settings import ServingSettings
from warehouse import layout
from warehouse.snapshots import publish_page, publish_stories, read_pointer
from warehouse.store import ObjectStore

SHARED = "public, s-maxage=60, stale-while-revalidate=60, stale-if-error=3600"
QUIET = ServingSettings(refresh_seconds=3600, profiles_path=":memory:", hmac_key="k" * 32)
"""The background refresher stays asleep; tests call ``cache.refresh()`` themselves."""


@pytest.fixture
def flaky(store: ObjectStore) -> FlakyStore:
    publish_fixture(store)
    return FlakyStore(store)


@pytest.fixture
def client(flaky: FlakyStore) -> Iterator[TestClient]:
    with TestClient(create_app(flaky, QUIET)) as c:
        yield c


def cache_of(client: TestClient) -> SnapshotCache:
    cache: SnapshotCache = client.app.state.cache  # type: ignore[attr-defined]
    return cache


def test_page_is_the_stored_version_byte_for_byte(client: TestClient, store: ObjectStore) -> None:
    response = client.get("/v1/editions/en-US/top", headers={"Accept-Encoding": "identity"})

    stored = store.get(layout.page_version_key("en-US", "top", 1)).data
    pointer = read_pointer(store, "en-US", "top")
    assert response.status_code == 200
    assert response.content == stored
    assert response.headers["content-type"] == "application/json"
    assert pointer is not None
    assert response.headers["etag"] == f'"{pointer.sha256}"'
    assert response.headers["etag"] == f'"{hashlib.sha256(stored).hexdigest()}"'


@pytest.mark.parametrize(
    "path",
    ["/v1/editions/en-US/top", "/v1/editions/en-GB/top", "/v1/stories/0196f1c2a3b40002", "/v1/editions"],
    ids=["page", "other-edition", "story", "editions"],
)
def test_shared_answers_carry_exact_cache_headers_and_revalidate(client: TestClient, path: str) -> None:
    identity = {"Accept-Encoding": "identity"}
    first = client.get(path, headers=identity)
    etag = first.headers["etag"]

    assert first.status_code == 200
    assert first.headers["cache-control"] == SHARED
    assert etag == f'"{hashlib.sha256(first.content).hexdigest()}"'
    assert "set-cookie" not in first.headers
    # Pages come in several codings (#20): they vary on Accept-Encoding and nothing else.
    assert first.headers.get("vary") == ("Accept-Encoding" if "/editions/" in path else None)

    for validator in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        again = client.get(path, headers={"If-None-Match": validator, **identity})
        assert again.status_code == 304, validator
        assert again.content == b""
        assert again.headers["etag"] == etag
        assert again.headers["cache-control"] == SHARED

    stale = client.get(path, headers={"If-None-Match": '"not-the-current-version"', **identity})
    assert stale.status_code == 200
    assert stale.content == first.content


def test_editions_lists_every_live_page_top_first(client: TestClient) -> None:
    assert client.get("/v1/editions").json() == [
        {"edition": "en-GB", "sections": ["top"]},
        {"edition": "en-US", "sections": ["top", "business", "world"]},
    ]


def test_story_is_full_coverage_oldest_first(client: TestClient, store: ObjectStore) -> None:
    snapshot = json.loads(store.get(layout.story_snapshot_key(1)).data)

    response = client.get("/v1/stories/0196f1c2a3b40001")

    story = response.json()
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    published = snapshot["stories"]["0196f1c2a3b40001"]
    assert {k: v for k, v in story.items() if k in published and k != "sources"} == {
        k: v for k, v in published.items() if k != "sources"
    }
    assert [{k: s[k] for k in p} for s, p in zip(story["sources"], published["sources"], strict=True)] == (
        published["sources"]
    )
    assert len(story["sources"]) == 5
    seen = [s["first_seen_at"] for s in story["sources"]]
    assert seen == sorted(seen)
    assert story["editions"] == ["en-GB", "en-US"]


@pytest.mark.parametrize("merged", sorted(ALIASES), ids=["two-hops", "one-hop"])
def test_merged_story_redirects_permanently_to_its_survivor(client: TestClient, merged: str) -> None:
    response = client.get(f"/v1/stories/{merged}", follow_redirects=False)

    assert response.status_code == 301
    assert response.headers["location"] == "/v1/stories/0196f1c2a3b40001"
    assert response.headers["cache-control"] == SHARED
    assert client.get(f"/v1/stories/{merged}").json()["story_id"] == "0196f1c2a3b40001"


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/editions/fr-FR/top", 404),
        ("/v1/editions/en-US/gardening", 404),
        ("/v1/stories/0196f1c2a3b4ffff", 404),
        ("/v1/editions/-en/top", 422),
        ("/v1/editions/en-US/top%20stories", 422),
        ("/v1/editions/en-US/" + "a" * 65, 422),
        ("/v1/stories/..", 404),
        ("/v1/stories/%2E%2E%2Fpages", 404),
        ("/v1/editions/en-US/top/extra", 404),
    ],
    ids=[
        "unknown-edition",
        "unknown-section",
        "unknown-story",
        "leading-dash",
        "space",
        "too-long",
        "dot-dot",
        "encoded-traversal",
        "extra-segment",
    ],
)
def test_unknown_or_unsafe_names_are_refused(client: TestClient, path: str, status: int) -> None:
    response = client.get(path)

    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert "key=" not in response.text  # object keys stay internal


def test_a_new_version_is_served_after_a_refresh(client: TestClient, store: ObjectStore) -> None:
    old = client.get("/v1/editions/en-US/top")
    later = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=1)
    stories = json.loads(old.content)["stories"][:2]
    stories[0] = dict(stories[0], title="Sea wall plan wins final approval")
    assert publish_page(
        store, "en-US", "top", page_payload("en-US", "top", stories, later), now=later, validate=accept
    ).published
    assert publish_stories(
        store, stories_payload(stories, ["en-US"], later, {}), now=later, validate=accept
    ).published

    assert client.get("/v1/editions/en-US/top").content == old.content  # not before the refresh
    assert cache_of(client).refresh() is True

    new = client.get("/v1/editions/en-US/top", headers={"If-None-Match": old.headers["etag"]})
    assert new.status_code == 200
    assert new.content == store.get(layout.page_version_key("en-US", "top", 2)).data
    assert new.json()["version"] == 2
    assert client.get("/v1/stories/0196f1c2a3b40001").json()["title"] == "Sea wall plan wins final approval"
    assert client.get("/v1/stories/0196f1c2a3b40005").status_code == 404  # on no live page any more
    # en-GB/top still lists story 3, which the new snapshot lacks: answered from version 1, and named
    assert client.get("/v1/stories/0196f1c2a3b40003").status_code == 200
    health = client.get("/healthz").json()
    assert (health["status"], health["stories_version"]) == ("degraded", 2)
    assert health["degraded"] == [{"what": "stories/0196f1c2a3b40003", "serving_version": 1, "skipped": [],
                                   "problem": "not in the story snapshot served; answered from an older valid version"}]


def test_refresh_downloads_only_versions_whose_pointer_moved(client: TestClient, flaky: FlakyStore) -> None:
    flaky.gets.clear()
    cache_of(client).refresh()
    assert [k for k in flaky.gets if not k.endswith("latest.json")] == []

    now = datetime.now(UTC).replace(microsecond=0)
    stories = client.get("/v1/editions/en-US/world").json()["stories"]
    stories[0] = dict(stories[0], snippet="Updated.")
    publish_page(
        flaky.inner, "en-US", "world", page_payload("en-US", "world", stories, now), now=now, validate=accept
    )
    flaky.gets.clear()
    cache_of(client).refresh()
    assert [k for k in flaky.gets if not k.endswith("latest.json")] == [
        layout.page_version_key("en-US", "world", 2)
    ]


def test_background_refresher_picks_up_new_versions(flaky: FlakyStore, store: ObjectStore) -> None:
    with TestClient(create_app(flaky, ServingSettings(refresh_seconds=0.05, profiles_path=":memory:", hmac_key="k" * 32))) as client:
        now = datetime.now(UTC).replace(microsecond=0)
        stories = client.get("/v1/editions/en-GB/top").json()["stories"][:1]
        publish_page(
            store, "en-GB", "top", page_payload("en-GB", "top", stories, now), now=now, validate=accept
        )
        deadline = time.monotonic() + 15
        while client.get("/v1/editions/en-GB/top").json()["version"] != 2:
            assert time.monotonic() < deadline, "the background refresher never served version 2"
            time.sleep(0.05)


def test_last_good_pages_are_served_while_the_store_fails(client: TestClient, flaky: FlakyStore) -> None:
    before = {
        p: client.get(p) for p in ("/v1/editions", "/v1/editions/en-US/top", "/v1/stories/0196f1c2a3b40004")
    }

    flaky.failing = True
    assert cache_of(client).refresh() is False

    for path, old in before.items():
        now = client.get(path)
        assert now.status_code == 200, path
        assert now.content == old.content, path
        assert now.headers["etag"] == old.headers["etag"], path
    health = client.get("/healthz")
    assert health.status_code == 200  # still serving the last good pages
    assert health.json()["status"] == "degraded"
    assert {d["problem"] for d in health.json()["degraded"]} == {"store unreachable"}

    flaky.failing = False
    assert cache_of(client).refresh() is True
    assert client.get("/healthz").json()["status"] == "ok"


def test_a_corrupt_version_keeps_the_last_good_one(client: TestClient, store: ObjectStore) -> None:
    before = client.get("/v1/editions/en-US/business")
    pointer_key = layout.page_pointer_key("en-US", "business")
    bad_key = layout.page_version_key("en-US", "business", 2)
    store.put(bad_key, b'{"truncated', content_type="application/json")
    # The pointer claims a sha256 the bytes do not have, as after a torn or tampered write.
    pointer = {"version": 2, "key": bad_key, "sha256": "0" * 64, "published_at": "2026-12-02T23:59:00Z"}
    store.put(pointer_key, json.dumps(pointer).encode(), if_match=store.head(pointer_key))

    assert cache_of(client).refresh() is False

    after = client.get("/v1/editions/en-US/business")
    assert after.status_code == 200
    assert after.content == before.content


def test_a_store_down_at_startup_serves_nothing_until_it_recovers(flaky: FlakyStore) -> None:
    flaky.failing = True
    with TestClient(create_app(flaky, QUIET)) as client:
        health = client.get("/healthz")
        assert health.status_code == 503  # nothing to serve: a load balancer skips this replica
        assert health.json()["status"] == "unavailable"
        assert client.get("/v1/editions").json() == []
        assert client.get("/v1/editions/en-US/top").status_code == 404
        assert client.get("/v1/stories/0196f1c2a3b40001").status_code == 404

        flaky.failing = False
        cache_of(client).refresh()
        assert client.get("/v1/editions/en-US/top").status_code == 200
        assert client.get("/v1/stories/0196f1c2a3b40001").status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/v1/editions",
        "/v1/editions/en-US/top",
        "/v1/stories/0196f1c2a3b40001",
        "/v1/stories/0196f1c2a3b40999",
    ],
    ids=["editions", "page", "story", "redirect"],
)
def test_cookies_and_credentials_do_not_change_shared_answers(client: TestClient, path: str) -> None:
    anonymous = client.get(path, follow_redirects=False)
    personal = client.get(
        path,
        follow_redirects=False,
        headers={"Authorization": "Bearer reader-42", "Cookie": "session=abc; prefs=dark"},
    )

    assert personal.status_code == anonymous.status_code
    assert personal.content == anonymous.content
    headers = {k: v for k, v in anonymous.headers.items() if k != "date"}
    assert {k: v for k, v in personal.headers.items() if k != "date"} == headers


def test_healthz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "pages": 4, "stories_version": 1, "search_version": None,
                                             "degraded": []}


def test_reader_page_and_its_assets_are_served_locally(client: TestClient) -> None:
    index = client.get("/")
    assert index.status_code == 200
    assert index.headers["content-type"].startswith("text/html")
    for asset, kind in (("/static/app.js", "javascript"), ("/static/style.css", "text/css")):
        response = client.get(asset)
        assert response.status_code == 200, asset
        assert kind in response.headers["content-type"]
        assert asset in index.text
        # Nothing is fetched from elsewhere: no CDN, no web fonts.
        assert "http://" not in response.text and "https://" not in response.text, asset
        assert "@import" not in response.text and "@font-face" not in response.text
    script = client.get("/static/app.js").text
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"):
        assert sink not in script, f"data must reach the DOM through textContent, not {sink}"


def test_openapi_documents_the_public_models(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert {"EditionListPublic", "StoryPublic", "SourcePublic", "PagePublic", "HealthPublic"} <= set(schemas)


def test_cache_lookups_never_touch_the_store(store: ObjectStore) -> None:
    publish_fixture(store)
    flaky = FlakyStore(store)
    cache = SnapshotCache(flaky)
    cache.refresh()
    flaky.failing = True

    assert cache.page("en-US", "top").pointer.version == 1
    assert json.loads(cache.story("0196f1c2a3b40002").data)["story_id"] == "0196f1c2a3b40002"
