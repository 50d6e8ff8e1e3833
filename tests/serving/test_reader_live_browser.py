"""The reader page in a real Chromium, over two replicas behind a round-robin proxy (issue 30):
search, follow a keyword, and, while the page stays open (no reload), the live "new stories" offer,
a Breaking alert and a keyword alert pushed over the live stream; then the replica holding the
stream goes away, the page reconnects through the proxy to the other one, and the next alert
arrives while none is shown twice.

Both replicas are real uvicorn servers over one store and one profile database (SQLite, WAL).
The events come from what the pipeline writes: page versions, rank's live Breaking events, a new
search index version. Only 127.0.0.1 is reachable from the browser.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import uvicorn
from conftest import HMAC_KEY, accept, make_stories, page_payload, publish_fixture, publish_search
from fastapi import FastAPI

from serving.__main__ import LiveServer
from serving.app import create_app
from serving.settings import ServingSettings
from tasks.live import record_live_breaking
from warehouse.snapshots import publish_page
from warehouse.store import LocalStore

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LOOPBACK = "127.0.0.1"
SEAWALL, RAIL, SPACE = "0196f1c2a3b40001", "0196f1c2a3b40002", "0196f1c2a3b40003"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Chromium is not installed at {CHROMIUM}"),
]


@dataclass
class Replica:
    app: FastAPI
    server: uvicorn.Server
    thread: threading.Thread
    port: int

    def stop(self) -> None:
        """As SIGTERM does: ``newsroom serve``'s server ends the live streams, then stops."""
        self.server.handle_exit(signal.SIGTERM, None)
        self.thread.join(15)


def start_replica(store: LocalStore, tmp_path: Path) -> Replica:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, 0))
    settings = ServingSettings(refresh_seconds=0.2, live_poll_seconds=0.2, profile_cache_poll_seconds=0.2,
                               profiles_path=str(tmp_path / "profiles.sqlite3"), hmac_key=HMAC_KEY)
    app = create_app(store, settings)
    server = LiveServer(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    return Replica(app, server, thread, sock.getsockname()[1])


class RoundRobinProxy:
    """A TCP load balancer on loopback: each new connection goes to the next replica that accepts it."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.next = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((LOOPBACK, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        for _ in range(len(self.ports)):
            port = self.ports[self.next % len(self.ports)]
            self.next += 1
            try:
                upstream = socket.create_connection((LOOPBACK, port), timeout=2)
                break
            except OSError:
                continue
        if upstream is None:
            client.close()
            return
        upstream.settimeout(None)

        def pipe(source: socket.socket, target: socket.socket) -> None:
            try:
                while data := source.recv(65536):
                    target.sendall(data)
            except OSError:
                pass
            finally:
                for s in (source, target):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
        pipe(client, upstream)

    def close(self) -> None:
        self.closed = True
        self.sock.close()


@dataclass
class Site:
    store: LocalStore
    replicas: list[Replica]
    url: str
    stories: dict[str, dict[str, object]]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    store = LocalStore(tmp_path / "store")
    fixture = publish_fixture(store)
    stories = fixture.stories_snapshot["stories"]
    publish_search(store, {k: v for k, v in stories.items() if k != RAIL})  # the rail story comes later
    replicas = [start_replica(store, tmp_path), start_replica(store, tmp_path)]
    proxy = RoundRobinProxy([r.port for r in replicas])
    try:
        yield Site(store, replicas, f"http://{LOOPBACK}:{proxy.port}", stories)
    finally:
        proxy.close()
        for replica in replicas:
            replica.stop()


def new_front_page(store: LocalStore, minutes: int) -> None:
    now = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=minutes)
    stories = make_stories(now)
    assert publish_page(store, "en-US", "top", page_payload("en-US", "top", [*stories[1:], stories[0]], now), now=now,
                        validate=accept).published


def breaking(store: LocalStore, story_id: str, title: str) -> None:
    """As rank writes it, keyed by the cycle's instant (the live pages' newest ``published_at``)."""
    pointer = json.loads(store.get("pages/en-US/top/latest.json").data)
    at = datetime.strptime(pointer["published_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    record_live_breaking(store, [{"story_id": story_id, "breaking_since": pointer["published_at"], "editions": ["en-US"]}],
                         at, {story_id: {"title": title, "language": "en"}})


def test_search_follow_and_live_alerts_across_two_replicas(site: Site, tmp_path: Path) -> None:
    from playwright.sync_api import Request, expect, sync_playwright

    shots = Path(os.environ.get("NEWSROOM_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    outside: list[str] = []
    errors: list[str] = []

    def note_outside(request: Request) -> None:
        if urlsplit(request.url).hostname != LOOPBACK:
            outside.append(request.url)

    with sync_playwright() as p:
        # No request interception here: Chromium then never tells a streamed response's end to the page
        # (a stream cut by a replica going away would hang). Every name but loopback fails to resolve instead.
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=[
            *CHROMIUM_ARGS, f"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE {LOOPBACK}"])
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
            context.on("request", note_outside)
            page = context.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))

            page.goto(f"{site.url}/#/e/en-US/top")
            expect(page.locator("article.story")).to_have_count(5)
            page.locator("#reader-name").fill("alice")
            page.locator("#sign-in").click()
            expect(page.locator("#account .who")).to_have_text("Signed in as alice")

            # Search from the box: the story and its facets; a query nothing matches yet can be followed.
            page.locator("#search-input").fill("sea wall")
            page.locator("#search-input").press("Enter")
            expect(page.locator(".search-grid article.story")).to_have_count(1)
            expect(page.locator(f'.search-grid article.story[data-story-id="{SEAWALL}"] .headline')).to_have_text(
                str(site.stories[SEAWALL]["title"]))
            expect(page.locator('.facet[data-facet="section"] .facet-value')).to_have_text(["World (1)"])
            page.screenshot(path=str(shots / "reader-search.png"), full_page=True)
            page.locator("#search-input").fill("battery trains")
            page.locator("#search-form button").click()
            expect(page.locator(".search-count")).to_have_text("0 stories")
            page.locator("#follow-search").click()
            expect(page.locator("#follow-search")).to_have_attribute("aria-pressed", "true")

            # For you lists the keyword; opt in to Breaking alerts. (The other replica learns of the
            # follow at its next profile poll, 0.2 s here: For you may be answered there.)
            page.wait_for_timeout(1000)
            page.locator(".section-tab", has_text="For you").click()
            expect(page.locator('.keyword-list .keyword[data-keyword="battery trains"]')).to_have_count(1)
            page.locator("#breaking-alerts").check()
            expect(page.locator("#breaking-alerts")).to_be_checked()
            page.locator(".section-tab", has_text="Top stories").click()
            expect(page.locator("#front .page-heading")).to_have_text("Top stories")
            page.evaluate("window.__stillTheSamePage = true")
            time.sleep(1.0)  # the stream (re)opened for the signed-in reader

            # The live stream, with the page left open: new stories, a Breaking story, a keyword match.
            new_front_page(site.store, 1)
            expect(page.locator("#new-stories")).to_be_visible(timeout=15_000)
            breaking(site.store, SEAWALL, "Sea wall deal signed")
            expect(page.locator(f'.alert-breaking[data-story-id="{SEAWALL}"] .alert-title')).to_have_text(
                "Sea wall deal signed", timeout=15_000)
            publish_search(site.store, site.stories)  # the rail story enters the index
            expect(page.locator(f'.alert-keyword[data-story-id="{RAIL}"] .alert-title')).to_have_text(
                str(site.stories[RAIL]["title"]), timeout=15_000)
            page.screenshot(path=str(shots / "reader-live-alerts.png"), full_page=False)

            # The replica holding the stream goes away; the page reconnects to the other one.
            holding = [r for r in site.replicas if r.app.state.live.connections]
            assert len(holding) == 1, [r.app.state.live.connections for r in site.replicas]
            holding[0].stop()
            other = next(r for r in site.replicas if r is not holding[0])
            deadline = time.monotonic() + 20
            while not other.app.state.live.connections:
                assert time.monotonic() < deadline, "the page did not reconnect to the other replica"
                time.sleep(0.1)
            breaking(site.store, SPACE, "Water found on a rocky exoplanet")
            expect(page.locator(f'.alert-breaking[data-story-id="{SPACE}"]')).to_have_count(1, timeout=15_000)
            time.sleep(1.0)
            expect(page.locator(f'.alert[data-story-id="{SEAWALL}"]')).to_have_count(1)  # never pushed twice
            expect(page.locator(f'.alert[data-story-id="{RAIL}"]')).to_have_count(1)
            assert page.evaluate("window.__stillTheSamePage") is True  # no reload
        finally:
            browser.close()

    # The fixture's story images are on images.example (not resolved here); nothing else leaves loopback.
    assert {urlsplit(u).hostname for u in outside} <= {"images.example"}, outside
    assert errors == [], json.dumps(errors)
