"""Editions in their reader's language (issue 21): the zh-CN and ms-MY pages in a real Chromium.

The browser itself runs in en-US: the page must follow the edition, not the browser. Words, dates
and relative times come from the edition's language; the API's section names stay canonical.
Screenshots go to ``NEWSROOM_SCREENSHOT_DIR`` when it is set (``docs/screenshots/``).
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import uvicorn
from conftest import HMAC_KEY, accept, page_payload, stories_payload

from serving.app import create_app
from serving.settings import ServingSettings
from warehouse.snapshots import publish_page, publish_stories
from warehouse.store import LocalStore

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LOOPBACK = "127.0.0.1"
STATIC = Path(__file__).resolve().parents[2] / "serving" / "static"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Chromium is not installed at {CHROMIUM}"),
]

# (story_id, sections, headline, snippet, [(publisher_id, publisher, headline, minutes ago, is_copy)])
_ZH = [
    ("0196f1c2a3b50001", ["business"], "新加坡第三季度经济增长4.1% 高于预期",
     "贸工部说，制造业和金融服务业带动增长，全年预测上调至3.5%至4%。",
     [("zaobao", "联合早报", "第三季度经济增长4.1%", 40, False),
      ("8world", "8视界", "我国经济第三季度增长高于预期", 55, False),
      ("xinhua", "新华社", "新加坡经济增长超预期", 90, False),
      ("kwongwah", "光华日报", "新加坡经济增长超预期", 85, True)]),
    ("0196f1c2a3b50002", ["world"], "强台风登陆菲律宾北部 数万人紧急疏散",
     "气象部门说，台风中心附近最大风力达每小时185公里，沿海地区发布风暴潮警告。",
     [("xinhua", "新华社", "台风登陆菲律宾北部", 30, False),
      ("zaobao", "联合早报", "菲律宾数万人疏散躲避台风", 65, False)]),
    ("0196f1c2a3b50003", ["technology"], "本地初创公司推出中文语音助手 支持方言识别",
     "这款应用可以识别粤语、闽南语和潮州话，首批用户为乐龄人士。",
     [("8world", "8视界", "初创公司推出方言语音助手", 120, False),
      ("zaobao", "联合早报", "语音助手听得懂方言", 150, False)]),
]
_MS = [
    ("0196f1c2a3b60001", ["business"], "Ringgit dibuka tinggi berbanding dolar AS selepas data eksport kukuh",
     "Penganalisis berkata permintaan terhadap aset serantau meningkat selepas eksport naik 8 peratus.",
     [("bernama", "Bernama", "Ringgit dibuka tinggi berbanding dolar AS", 35, False),
      ("berita-harian", "Berita Harian", "Ringgit mengukuh susulan data eksport", 50, False),
      ("utusan", "Utusan Malaysia", "Ringgit naik, pelabur yakin", 80, False),
      ("kosmo", "Kosmo", "Ringgit dibuka tinggi berbanding dolar AS", 75, True)]),
    ("0196f1c2a3b60002", ["world"], "Taufan kuat landa utara Filipina, puluhan ribu dipindahkan",
     "Agensi cuaca berkata angin berhampiran pusat ribut mencecah 185 kilometer sejam.",
     [("bernama", "Bernama", "Taufan landa utara Filipina", 30, False),
      ("berita-harian", "Berita Harian", "Puluhan ribu dipindahkan akibat taufan", 60, False)]),
    ("0196f1c2a3b60003", ["sports"], "Pasangan beregu negara mara ke final Terbuka Malaysia",
     "Mereka menewaskan pasangan pilihan kedua dalam tiga set di Axiata Arena.",
     [("kosmo", "Kosmo", "Beregu negara mara ke final", 20, False),
      ("utusan", "Utusan Malaysia", "Beregu negara ke final Terbuka Malaysia", 45, False)]),
]
EDITIONS = {"zh-CN": ("zh", _ZH), "ms-MY": ("ms", _MS)}


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _stories(language: str, rows: list[Any], now: datetime) -> list[dict[str, Any]]:
    stories = []
    for rank, (story_id, sections, title, snippet, sources) in enumerate(rows, start=1):
        items = [{"article_id": f"{story_id}-a{i}", "publisher_id": pub_id, "publisher": pub, "title": headline,
                  "url": f"https://{pub_id}.example/news/{story_id}-{i}", "first_seen_at": _iso(now - timedelta(minutes=ago)),
                  "is_copy": is_copy, "is_opinion": False, "region": None}
                 for i, (pub_id, pub, headline, ago, is_copy) in enumerate(sources)]
        seen = sorted(s["first_seen_at"] for s in items)
        stories.append({
            "story_id": story_id, "rank": rank, "score": 3.0 - rank * 0.4, "score_parts": {"coverage": 1.0},
            "title": title, "snippet": snippet, "image_url": None, "sections": sections, "language": language,
            "first_seen_at": seen[0], "updated_at": seen[-1],
            "source_count": sum(not s["is_copy"] for s in items), "article_count": len(items), "sources": items,
        })
    return stories


@dataclass(frozen=True, slots=True)
class Site:
    base_url: str
    pages: dict[tuple[str, str], list[dict[str, Any]]]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    store = LocalStore(tmp_path / "store")
    now = datetime.now(UTC).replace(microsecond=0)
    pages: dict[tuple[str, str], list[dict[str, Any]]] = {}
    snapshot: dict[str, Any] = {}
    for edition, (language, rows) in EDITIONS.items():
        stories = _stories(language, rows, now)
        mine = stories_payload(stories, [edition], now, {})  # each story is listed in its own edition
        snapshot = dict(mine, stories={**snapshot.get("stories", {}), **mine["stories"]})
        pages[(edition, "top")] = stories
        pages[(edition, "business")] = [s for s in stories if "business" in s["sections"]]
    for (edition, section), stories in pages.items():
        assert publish_page(store, edition, section, page_payload(edition, section, stories, now),
                            now=now, validate=accept).published
    assert publish_stories(store, snapshot, now=now, validate=accept).published

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, 0))
    port = sock.getsockname()[1]
    settings = ServingSettings(host=LOOPBACK, port=port, refresh_seconds=0.2, hmac_key=HMAC_KEY,
                               profiles_path=str(tmp_path / "profiles.sqlite3"))
    server = uvicorn.Server(uvicorn.Config(create_app(store, settings), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield Site(f"http://{LOOPBACK}:{port}", pages)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _catalog(language: str) -> dict[str, Any]:
    return json.loads((STATIC / "i18n" / f"{language}.json").read_text(encoding="utf-8"))


def test_every_language_file_has_every_string_of_the_english_one() -> None:
    english = _catalog("en")
    files = sorted((STATIC / "i18n").glob("*.json"))
    assert {f.stem for f in files} >= {"en", "zh", "ms"}
    for path in files:
        catalog = json.loads(path.read_text(encoding="utf-8"))
        assert catalog["language"] == path.stem
        assert set(catalog["strings"]) == set(english["strings"]), path.name
        assert set(catalog["sections"]) == set(english["sections"]), path.name
        for key, value in catalog["strings"].items():
            forms = value.values() if isinstance(value, dict) else [value]
            assert all(isinstance(v, str) and v for v in forms), (path.name, key)
            if isinstance(value, dict):
                assert "other" in value, (path.name, key)


# edition -> what the page must say: (html lang, top tab, business tab, source count of the lead
# story, full coverage link, tagline, a date word, relative-time pattern, Full Coverage strings)
EXPECTED = {
    "zh-CN": {
        "lang": "zh-CN", "top": "头条新闻", "business": "财经", "sources": "3 个来源", "full": "完整报道",
        "tagline": "每个故事的各个侧面，来自各方来源", "date": re.compile(r"\d{4}年\d{1,2}月\d{1,2}日"),
        "relative": re.compile(r"分钟前"), "updated": re.compile(r"更新$"), "back": "← 返回头条",
        "timeline": "时间线", "who": "报道来源", "articles": "4 篇报道", "first_seen": re.compile(r"^首次出现于"),
        "copy": "转载",
    },
    "ms-MY": {
        "lang": "ms-MY", "top": "Berita utama", "business": "Perniagaan", "sources": "3 sumber",
        "full": "Liputan Penuh", "tagline": "Setiap sisi cerita, daripada setiap sumber",
        "date": re.compile(r"(Januari|Februari|Mac|April|Mei|Jun|Julai|Ogos|September|Oktober|November|Disember)"),
        "relative": re.compile(r"lalu"), "updated": re.compile(r"^Dikemas kini "), "back": "← Kembali ke tajuk utama",
        "timeline": "Garis masa", "who": "Siapa yang melaporkannya", "articles": "4 artikel",
        "first_seen": re.compile(r"^Mula dilihat "), "copy": "salinan sindiket",
    },
}


@pytest.mark.parametrize("edition", sorted(EXPECTED))
def test_edition_pages_speak_the_edition_language(site: Site, tmp_path: Path, edition: str) -> None:
    from playwright.sync_api import Route, expect, sync_playwright

    want = EXPECTED[edition]
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

    top = site.pages[(edition, "top")]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
            context.route("**/*", only_loopback)
            page = context.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

            page.goto(f"{site.base_url}/#/e/{edition}/top")
            cards = page.locator("article.story")
            expect(cards).to_have_count(len(top))
            expect(page.locator("html")).to_have_attribute("lang", want["lang"])
            expect(page.locator(".section-tab[aria-current=page]")).to_have_text(want["top"])
            expect(page.locator(".section-tab", has_text=want["business"])).to_have_count(1)
            expect(page.locator("#front .page-heading")).to_have_text(want["top"])
            expect(page.locator(".tagline")).to_have_text(want["tagline"])
            expect(page.locator("#dateline")).to_have_text(want["date"])
            lead = cards.first
            expect(lead.locator(".kicker")).to_have_text(want["business"])
            expect(lead.locator(".source-count")).to_have_text(want["sources"])
            expect(lead.locator(".full-coverage")).to_have_text(want["full"])
            expect(lead.locator(".meta .updated")).to_have_text(want["updated"])
            expect(lead.locator(".source-time").first).to_have_text(want["relative"])
            expect(lead.locator(".copy-badge")).to_have_text(want["copy"])
            expect(lead).to_have_attribute("lang", top[0]["language"])
            body = page.locator("body").inner_text()
            for english in ("Top stories", "Full Coverage", "Sign in", "sources", "Updated", "ago"):
                assert english not in body, f"{english!r} left in English on {edition}"
            page.screenshot(path=str(shots / f"reader-{edition}-front.png"), full_page=True)

            # The API keeps canonical section names; only the page translates them.
            listing = page.request.get(f"{site.base_url}/v1/editions").json()
            mine = next(e for e in listing if e["edition"] == edition)
            assert "business" in mine["sections"] and want["business"] not in mine["sections"]

            lead.locator(".full-coverage").click()
            expect(page).to_have_url(re.compile(rf"#/story/{top[0]['story_id']}$"))
            expect(page.locator(".coverage-title")).to_have_text(top[0]["title"])
            expect(page.locator(".coverage-header .kicker")).to_have_text(want["full"])
            expect(page.locator(".back-link")).to_have_text(want["back"])
            expect(page.locator(".timeline-heading")).to_have_text(want["timeline"])
            expect(page.locator(".coverage-publishers h3")).to_have_text(want["who"])
            expect(page.locator(".coverage-header .article-count")).to_have_text(want["articles"])
            expect(page.locator(".coverage-header .first-seen")).to_have_text(want["first_seen"])
            expect(page.locator(".timeline .timeline-item")).to_have_count(len(top[0]["sources"]))
            body = page.locator("body").inner_text()
            for english in ("Timeline", "Who covered it", "Back to headlines", "Full Coverage", "First seen"):
                assert english not in body, f"{english!r} left in English on {edition} Full Coverage"
            page.screenshot(path=str(shots / f"reader-{edition}-full-coverage.png"), full_page=True)

            # Loaded directly (no edition chosen yet), Full Coverage takes the story's edition.
            page.goto("about:blank")
            page.goto(f"{site.base_url}/#/story/{top[1]['story_id']}")
            expect(page.locator(".timeline-heading")).to_have_text(want["timeline"])
            expect(page.locator("html")).to_have_attribute("lang", want["lang"])

            # Another edition in another language: the chrome follows it.
            page.locator("#edition-select").select_option("zh-CN" if edition == "ms-MY" else "ms-MY")
            other = EXPECTED["zh-CN" if edition == "ms-MY" else "ms-MY"]
            expect(page.locator(".section-tab[aria-current=page]")).to_have_text(other["top"])
            expect(page.locator("html")).to_have_attribute("lang", other["lang"])
        finally:
            browser.close()

    assert blocked == [], "the reader page must not fetch anything from outside"
    assert errors == [], json.dumps(errors)
