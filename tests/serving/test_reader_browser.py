"""The reader page in a real Chromium, over a real uvicorn serving published snapshots.

Only 127.0.0.1 is reachable: every other request is aborted, so the page must work with nothing
but its own assets (story images come from a local stand-in for publishers' image hosts).
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import uvicorn
from conftest import HMAC_KEY, PublishedFixture, accept, page_payload, publish_fixture

from serving.app import create_app
from serving.settings import ServingSettings
from warehouse import layout
from warehouse.schemas import CLICKS_SCHEMA
from warehouse.snapshots import publish_page, read_live_page
from warehouse.store import LocalStore
from warehouse.tables import list_segments, read_segments

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LOOPBACK = "127.0.0.1"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Chromium is not installed at {CHROMIUM}"),
]

_PALETTES = [("#1d3b53", "#5f8fb4"), ("#3d2f1f", "#c08a4a"), ("#20402c", "#6fa37c"), ("#4a2233", "#c76b86")]


def _illustration(name: str) -> bytes:
    """A quiet abstract picture standing in for a publisher's photo."""
    n = sum(name.encode())
    dark, light = _PALETTES[n % len(_PALETTES)]
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1600 900">'
        f'<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="{light}"/>'
        f'<stop offset="1" stop-color="{dark}"/></linearGradient></defs>'
        '<rect width="1600" height="900" fill="url(#g)"/>'
        f'<circle cx="{1150 + n % 200}" cy="260" r="140" fill="#fff" fill-opacity=".18"/>'
        f'<path d="M0 700 C 400 {560 + n % 90} 900 820 1600 640 V900 H0Z" fill="#000" fill-opacity=".22"/>'
        '<path d="M0 780 C 500 700 1100 900 1600 760 V900 H0Z" fill="#000" fill-opacity=".25"/></svg>'
    ).encode()


class _ImageHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = _illustration(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/svg+xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _PublisherHandler(BaseHTTPRequestHandler):
    """A stand-in for publishers' sites: every article URL answers with a small page."""

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = (
            "<!doctype html><html><head><title>Publisher article</title></head>"
            f"<body><h1 id='publisher-article'>Publisher page for {self.path}</h1></body></html>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass(frozen=True, slots=True)
class RunningSite:
    base_url: str
    fixture: PublishedFixture
    store: LocalStore
    publisher_url: str


@pytest.fixture
def site(tmp_path: Path) -> Iterator[RunningSite]:
    images = ThreadingHTTPServer((LOOPBACK, 0), _ImageHandler)
    threading.Thread(target=images.serve_forever, daemon=True).start()
    publishers = ThreadingHTTPServer((LOOPBACK, 0), _PublisherHandler)
    threading.Thread(target=publishers.serve_forever, daemon=True).start()
    publisher_url = f"http://{LOOPBACK}:{publishers.server_address[1]}"
    store = LocalStore(tmp_path / "store")
    fixture = publish_fixture(
        store, image_base=f"http://{LOOPBACK}:{images.server_address[1]}/img", url_base=publisher_url
    )

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, 0))  # the kernel picks a free port and we keep it: no race
    port = sock.getsockname()[1]
    settings = ServingSettings(
        host=LOOPBACK, port=port, refresh_seconds=0.2, hmac_key=HMAC_KEY,
        profiles_path=str(tmp_path / "profiles.sqlite3"), click_flush_seconds=0.2,
    )
    server = uvicorn.Server(uvicorn.Config(create_app(store, settings), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield RunningSite(f"http://{LOOPBACK}:{port}", fixture, store, publisher_url)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
        images.shutdown()
        images.server_close()
        publishers.shutdown()
        publishers.server_close()


def test_reader_renders_stories_sources_and_full_coverage(site: RunningSite, tmp_path: Path) -> None:
    from playwright.sync_api import Route, expect, sync_playwright

    shots = Path(os.environ.get("NEWSROOM_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    blocked: list[str] = []
    errors: list[str] = []

    def only_loopback(route: Route) -> None:
        if urlsplit(route.request.url).hostname == LOOPBACK:
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
            context.route("**/*", only_loopback)
            page = context.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

            page.goto(f"{site.base_url}/")

            top = site.fixture.pages[("en-US", "top")]
            cards = page.locator("article.story")
            expect(cards).to_have_count(len(top))
            assert len(top) >= 3
            for story, card in zip(top, cards.all(), strict=True):
                expect(card.locator(".headline")).to_have_text(story["title"])
                assert len(story["sources"]) >= 2
                shown = card.locator(".sources .source")
                expect(shown).to_have_count(min(len(story["sources"]), 4))
                for i, source in enumerate(story["sources"][:4]):
                    item = shown.nth(i)
                    expect(item.locator(".publisher")).to_have_text(source["publisher"])
                    expect(item.locator(".source-title")).to_have_text(source["title"])
                    expect(item.locator(".copy-badge")).to_have_count(1 if source["is_copy"] else 0)
                assert card.locator(".headline a").get_attribute("href") == story["sources"][0]["url"]
            expect(page.get_by_text("syndicated copy").first).to_be_visible()
            expect(page.locator(".section-tab[aria-current=page]")).to_have_text("Top stories")
            page.wait_for_function("[...document.images].every((i) => i.complete)")
            page.screenshot(path=str(shots / "reader-front.png"), full_page=True)
            page.set_viewport_size({"width": 390, "height": 844})
            page.screenshot(path=str(shots / "reader-front-mobile.png"), full_page=False)
            page.set_viewport_size({"width": 1280, "height": 900})

            chosen = top[0]
            full = site.fixture.stories_snapshot["stories"][chosen["story_id"]]
            page.locator(f'article.story[data-story-id="{chosen["story_id"]}"] .full-coverage').click()
            expect(page).to_have_url(re.compile(rf"#/story/{chosen['story_id']}$"))
            items = page.locator(".timeline .timeline-item")
            expect(items).to_have_count(len(full["sources"]))
            expect(page.locator(".coverage-title")).to_have_text(full["title"])
            for source, item in zip(full["sources"], items.all(), strict=True):  # oldest first
                expect(item.locator(".timeline-title")).to_have_text(source["title"])
                expect(item.locator(".publisher")).to_have_text(source["publisher"])
            page.wait_for_function("[...document.images].every((i) => i.complete)")
            page.screenshot(path=str(shots / "reader-full-coverage.png"), full_page=True)

            # The same story in another language, linked (not merged) by the pipeline.
            page.goto(f"{site.base_url}/#/story/0196f1c2a3b40003")
            linked = page.locator(".coverage-linked li a")
            expect(linked).to_have_count(1)
            expect(linked).to_have_text("Deutsch · Bahnstreik beendet")
            assert linked.get_attribute("href") == "#/story/0196f1c2a3b4f003"

            page.goto(f"{site.base_url}/#/e/en-US/top")
            expect(page.locator("article.story")).to_have_count(len(top))

            page.locator("#edition-select").select_option("en-GB")
            expect(page.locator("article.story")).to_have_count(len(site.fixture.pages[("en-GB", "top")]))
            page.locator(".section-tab", has_text="Top stories").wait_for()

            page.goto(f"{site.base_url}/#/e/en-US/business")
            expect(page.locator("article.story")).to_have_count(
                len(site.fixture.pages[("en-US", "business")])
            )
        finally:
            browser.close()

    assert blocked == [], "the reader page must not fetch anything from outside"
    assert errors == [], json.dumps(errors)


def test_reader_for_you_follow_hide_new_stories_and_click_through(site: RunningSite, tmp_path: Path) -> None:
    from playwright.sync_api import Route, expect, sync_playwright

    shots = Path(os.environ.get("NEWSROOM_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    blocked: list[str] = []
    errors: list[str] = []

    def only_loopback(route: Route) -> None:
        if urlsplit(route.request.url).hostname == LOOPBACK:
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    top = site.fixture.pages[("en-US", "top")]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
            context.route("**/*", only_loopback)
            page = context.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))

            # An edition, then Full Coverage with publishers, local sources and opinion labels.
            page.goto(f"{site.base_url}/?poll_ms=300#/e/en-US/top")
            expect(page.locator("article.story")).to_have_count(len(top))
            page.locator(f'article.story[data-story-id="{top[0]["story_id"]}"] .full-coverage').click()
            expect(page.locator(".coverage-title")).to_have_text(top[0]["title"])
            expect(page.locator(".coverage-publishers li")).to_have_count(5)
            expect(page.locator(".coverage-local li")).to_have_count(4)  # US publishers for en-US
            expect(page.locator(".timeline .opinion-badge")).to_have_count(1)
            page.locator(".back-link").click()

            # Sign in, open For you.
            page.locator("#reader-name").fill("alice")
            page.locator("#sign-in").click()
            expect(page.locator("#account .who")).to_have_text("Signed in as alice")
            page.locator(".section-tab", has_text="For you").click()
            cards = page.locator(".for-you-grid article.story")
            expect(cards).to_have_count(len(top))

            # Follow a topic: the button flips and the reason names it.
            page.locator('.follow-topic[data-topic="technology"]').click()
            expect(page.locator('.follow-topic[data-topic="technology"]')).to_have_text("Following Technology")
            tech = page.locator('.for-you-grid article.story[data-story-id="0196f1c2a3b40005"]')
            expect(tech.locator(".reason")).to_have_text("Because you follow Technology")

            # Hide a source: it vanishes from For you.
            valley = page.locator('.for-you-grid .source[data-publisher-id="valley-post"]')
            assert valley.count() > 0
            valley.first.locator(".hide-source").click()
            expect(valley).to_have_count(0)
            page.wait_for_function("[...document.images].every((i) => i.complete)")
            page.screenshot(path=str(shots / "reader-for-you.png"), full_page=True)

            # New stories: publish a new version of the front page; the pill appears.
            # Wait until the front page itself is rendered (For you may also lead with top[0]):
            # only then is the shown version the one fetched before the new one is published.
            page.locator(".section-tab", has_text="Top stories").click()
            expect(page.locator(".for-you-grid")).to_have_count(0)
            expect(page.locator("#front .page-heading")).to_have_text("Top stories")
            expect(page.locator("article.story").first).to_have_attribute("data-story-id", top[0]["story_id"])
            now = datetime.now(UTC)
            newer = page_payload("en-US", "top", list(reversed(top)), now)
            assert publish_page(site.store, "en-US", "top", newer, now=now, validate=accept).published
            expect(page.locator("#new-stories")).to_be_visible(timeout=15_000)
            page.screenshot(path=str(shots / "reader-new-stories.png"), full_page=False)
            page.locator("#new-stories").click()
            expect(page.locator("article.story").first).to_have_attribute("data-story-id", top[-1]["story_id"])
            expect(page.locator("#new-stories")).to_be_hidden()

            # Click a story from For you: through /r/{token} to the publisher's page.
            page.locator(".section-tab", has_text="For you").click()
            first = page.locator(".for-you-grid article.story").first
            story_id = first.get_attribute("data-story-id")
            target = first.locator(".headline a").get_attribute("href")
            assert target and target.startswith(site.publisher_url)
            with page.expect_navigation():
                first.locator(".headline a").click()
            expect(page.locator("#publisher-article")).to_be_visible()
            assert page.url == target
            page.screenshot(path=str(shots / "reader-publisher.png"), full_page=False)
        finally:
            browser.close()

    deadline = time.monotonic() + 30  # the replica writes its buffered clicks every 0.2 s
    while not (keys := list_segments(site.store, layout.CLICKS_PREFIX)) and time.monotonic() < deadline:
        time.sleep(0.1)
    rows = read_segments(site.store, keys, CLICKS_SCHEMA).to_pylist()
    assert [(r["story_id"], r["surface"], r["position"]) for r in rows] == [(story_id, "for_you", 0)]
    assert rows[0]["reader_hash"]
    assert blocked == [], "the reader page must not fetch anything from outside"
    assert errors == [], json.dumps(errors)


def _fixed(value: float, digits: int = 2) -> str:
    return f"{value:,.{digits}f}"


def test_why_this_story_shows_the_numbers_of_the_snapshot(site: RunningSite, tmp_path: Path) -> None:
    """Issue 18: every number the "Why this story?" view shows comes from the published page."""
    import math

    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("NEWSROOM_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    published = json.loads(read_live_page(site.store, "en-US", "top").data)
    weights = published["ranking"]
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
            context.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).hostname == LOOPBACK
                          else route.abort())
            page = context.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{site.base_url}/#/e/en-US/top")
            expect(page.locator("article.story")).to_have_count(len(published["stories"]))

            for story in published["stories"]:
                card = page.locator(f'article.story[data-story-id="{story["story_id"]}"]')
                why = card.locator("details.why")
                expect(why.locator("summary")).to_have_text("Why this story?")
                expect(why.locator(".why-body")).to_have_count(0)  # built when opened
                why.locator("summary").click()
                parts = story["score_parts"]

                def value(part: str, card=card) -> str:  # noqa: B023 - used within the iteration
                    return card.locator(f'.why-row[data-part="{part}"] .why-value').inner_text()

                assert value("coverage") == _fixed(parts["coverage"])
                assert value("authority") == _fixed(math.expm1(parts["coverage"]))
                assert value("velocity") == _fixed(parts["velocity"])
                assert value("freshness") == _fixed(parts["freshness"])
                assert value("region") == f"{round(parts['regional_share'] * 100)}%"
                expect(card.locator(".why-rank")).to_have_text(
                    f"#{story['rank']} on Top stories · score {_fixed(story['score'])}")
                breaking = card.locator('.why-row[data-part="breaking"] .why-note')
                if story["is_breaking"]:
                    expect(breaking).to_contain_text("yes, since")
                else:
                    expect(breaking).to_have_text("no")
                cap = card.locator('.why-row[data-part="cap"] .why-note')
                aside = story["representative_choice"]["stepped_aside"]
                if aside:
                    names = {s["publisher_id"]: s["publisher"] for s in story["sources"]}
                    expect(cap).to_have_text(re.compile(rf"^{re.escape(', '.join(names[a] for a in aside))} stepped aside"))
                    expect(cap).to_contain_text(f"{weights['publisher_daily_share_cap']:.0%}")
                else:
                    expect(cap).to_have_text(f"no publisher was held back by the "
                                             f"{weights['publisher_daily_share_cap']:.0%} daily cap")
                expect(card.locator('.why-row[data-part="headline"] .why-note')).to_contain_text(
                    f"chosen from {story['representative_choice']['candidates']} report")
                w_r = weights["regional_weight"]
                factor = 1 - w_r + w_r * parts["regional_share"]
                now = (weights["coverage_weight"] * parts["coverage"] + weights["velocity_weight"] * parts["velocity"]) \
                    * parts["freshness"] ** weights["freshness_weight"]
                formula = card.locator(".why-formula")
                expect(formula).to_contain_text(f"= {_fixed(now)}")
                expect(formula).to_contain_text(f"× region factor {_fixed(factor)} = score {_fixed(story['score'])}")
                if not story["is_breaking"]:
                    expect(formula).to_contain_text(f"averaged over the last {weights['smoothing_cycles']} updates: "
                                                    f"{_fixed(story['score'] / factor)}")
            second = page.locator(f'article.story[data-story-id="{published["stories"][1]["story_id"]}"]')
            second.scroll_into_view_if_needed()
            page.wait_for_function("[...document.images].every((i) => i.complete)")
            second.screenshot(path=str(shots / "reader-why-this-story.png"))
        finally:
            browser.close()
    assert errors == []
