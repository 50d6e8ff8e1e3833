"""The replay site over real loopback HTTP: schedule, feeds, pages, validators, robots and admin."""

from __future__ import annotations

import csv
import io
import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import urllib.robotparser
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from html.parser import HTMLParser
from pathlib import Path

import feedparser
import pytest
from corpus_paths import CLUSTERING_CORPORA

from replay.corpus import EDITS, TRACKING_QUERY, build_publishers, build_schedule, load_corpus
from replay.site import PUBLISHERS_CSV_COLUMNS, ClockError, ReplaySite

pytestmark = pytest.mark.integration

CORPORA = CLUSTERING_CORPORA
START = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
SEED = 7
LIMIT = 160

# No proxy, even if the environment names one: everything here is loopback.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with _OPENER.open(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _post_json(url: str, payload: object) -> tuple[int, object]:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with _OPENER.open(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _new_site(seed: int = SEED, limit: int | None = LIMIT, speed: float | None = None) -> ReplaySite:
    return ReplaySite.from_corpora(CORPORA, seed=seed, start=START, limit=limit, speed=speed)


@pytest.fixture
def site() -> Iterator[ReplaySite]:
    s = _new_site()
    s.start(port=0)
    try:
        yield s
    finally:
        s.stop()


def _fetch_all_feeds(s: ReplaySite) -> dict[str, bytes]:
    feeds = {}
    for p in s.publishers:
        for url in (p.rss_url, p.atom_url):
            status, _, body = _get(url)
            assert status == 200
            feeds[url] = body
    return feeds


def test_same_seed_gives_identical_schedule_and_feed_bytes() -> None:
    first = _new_site()
    first.start(port=0)
    try:
        port = first.port
        first.set_clock(START + timedelta(hours=4))
        schedule, feeds = first.articles, _fetch_all_feeds(first)
    finally:
        first.stop()
    second = _new_site()
    second.start(port=port)
    try:
        second.set_clock(START + timedelta(hours=4))
        assert second.articles == schedule
        assert _fetch_all_feeds(second) == feeds
    finally:
        second.stop()
    assert any(b"<item>" in body for body in feeds.values())


def test_schedule_ignores_line_order_and_depends_on_seed() -> None:
    corpus = load_corpus(CORPORA)
    publishers = build_publishers(SEED, 8000, {a.language for a in corpus})
    forward = build_schedule(corpus, publishers, seed=SEED, start=START)
    backward = build_schedule(list(reversed(corpus)), publishers, seed=SEED, start=START)
    other_seed = build_schedule(corpus, publishers, seed=SEED + 1, start=START)
    assert forward == backward
    assert [a.published_at for a in forward] != [a.published_at for a in other_seed]
    assert [(a.published_at, a.article_id) for a in forward] == sorted(
        (a.published_at, a.article_id) for a in forward
    )


def test_events_arrive_as_multi_source_bursts_within_the_span() -> None:
    corpus = load_corpus(CORPORA)
    publishers = build_publishers(SEED, 8000, {a.language for a in corpus})
    schedule = build_schedule(corpus, publishers, seed=SEED, start=START, span_hours=6.0)
    originals = [a for a in schedule if a.reprint_of is None]
    assert len(originals) == len(corpus)
    assert all(START <= a.published_at < START + timedelta(hours=6, minutes=90) for a in originals)
    first_hour = [a for a in schedule if a.published_at < START + timedelta(hours=1)]
    sources_per_event: dict[str, set[str]] = {}
    for a in first_hour:
        sources_per_event.setdefault(a.event, set()).add(a.publisher_id)
    assert any(len(sources) > 1 for sources in sources_per_event.values())


def test_article_is_404_before_release_and_200_after(site: ReplaySite) -> None:
    article = next(a for a in site.articles if a.published_at > site.now)
    assert _get(article.url)[0] == 404
    site.set_clock(article.published_at - timedelta(seconds=1))
    assert _get(article.url)[0] == 404
    site.set_clock(article.published_at)
    status, headers, body = _get(article.url)
    assert status == 200
    assert headers["Content-Type"].startswith("text/html")
    assert f'<link rel="canonical" href="{article.url}">'.encode() in body


def test_rss_and_atom_parse_and_link_to_pages(site: ReplaySite) -> None:
    site.set_clock(START + timedelta(hours=8))
    busiest = sorted(site.publishers, key=lambda p: -len(site.released(p.publisher_id)))[:2]
    for publisher in busiest:
        released = site.released(publisher.publisher_id)
        expected = [a.article_id for a in reversed(released)][:50]
        by_url = {a.url: a for a in released}
        for url in (publisher.rss_url, publisher.atom_url):
            status, headers, body = _get(url)
            assert status == 200
            parsed = feedparser.parse(body)
            assert not parsed.bozo, parsed.get("bozo_exception")
            assert parsed.version in ("rss20", "atom10")
            assert [by_url[e.id].article_id for e in parsed.entries] == expected
            for entry in parsed.entries[:10]:
                article = by_url[entry.id]
                assert entry.link == article.feed_url
                assert entry.title == article.title
                # An item names a section only where the corpus gives one (issue 33).
                assert [t.term for t in entry.get("tags", [])] == ([article.section] if article.section else [])
                assert _get(entry.link)[0] == 200
        rss = _get(publisher.rss_url)[2].decode()
        assert ("<ttl>" not in rss) if publisher.tier == 1 else ("<ttl>5</ttl>" in rss)
        assert f'<atom:link href="{publisher.rss_url}" rel="self"' in rss
    tracked = [a for a in site.articles if a.feed_url != a.url]
    assert tracked and all(a.feed_url == f"{a.url}?{TRACKING_QUERY}" for a in tracked)


def test_etag_and_last_modified_give_304_until_a_new_release(site: ReplaySite) -> None:
    publisher = site.publishers[0]
    pid = publisher.publisher_id
    site.set_clock(site.released(pid, START + timedelta(hours=3))[-1].published_at)
    status, headers, body = _get(publisher.rss_url)
    assert status == 200 and body
    etag, last_modified = headers["ETag"], headers["Last-Modified"]
    assert re.fullmatch(r'"[0-9a-f]+"', etag)

    status, headers, body = _get(publisher.rss_url, {"If-None-Match": etag})
    assert (status, body, headers["ETag"]) == (304, b"", etag)
    status, _, body = _get(publisher.rss_url, {"If-Modified-Since": last_modified})
    assert (status, body) == (304, b"")
    earlier = format_datetime(site.released(pid)[-1].published_at - timedelta(minutes=1), usegmt=True)
    assert _get(publisher.rss_url, {"If-Modified-Since": earlier})[0] == 200
    # If-None-Match wins over If-Modified-Since (RFC 9110 13.1.3).
    assert _get(publisher.rss_url, {"If-None-Match": '"stale"', "If-Modified-Since": last_modified})[0] == 200

    # Time passing without a release changes nothing; a release changes the ETag.
    following = next(a for a in site.articles if a.publisher_id == pid and a.published_at > site.now)
    site.set_clock(following.published_at - timedelta(seconds=1))
    assert _get(publisher.rss_url, {"If-None-Match": etag})[0] == 304
    site.set_clock(following.published_at)
    status, headers, body = _get(publisher.rss_url, {"If-None-Match": etag})
    assert status == 200 and headers["ETag"] != etag
    assert following.title.encode() in body or following.url.encode() in body

    status, headers, _ = _get(following.url)
    assert _get(following.url, {"If-None-Match": headers["ETag"]})[0] == 304
    assert _get(following.url, {"If-Modified-Since": headers["Last-Modified"]})[0] == 304


def test_a_corpus_line_that_files_its_article_names_that_section_and_its_reprints_too(tmp_path: Path) -> None:
    lines = [{"id": f"g{i}", "title": f"Stocks slide on weak data {i}", "text": "Body. " * 80, "language": "en",
              "event": "e1", "category": "b"} for i in range(4)]
    lines += [{"id": "x1", "title": "Quake hits coast", "text": "Body. " * 80, "language": "en", "event": "e2"}]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    corpus = load_corpus([path])
    assert {a.article_id: a.section for a in corpus} == {"g0": "business", "g1": "business", "g2": "business",
                                                         "g3": "business", "x1": None}
    publishers = build_publishers(SEED, 8080)
    assert all(p.section is None for p in publishers)
    schedule = build_schedule(corpus, publishers, seed=SEED, start=START, span_hours=6)
    assert all(a.section == ("business" if a.event == "e1" else None) for a in schedule)


def test_reprints_carry_their_edits_at_another_publisher() -> None:
    corpus = load_corpus(CORPORA)
    publishers = build_publishers(SEED, 8000, {a.language for a in corpus})
    by_pub = {p.publisher_id: p for p in publishers}
    schedule = build_schedule(corpus, publishers, seed=SEED, start=START)
    by_id = {a.article_id: a for a in schedule}
    reprints = [a for a in schedule if a.reprint_of is not None]
    share = len({a.reprint_of for a in reprints}) / len(corpus)
    assert 0.10 <= share <= 0.20
    seen_edits: set[str] = set()
    for copy in reprints:
        original = by_id[copy.reprint_of]
        assert original.reprint_of is None and not original.edits
        assert re.fullmatch(re.escape(original.article_id) + r"~r[1-3]", copy.article_id)
        assert copy.publisher_id != original.publisher_id
        assert by_pub[copy.publisher_id].language == original.language == copy.language
        assert copy.event == original.event
        assert timedelta(minutes=5) <= copy.published_at - original.published_at <= timedelta(minutes=60)
        assert copy.edits and set(copy.edits) <= set(EDITS)
        seen_edits.update(copy.edits)
        origin_name = by_pub[original.publisher_id].name
        assert (copy.title != original.title) == ("headline" in copy.edits)
        assert copy.text.startswith(original.text) != ("dateline" in copy.edits)
        if "dateline" in copy.edits:
            assert origin_name in copy.text.split(original.text[:40])[0]
        assert copy.text.endswith(original.text) != ("footer" in copy.edits)
        if "footer" in copy.edits:
            assert origin_name in copy.text.splitlines()[-1]
    assert seen_edits == set(EDITS)
    wires = [p for p in publishers if p.is_wire]
    assert len(wires) == 2 and all(p.language == "en" for p in wires)
    assert any(by_pub[by_id[c.reprint_of].publisher_id].is_wire for c in reprints)


def test_reprint_page_is_served_at_its_own_publisher(site: ReplaySite) -> None:
    copy = next(a for a in site.articles if a.reprint_of is not None)
    original = next(a for a in site.articles if a.article_id == copy.reprint_of)
    site.set_clock(copy.published_at)
    status, _, body = _get(copy.url)
    assert status == 200
    assert copy.url.split("/")[2] != original.url.split("/")[2]
    assert _get(original.url)[0] == 200


def test_robots_txt_per_host(site: ReplaySite) -> None:
    site.set_clock(START + timedelta(hours=8))
    for publisher in site.publishers:
        status, headers, body = _get(f"{publisher.base_url}/robots.txt")
        assert status == 200 and headers["Content-Type"].startswith("text/plain")
        text = body.decode()
        assert f"Sitemap: {publisher.base_url}/sitemap.xml" in text
        parser = urllib.robotparser.RobotFileParser()
        parser.parse(text.splitlines())
        assert not parser.can_fetch("newsroom", f"{publisher.base_url}/private/x.html")
        article = next((a for a in site.released(publisher.publisher_id)), None)
        if article is not None:
            assert parser.can_fetch("newsroom", article.url)
    hosts = {p.host for p in site.publishers}
    assert len(hosts) == len(site.publishers) and all(h.startswith("127.0.1.") for h in hosts)


def test_clock_admin_endpoints(site: ReplaySite) -> None:
    clock_url = f"{site.control_url}/_replay/clock"
    status, _, raw = _get(clock_url)
    assert status == 200 and datetime.fromisoformat(json.loads(raw)["now"]) == START
    later = START + timedelta(hours=1)
    assert _post_json(clock_url, {"now": "2026-12-02T07:00:00Z"}) == (200, {"now": later.isoformat()})
    assert site.now == later
    status, body = _post_json(clock_url, {"now": "2026-12-02T06:30:00Z"})
    assert status == 409 and site.now == later
    assert _post_json(clock_url, {"when": "x"})[0] == 400
    with pytest.raises(ClockError):
        site.set_clock(START)


def test_speed_clock_runs() -> None:
    s = _new_site(limit=20, speed=3600.0)
    s.start(port=0)
    try:
        first = s.now
        assert first >= START
        assert _get(f"{s.control_url}/_replay/clock")[0] == 200
        time.sleep(0.05)
        assert s.now > first
        s.set_clock(START + timedelta(days=1))
        assert s.now >= START + timedelta(days=1)
    finally:
        s.stop()


class _HeadParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.meta: dict[str, str] = {}
        self.links: dict[str, str] = {}
        self.json_ld: list[str] = []
        self.html_lang = ""
        self.paragraphs = 0
        self._in_ld = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "html":
            self.html_lang = a.get("lang", "")
        elif tag == "meta" and "property" in a:
            self.meta[a["property"]] = a.get("content", "")
        elif tag == "link" and "rel" in a:
            self.links.setdefault(a["rel"], a.get("href", ""))
        elif tag == "script" and a.get("type") == "application/ld+json":
            self._in_ld = True
            self.json_ld.append("")
        elif tag == "p":
            self.paragraphs += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_ld = False

    def handle_data(self, data: str) -> None:
        if self._in_ld:
            self.json_ld[-1] += data


def test_page_has_canonical_og_tags_and_json_ld(site: ReplaySite) -> None:
    site.set_clock(START + timedelta(hours=8))
    tracked = next(a for a in site.articles if a.feed_url != a.url and a.published_at <= site.now)
    zh = next((a for a in site.articles if a.language == "zh" and a.published_at <= site.now), None)
    for article in [tracked] + ([zh] if zh else []):
        status, _, body = _get(article.feed_url)
        assert status == 200
        page = _HeadParser()
        page.feed(body.decode())
        assert page.html_lang == article.language
        assert page.links["canonical"] == article.url  # clean, even when fetched with utm_ params
        assert page.meta["og:url"] == article.url
        assert page.meta["og:title"] == article.title
        assert page.meta["og:image"].startswith(article.url.rsplit("/articles/", 1)[0] + "/img/")
        assert page.meta["og:description"]
        assert page.meta["article:published_time"] == article.published_at.isoformat().replace("+00:00", "Z")
        ld = json.loads(page.json_ld[0])
        assert ld["@type"] == "NewsArticle"
        assert ld["headline"] == article.title
        assert ld["mainEntityOfPage"]["@id"] == article.url
        assert ld["inLanguage"] == article.language
        assert ld["datePublished"] == page.meta["article:published_time"]
        assert ld["author"] and ld["publisher"]["name"]
        # The demo's corpora file no article under a section: its pages name none (issue 33).
        assert article.section is None and "articleSection" not in ld and "article:section" not in page.meta
        assert page.paragraphs >= 2
        for boilerplate in (
            b'class="related"',
            b'class="newsletter"',
            b'class="cookie-banner"',
            b"&copy;",
            b'class="breadcrumbs"',
            b"<article",
            b"<h1>",
            b"<time datetime=",
        ):
            assert boilerplate in body


def test_publishers_csv_and_json(site: ReplaySite) -> None:
    status, headers, body = _get(f"{site.control_url}/_replay/publishers.csv")
    assert status == 200 and headers["Content-Type"].startswith("text/csv")
    reader = csv.DictReader(io.StringIO(body.decode()))
    assert tuple(reader.fieldnames or ()) == PUBLISHERS_CSV_COLUMNS
    rows = list(reader)
    assert len(rows) == len(site.publishers) >= 18
    assert len({r["domain"] for r in rows}) == len(rows)
    for row in rows:
        assert row["domain"] == row["base_url"].removeprefix("http://")
        assert row["feed_url"] == row["base_url"] + "/feeds/rss.xml"
        assert re.fullmatch(r"[A-Z]{2}", row["region"]) and row["tier"] in ("1", "2")
        assert 0.0 <= float(row["authority"]) <= 1.0
        assert row["section"] == ""  # a replayed feed carries every section: it is registered under none
    regions = {(r["language"], r["region"]) for r in rows}
    assert {("en", "US"), ("en", "GB"), ("en", "SG"), ("ms", "MY")} <= regions
    assert ("zh", "SG") in regions or ("zh", "CN") in regions
    assert sum(r["paywalled"] == "true" for r in rows) >= 2
    published = json.loads(_get(f"{site.control_url}/_replay/publishers")[2])
    assert [p["publisher_id"] for p in published] == [r["publisher_id"] for r in rows]
    assert all(p["feeds"]["atom"].endswith("/feeds/atom.xml") for p in published)


def test_unknown_paths_and_stats(site: ReplaySite) -> None:
    publisher = site.publishers[0]
    assert _get(f"{publisher.base_url}/nope")[0] == 404
    assert _get(f"{publisher.base_url}/articles/nope.html")[0] == 404
    assert _get(f"{site.control_url}/nope")[0] == 404
    _get(f"{publisher.base_url}/robots.txt")
    _get(publisher.rss_url)
    _get(publisher.atom_url)
    stats = json.loads(_get(f"{site.control_url}/_replay/stats")[2])
    counts = stats["hosts"][publisher.publisher_id]
    assert (counts["feed"], counts["robots"], counts["not_found"], counts["page"]) == (2, 1, 2, 0)
    assert stats["total"] == 5


def test_cli_prints_listening_line_and_exits_on_sigterm() -> None:
    args = [sys.executable, "-m", "replay", "--limit", "30", "--seed", "3", "--start", "2026-12-02T06:00:00Z"]
    for path in CORPORA:
        args += ["--corpus", str(path)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.fullmatch(r"replay listening control=(http://127\.0\.0\.1:\d+) publishers=(\d+)\n", line)
        assert match, line
        assert int(match.group(2)) >= 18
        assert _get(f"{match.group(1)}/_replay/clock")[0] == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
