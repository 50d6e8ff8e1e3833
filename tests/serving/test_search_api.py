"""``GET /v1/search`` and the Atom feeds out (issue 30), over versions the warehouse code publishes.

The search index is built and published as rank does (``tasks.search.snapshot_documents``, then
``publish_search_index``); replicas load it from the pointer. The feed-reader test points ingest's
own poller at a real uvicorn serving the feeds.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import feedparser
import pytest
import uvicorn
from conftest import (
    HMAC_KEY,
    accept,
    make_stories,
    page_payload,
    publish_fixture,
    publish_search,
    settings_for,
    sign_in,
)
from fastapi.testclient import TestClient

from serving.app import create_app
from serving.settings import ServingSettings
from tasks.http import make_client
from tasks.ingest.feed_job import FeedJob
from tasks.ingest.poll import poll_feed
from tasks.settings import IngestSettings
from transforms.records import FeedState
from warehouse import layout
from warehouse.snapshots import publish_page
from warehouse.store import LocalStore, ObjectStore

SEAWALL = "0196f1c2a3b40001"
RAIL = "0196f1c2a3b40002"


@pytest.fixture
def searchable(tmp_path: Path) -> Iterator[tuple[ObjectStore, TestClient]]:
    store = LocalStore(tmp_path / "store")
    fixture = publish_fixture(store)
    publish_search(store, fixture.stories_snapshot["stories"])
    with TestClient(create_app(store, settings_for(tmp_path))) as client:
        yield store, client


def test_search_answers_are_shared_with_facets_and_paging(searchable: tuple[ObjectStore, TestClient]) -> None:
    _, client = searchable
    answer = client.get("/v1/search", params={"q": "sea wall"})
    assert answer.status_code == 200
    assert answer.headers["cache-control"] == "public, s-maxage=60, stale-while-revalidate=60, stale-if-error=3600"
    body = answer.json()
    assert body["query"] == "sea wall" and body["total"] == 1 and body["stories"][0]["story_id"] == SEAWALL
    assert body["stories"][0]["has_coverage"] is True and body["stories"][0]["sources"]
    assert body["facets"]["section"] == [{"value": "world", "count": 1}]
    # The same bytes whoever asks, signed in or not; a revalidation is a 304.
    alice = sign_in(client, "alice")
    assert client.get("/v1/search", params={"q": "sea wall"}, headers={**alice, "Cookie": "x=1"}).content == \
        answer.content
    again = client.get("/v1/search", params={"q": "sea wall"}, headers={"If-None-Match": answer.headers["etag"]})
    assert again.status_code == 304
    wide = client.get("/v1/search", params={"q": "the OR a OR on", "limit": 2}).json()
    assert wide["total"] > 2 and wide["next_offset"] == 2
    rest = client.get("/v1/search", params={"q": "the OR a OR on", "limit": 2, "offset": 2}).json()
    assert not {s["story_id"] for s in rest["stories"]} & {s["story_id"] for s in wide["stories"]}
    business = client.get("/v1/search", params={"q": "the OR a OR on", "section": "business"}).json()
    assert [s["story_id"] for s in business["stories"]] == [RAIL]
    assert {f["value"] for f in business["facets"]["section"]} >= {"world", "business"}  # counted without it
    assert client.get("/v1/search", params={"q": "rail", "edition": "en-GB"}).json()["total"] == 1
    assert client.get("/v1/search", params={"q": "rail", "publisher": "civic-review"}).json()["total"] == 0


@pytest.mark.parametrize(("params", "status", "why"), [
    ({"q": "x" * 201}, 400, "longer than 200 characters"),
    ({"q": "x" * 801}, 422, None),
    ({"q": '"sea wall'}, 400, "a quote is not closed"),
    ({"q": "sea OR"}, 400, "OR must stand between"),
    ({"q": "-sea"}, 400, "nothing to look for"),
    ({"q": ""}, 422, None),
    ({"q": "sea", "since": "yesterday"}, 422, None),
    ({"q": "sea", "limit": 500}, 422, None),
    ({"q": "sea", "edition": "../x"}, 422, None),
], ids=["over-long", "far-too-long", "unclosed-quote", "dangling-or", "only-exclusion", "empty", "bad-since",
        "limit", "bad-edition"])
def test_bad_queries_get_a_clear_4xx_and_nothing_is_written(searchable: tuple[ObjectStore, TestClient],
                                                           params: dict[str, object], status: int,
                                                           why: str | None) -> None:
    store, client = searchable
    before = store.list("")
    answer = client.get("/v1/search", params=params)
    assert answer.status_code == status, answer.text
    if why is not None:
        assert answer.json()["detail"] == f"invalid query: {why}" or why in answer.json()["detail"]
        assert str(params["q"])[:20] not in answer.text  # the answer never repeats the query
    assert store.list("") == before


def test_no_index_yet_is_503_and_a_new_version_is_picked_up(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    fixture = publish_fixture(store)
    with TestClient(create_app(store, settings_for(tmp_path))) as client:
        waiting = client.get("/v1/search", params={"q": "sea"})
        assert waiting.status_code == 503 and waiting.headers["retry-after"]
        publish_search(store, fixture.stories_snapshot["stories"])
        client.app.state.search.refresh()  # type: ignore[attr-defined]
        assert client.get("/v1/search", params={"q": "sea"}).json()["version"] == 1
        assert client.get("/healthz").json()["search_version"] == 1
        # The live version damaged in the store: the replica keeps answering from the one it holds.
        store.put(layout.search_index_key(1), b"damaged")
        store.put(layout.search_index_pointer_key(), store.get(layout.search_index_pointer_key()).data.replace(
            b'"documents"', b'"damaged":1,"documents"'))
        client.app.state.search.refresh()  # type: ignore[attr-defined]
        assert client.get("/v1/search", params={"q": "sea"}).json()["total"] == 1


# -- Atom feeds out ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", [
    "/v1/editions/en-US/top/feed.atom", "/v1/editions/en-US/world/feed.atom", "/v1/topics/technology/feed.atom",
    "/v1/search/feed.atom?q=sea%20wall", "/v1/search/feed.atom?q=nothing%20matches%20this",
])
def test_atom_feeds_parse_cleanly_with_stable_ids(searchable: tuple[ObjectStore, TestClient], path: str) -> None:
    _, client = searchable
    answer = client.get(path)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/atom+xml")
    assert answer.headers["cache-control"] == "public, s-maxage=60, stale-while-revalidate=60, stale-if-error=3600"
    feed = feedparser.parse(answer.content)
    assert feed.bozo == 0, feed.get("bozo_exception")
    assert feed.version == "atom10"
    for entry in feed.entries:
        assert entry.id.startswith("urn:newsroom:story:")
        assert entry.link.startswith("https://")  # the page's representative article
        assert entry.title and entry.updated
    assert client.get(path, headers={"If-None-Match": answer.headers["etag"]}).status_code == 304
    if path.endswith("/top/feed.atom"):
        assert [e.id.rsplit(":", 1)[1] for e in feed.entries] == [s["story_id"] for s in make_stories(datetime.now(UTC))]


@pytest.fixture
def feed_server(tmp_path: Path) -> Iterator[tuple[ObjectStore, str]]:
    store = LocalStore(tmp_path / "store")
    publish_fixture(store)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    settings = ServingSettings(refresh_seconds=0.1, profiles_path=str(tmp_path / "p.sqlite3"), hmac_key=HMAC_KEY)
    server = uvicorn.Server(uvicorn.Config(create_app(store, settings), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.05)
    try:
        yield store, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_a_feed_reader_sees_new_entries_after_a_republish_and_no_duplicates(
        feed_server: tuple[ObjectStore, str]) -> None:
    """Ingest's own poller (conditional GET, guids it has seen) reading the front page's feed."""
    store, base = feed_server
    settings = IngestSettings(allow_private_addresses=True)  # type: ignore[call-arg]
    job = FeedJob("newsroom-top", f"{base}/v1/editions/en-US/top/feed.atom", "newsroom", "en", "US", "",
                  FeedState("newsroom-top"), tier=1)
    now = datetime.now(UTC).replace(microsecond=0)
    seen: list[str] = []
    with make_client(settings) as client:
        first = poll_feed(job, client, settings, now)
        seen += [i.guid for i in first.new_items]
        assert len(seen) == 5 and first.report.status == 200
        job = replace(job, state=first.state)
        unchanged = poll_feed(job, client, settings, now + timedelta(minutes=1))
        assert unchanged.report.status == 304 and unchanged.new_items == ()  # a conditional GET, nothing new
        job = replace(job, state=unchanged.state)
        # Republish: one story more on the front page, the others again (reordered).
        later = now + timedelta(minutes=2)
        stories = make_stories(later)
        extra = dict(stories[0], story_id="0196f1c2a3b40077", title="A brand new story leads the page")
        assert publish_page(store, "en-US", "top", page_payload("en-US", "top", [extra, *reversed(stories)], later),
                            now=later, validate=accept).published
        deadline = time.monotonic() + 10
        republished = unchanged
        while time.monotonic() < deadline:
            republished = poll_feed(job, client, settings, later)
            if republished.report.status == 200:
                break
            time.sleep(0.1)
        new = [i.guid for i in republished.new_items]
        assert new == ["urn:newsroom:story:0196f1c2a3b40077"], new
        assert not set(new) & set(seen)  # the stories it had read, in a new version, are no new entries
