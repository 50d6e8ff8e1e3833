"""A reader's own sources (issue 30): ``POST /v1/subscriptions`` checks, discovers and queues; ingest
polls pending sources first; the operator's registry stays the authority.

A stdlib HTTP server on 127.0.0.1 stands in for publishers' sites; the app runs with private
addresses allowed for loopback only where a test says so (as the demo does), refused otherwise.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import HMAC_KEY, publish_fixture, sign_in
from fastapi.testclient import TestClient

from serving.app import create_app
from serving.settings import ServingSettings
from tasks.ingest.pending import poll_pending_sources
from tasks.registry import import_publishers
from tasks.settings import IngestSettings
from warehouse import layout
from warehouse.store import LocalStore, ObjectStore

FEED = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>Harbor Blog</title>'
        b"<item><title>Sea walls go up</title><link>https://harbor.example/1</link><guid>1</guid></item>"
        b"<item><title>Ferries return</title><link>https://harbor.example/2</link><guid>2</guid></item>"
        b"</channel></rss>")
BOMB = (b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;">]>'
        b"<rss><channel><title>&b;</title></channel></rss>")


class _Site(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        _Site.hits.append(self.path)
        if self.path == "/" or self.path.startswith("/site"):
            body, kind = (b'<html><head><title>Harbor</title><link rel="alternate" type="application/rss+xml" '
                          b'href="/feed.xml"></head><body>news</body></html>'), "text/html"
        elif self.path.startswith("/feed"):
            body, kind = FEED, "application/rss+xml"
        elif self.path == "/plain":
            body, kind = b"<html><head><title>No feed here</title></head></html>", "text/html"
        elif self.path == "/fake":
            body, kind = (b'<html><head><link rel="alternate" type="application/rss+xml" href="/plain">'
                          b"</head></html>"), "text/html"
        elif self.path == "/bomb":
            body, kind = BOMB, "application/rss+xml"
        elif self.path == "/to-metadata":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def publisher() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Site.hits = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def make_client(tmp_path: Path, *, allow_loopback: bool, **extra: object) -> tuple[ObjectStore, TestClient]:
    store = LocalStore(tmp_path / "store")
    publish_fixture(store)
    settings = ServingSettings(refresh_seconds=3600, profiles_path=str(tmp_path / "p.sqlite3"),  # type: ignore[arg-type]
                               hmac_key=HMAC_KEY, sources_allow_private_addresses=allow_loopback, **extra)
    return store, TestClient(create_app(store, settings))


def pending(store: ObjectStore) -> list[str]:
    return store.list(layout.PENDING_SOURCES_PREFIX)


def test_a_site_is_checked_its_feed_found_and_queued_for_that_reader_only(tmp_path: Path, publisher: str) -> None:
    store, client = make_client(tmp_path, allow_loopback=True)
    with client:
        alice, bob = sign_in(client, "alice"), sign_in(client, "bob")
        answer = client.post("/v1/subscriptions", json={"url": f"{publisher}/site"}, headers=alice)
        assert answer.status_code == 201, answer.text
        assert answer.headers["cache-control"] == "private"
        body = answer.json()
        assert body["feed_url"] == f"{publisher}/feed.xml" and body["title"] == "Harbor Blog"
        assert body["status"] == "pending"
        request = json.loads(store.get(layout.pending_source_key(body["feed_id"], "request.json")).data)
        assert request["feed_url"] == f"{publisher}/feed.xml" and request["kind"] == "rss"
        assert "alice" not in json.dumps(request) and "reader" not in request  # the store holds nobody's name
        assert store.list("registry/") == []  # the operator's registry is untouched
        assert [s["feed_id"] for s in client.get("/v1/subscriptions", headers=alice).json()["sources"]] == \
            [body["feed_id"]]
        assert client.get("/v1/subscriptions", headers=bob).json()["sources"] == []
        # The feed itself, suggested again: the same source, nothing new written.
        again = client.post("/v1/subscriptions", json={"url": f"{publisher}/feed.xml"}, headers=alice)
        assert again.status_code == 200 and again.json()["feed_id"] == body["feed_id"]
        assert len(pending(store)) == 1


@pytest.mark.parametrize(("path_or_url", "allow", "status", "why"), [
    ("{publisher}/site", False, 422, "not public"),  # 127.0.0.1 with private addresses refused
    ("http://localhost:{port}/site", False, 422, "not public"),  # a name that resolves to a private address
    ("{publisher}/to-metadata", True, 422, "not public"),  # a redirect to link-local (cloud metadata)
    ("{publisher}/plain", True, 422, "no feed here"),
    ("{publisher}/fake", True, 422, "no feed here"),  # the page names a "feed" that is a page
    ("{publisher}/bomb", True, 422, "no feed here"),  # entities: refused before parsing
    ("{publisher}/missing", True, 422, "HTTP 404"),
    ("ftp://example.org/feed", True, 422, "only http and https"),
    ("http://user:secret@example.org/feed", True, 422, "user name or password"),
    ("javascript:alert(1)", True, 422, "only http and https"),
    ("http://example.org/" + "x" * 2100, True, 422, "longer than 2048"),
    ("http://127.0.0.1:1/feed", True, 502, "could not be reached"),
], ids=["private-address", "resolves-private", "redirect-to-metadata", "not-a-feed", "alternate-not-a-feed",
        "xml-bomb", "404", "ftp", "credentials", "javascript", "over-long", "unreachable"])
def test_a_source_that_cannot_be_taken_gets_a_clear_4xx_and_nothing_is_written(
        tmp_path: Path, publisher: str, path_or_url: str, allow: bool, status: int, why: str) -> None:
    url = path_or_url.format(publisher=publisher, port=publisher.rsplit(":", 1)[1])
    store, client = make_client(tmp_path, allow_loopback=allow)
    with client:
        alice = sign_in(client, "alice")
        answer = client.post("/v1/subscriptions", json={"url": url}, headers=alice)
        assert answer.status_code == status, answer.text
        assert why in answer.json()["detail"]
        assert url not in answer.text  # no echo of what the reader sent
        assert pending(store) == []
        assert client.get("/v1/subscriptions", headers=alice).json()["sources"] == []


def test_a_thousand_suggestions_from_one_reader_are_capped_and_fetch_nothing_past_the_cap(
        tmp_path: Path, publisher: str) -> None:
    store, client = make_client(tmp_path, allow_loopback=True, sources_per_day=5, sources_max=20)
    with client:
        alice = sign_in(client, "alice")
        statuses = [client.post("/v1/subscriptions", json={"url": f"{publisher}/feed{i}.xml"},
                                headers=alice).status_code for i in range(1000)]
        assert statuses[:5] == [201] * 5 and set(statuses[5:]) == {429}
        refused = client.post("/v1/subscriptions", json={"url": f"{publisher}/feed-more.xml"}, headers=alice)
        assert "in the last 24 hours" in refused.json()["detail"] and refused.headers["retry-after"]
        assert len(pending(store)) == 5 and len(client.get("/v1/subscriptions", headers=alice).json()["sources"]) == 5
        assert len(_Site.hits) == 5  # refused before anything was fetched
        assert sign_in(client, "bob") and client.post(  # another reader has limits of their own
            "/v1/subscriptions", json={"url": f"{publisher}/feed0.xml"}, headers=sign_in(client, "bob")).status_code == 201


def test_ingest_polls_a_pending_source_first_and_the_registry_accepts_it(tmp_path: Path, publisher: str) -> None:
    store, client = make_client(tmp_path, allow_loopback=True)
    now = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
    settings = IngestSettings(allow_private_addresses=True)  # type: ignore[call-arg]
    with client:
        alice = sign_in(client, "alice")
        feed_id = client.post("/v1/subscriptions", json={"url": f"{publisher}/"}, headers=alice).json()["feed_id"]
        summary = poll_pending_sources(store, settings, now)
        assert summary["polled"] == 1 and summary["failing"] == 0, summary
        source = client.get("/v1/subscriptions", headers=alice).json()["sources"][0]
        assert source["status"] == "pending" and [i["title"] for i in source["items"]] == ["Sea walls go up",
                                                                                         "Ferries return"]
        assert store.list(layout.ARTICLES_PREFIX) == []  # no article of a pending source is fetched or stored
        assert poll_pending_sources(store, settings, now)["polled"] == 0  # polled an hour from now, not each run
        registry = tmp_path / "publishers.csv"
        registry.write_text("publisher_id,name,domain,region,language,feed_url\n"
                            f"harbor,Harbor Blog,harbor.example,US,en,{publisher}/feed.xml\n")
        import_publishers(store, registry)
        assert poll_pending_sources(store, settings, now)["accepted"] == 1
        source = client.get("/v1/subscriptions", headers=alice).json()["sources"][0]
        assert source["feed_id"] == feed_id and source["status"] == "accepted"
