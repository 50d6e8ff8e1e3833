"""The lxml reader against feedparser, its reference (#20): for every captured feed and every case of
feedparser's conformance suite, it either declines or gives the very records feedparser's path gives."""

from __future__ import annotations

import codecs
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from corpus_paths import CORPUS

from replay.corpus import Publisher, ReplayArticle
from replay.render import render_atom, render_rss
from replay.synthetic import SyntheticSite
from transforms.errors import FeedRejectedError
from transforms.feeds import SUMMARY_MAX_CHARS, ParsedFeed, parse_feed
from transforms.feeds import xml_reader as feed_xml
from transforms.feeds.fields import plain_text, truncate_text
from transforms.feeds.xml_reader import Declined, FeedDocument, read_feed_document

REAL_DIR = CORPUS / "feeds" / "real"
CONFORMANCE_DIR = CORPUS / "feeds" / "conformance"
FEED_URL = "https://news.example/feeds/main.xml"


def _conformance_headers(raw: bytes) -> dict[str, str]:
    head = raw[:2048].decode("latin-1")
    return {m.group(1): m.group(2) for m in re.finditer(r"^Header:\s*([\w-]+):[ \t]*(.*?)\s*$", head, re.MULTILINE)}


def _differential(paths: list[Path], url_of: object, headers_of: object) -> tuple[Counter[str], list[str]]:
    """Parse each file both ways; count what the reader took or why it declined; list every difference."""
    seen: list[FeedDocument | Declined] = []
    reader = feed_xml.read_feed_document

    def spy(body: bytes, headers: dict[str, str]) -> FeedDocument | Declined:
        seen.append(reader(body, headers))
        return seen[-1]

    counts: Counter[str] = Counter()
    differences: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("transforms.feeds.rss_atom.read_feed_document", spy)
        for path in paths:
            raw = path.read_bytes()
            url, headers = url_of(path), headers_of(raw)  # type: ignore[operator]
            seen.clear()
            try:
                ours = parse_feed(raw, url, headers=headers)
            except FeedRejectedError:
                counts["refused by the safety gate"] += 1
                continue
            if not seen:
                counts["JSON Feed or sitemap (never XML-read)"] += 1
                continue
            if isinstance(seen[0], Declined):
                counts["declined, " + seen[0].reason.split(":", 1)[0]] += 1
                continue
            counts["taken"] += 1
            reference = parse_feed(raw, url, headers=headers, parser="feedparser")
            if ours != reference:
                differences.append(path.name)
    return counts, differences


def _report(name: str, counts: Counter[str]) -> None:
    print(f"\n{name}: " + ", ".join(f"{n} {why}" for why, n in counts.most_common()))


@pytest.mark.slow
@pytest.mark.skipif(not REAL_DIR.is_dir(), reason=f"feed corpus not found at {REAL_DIR}")
def test_real_feeds_are_declined_or_read_as_feedparser_reads_them() -> None:
    paths = sorted(p for p in REAL_DIR.rglob("*") if p.is_file() and p.name != "LICENSE"
                   and p.suffix not in (".html", ".opml"))
    counts, differences = _differential(paths, lambda _: FEED_URL, lambda _: {})
    _report("captured feeds", counts)
    assert differences == []
    # 261 files: 13 JSON, 248 XML; what is declined is not well-formed, a DOCTYPE, MathML,
    # a Creative Commons or podcast-chapter element, or not UTF-8 as declared.
    assert counts["taken"] >= 210


@pytest.mark.slow
@pytest.mark.skipif(not CONFORMANCE_DIR.is_dir(), reason=f"feed corpus not found at {CONFORMANCE_DIR}")
def test_conformance_cases_are_declined_or_read_as_feedparser_reads_them() -> None:
    paths = sorted(p for p in CONFORMANCE_DIR.rglob("*") if p.is_file() and p.name != "LICENSE")
    counts, differences = _differential(
        paths, lambda p: f"http://127.0.0.1:8097/tests/{p.relative_to(CONFORMANCE_DIR).as_posix()}",
        _conformance_headers)
    _report("conformance cases", counts)
    assert differences == []
    assert counts["taken"] >= 1650  # of 2,107; most declines are the suite's ill-formed cases


def _publisher() -> Publisher:
    return Publisher(publisher_id="p1", name="Daily & Co", host="127.0.1.1", base_url="http://daily.example",
                     region="US", language="en", tier=2, authority=0.5, paywalled=False, section="world",
                     is_wire=False)


def _articles() -> list[ReplayArticle]:
    when = datetime(2026, 12, 2, 11, 0, tzinfo=UTC)
    return [ReplayArticle(article_id=f"a{k}", publisher_id="p1", url=f"http://daily.example/a{k}",
                          title=f"Tom & Jerry <{k}>", text="Body text. " * 30, language="en", published_at=when,
                          event="e", reprint_of=None, edits=(), feed_url=f"http://daily.example/a{k}?utm=x",
                          section="world" if k == 0 else None)
            for k in range(3)]


def _replay_feeds() -> list[tuple[str, bytes]]:
    publisher, articles = _publisher(), _articles()
    when = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    _, synthetic = SyntheticSite(hosts=1, feeds_per_host=1, changed_share=1.0, items_per_feed=5).document(0, 0)
    return [("rss", render_rss(publisher, articles, when, hub_url="http://hub.example/")),
            ("atom", render_atom(publisher, articles, when, hub_url="http://hub.example/")),
            ("synthetic", synthetic)]


@pytest.mark.parametrize(("kind", "body"), _replay_feeds(), ids=lambda v: v if isinstance(v, str) else "")
def test_the_feeds_the_demo_and_benches_serve_are_read_by_lxml(kind: str, body: bytes) -> None:
    document = read_feed_document(body, {"content-type": "application/rss+xml; charset=utf-8"})
    assert isinstance(document, FeedDocument), document
    ours = parse_feed(body, FEED_URL, headers={"Content-Type": "application/rss+xml; charset=utf-8"})
    assert ours == parse_feed(body, FEED_URL, headers={"Content-Type": "application/rss+xml; charset=utf-8"},
                              parser="feedparser")
    assert ours.items and not ours.is_malformed


ATOM = '<feed xmlns="http://www.w3.org/2005/Atom"><title>T</title>{}</feed>'
RSS = '<rss version="2.0"><channel><title>T</title>{}</channel></rss>'


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'<rss version="2.0"><channel><item><title>a & b</title></item></channel></rss>', "not well-formed"),
        (b'<rss version="2.0"><channel><item><title>&nbsp;</title></item></channel></rss>', "not well-formed"),
        (b'<?xml version="1.0"?>\n<!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" "x.dtd">'
         b'<rss version="0.91"><channel><item><title>x</title></item></channel></rss>', "DOCTYPE"),
        (b"<opml><body/></opml>", "root element: <opml>"),
        (RSS.format("<item><description>a <div>b</div></description></item>").encode(), "markup in a text field: <div>"),
        (RSS.format("<item><title>a <title>b</title></title></item>").encode(), "markup in a text field: <title>"),
        (RSS.format('<item><georss:point xmlns:georss="http://www.georss.org/georss">1 2</georss:point>'
                    "</item>").encode(), "not replayed: <georss:point>"),
        (b'<?xml version="1.0" encoding="utf-8"?>' + RSS.format("<item><title>caf\xe9</title></item>")
         .encode("latin-1"), "encoding: does not decode as utf-8"),
        ('<?xml version="1.0" encoding="utf-16"?>'.encode("utf-16") + RSS.format("").encode("utf-16")[2:],
         "encoding: not ASCII-compatible"),
    ],
    ids=["bare-ampersand", "html-entity", "doctype", "not-a-feed", "div-in-description", "title-in-title", "georss",
         "wrong-charset", "utf-16"],
)
def test_what_the_reader_declines(body: bytes, reason: str) -> None:
    result = read_feed_document(body, {})
    assert isinstance(result, Declined) and reason in result.reason, result
    # feedparser still reads it, as before the reader existed
    assert parse_feed(body, FEED_URL) == parse_feed(body, FEED_URL, parser="feedparser")


@pytest.mark.parametrize(
    "body",
    [
        # Atom XHTML text: the <div> unwrapped, the markup turned into text
        ATOM.format('<entry><id>urn:1</id><title type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">A <b>bold'
                    '</b> &amp; <i>new</i> title</div></title><link href="/a"/>'
                    '<content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml"><p>One</p><p>Two</p></div>'
                    "</content></entry>"),
        # xml:base on the feed and the entry, relative links and ids
        '<feed xmlns="http://www.w3.org/2005/Atom" xml:base="http://a.example/x/"><title>T</title>'
        '<entry xml:base="y/"><id>3</id><link href="z"/><title>t</title></entry></feed>',
        # raw HTML elements in an RSS description: written back as markup, then turned into text
        RSS.format("<item><title>x</title><description>a <p class='c'>b &amp; <b>c</b></p> d</description></item>"),
        # RSS: an escaped-HTML title, a CDATA title that is not markup, authors with e-mail addresses
        RSS.format("<item><title>Never trust &lt;script&gt; tags</title><author>jane@x.example (Jane)</author>"
                   "<guid isPermaLink='false'>g1</guid></item>"
                   "<item><title><![CDATA[If a<b and b>c]]></title><link>http://x.example/2?a=1&amp;b=2</link>"
                   "<dc:creator xmlns:dc='http://purl.org/dc/elements/1.1/'>Ann</dc:creator></item>"),
        # a description and a content:encoded, in both orders; media, enclosure and itunes images
        RSS.format("<item xmlns:content='http://purl.org/rss/1.0/modules/content/'><title>1</title>"
                   "<description>short</description><content:encoded>&lt;p&gt;long&lt;/p&gt;</content:encoded></item>"
                   "<item xmlns:content='http://purl.org/rss/1.0/modules/content/'><title>2</title>"
                   "<content:encoded>&lt;p&gt;long&lt;/p&gt;</content:encoded><description>short</description></item>"
                   "<item xmlns:media='http://search.yahoo.com/mrss/'><title>3</title>"
                   "<media:content url='http://x.example/i.jpg' medium='image'><media:title>m</media:title>"
                   "</media:content><enclosure url='http://x.example/e.png' type='image/png'/></item>"),
        # RSS 1.0 (RDF), dates of every kind feedparser reads, and mojibake it repairs
        '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/"><channel rdf:about="http://x.example/"><title>R</title>'
        '</channel><item rdf:about="http://x.example/1"><title>caf\u00c3\u00a9</title><dc:date>2026-12-02T10:00:00+01:00'
        "</dc:date></item><item rdf:about='http://x.example/2'><title>two</title><dc:date>Wed, 02 Dec 2026 "
        "10:00:00 EST</dc:date></item></rdf:RDF>",
    ],
    ids=["atom-xhtml", "xml-base", "html-in-description", "rss-titles-authors", "rss-summary-content-media", "rdf-dates-mojibake"],
)
def test_read_as_feedparser_reads_it(body: str) -> None:
    raw = body.encode()
    assert isinstance(read_feed_document(raw, {}), FeedDocument)
    ours = parse_feed(raw, FEED_URL)
    assert isinstance(ours, ParsedFeed) and ours.items
    assert ours == parse_feed(raw, FEED_URL, parser="feedparser")


def _summaries(paths: list[Path]) -> list[str]:
    import io

    import feedparser

    values = []
    for path in paths:
        result = feedparser.parse(io.BytesIO(path.read_bytes()), resolve_relative_uris=False, sanitize_html=False)
        for entry in result.entries:
            values += [entry.get("summary") or ""] + [c.get("value") or "" for c in entry.get("content") or []]
    return [v for v in values if v]


@pytest.mark.slow
@pytest.mark.skipif(not REAL_DIR.is_dir(), reason=f"feed corpus not found at {REAL_DIR}")
def test_a_summary_read_from_a_prefix_of_its_html_is_the_summary_of_the_whole() -> None:
    paths = sorted(p for p in REAL_DIR.rglob("*.xml") if p.is_file())
    summaries = _summaries(paths)
    assert len(summaries) > 2000
    cut_short = 0
    for value in summaries:
        whole = plain_text(value)
        assert truncate_text(plain_text(value, keep_chars=SUMMARY_MAX_CHARS), SUMMARY_MAX_CHARS) == truncate_text(
            whole, SUMMARY_MAX_CHARS)
        cut_short += len(whole) > SUMMARY_MAX_CHARS
    assert cut_short > 300  # the prefix path is taken, not only the whole-text one


ONE_ITEM = '<rss version="2.0"><channel><title>T</title><item><title>{}</title><link>/a</link></item></channel></rss>'


def _declared(encoding: str, title: str) -> str:
    return f'<?xml version="1.0" encoding="{encoding}"?>\n' + ONE_ITEM.format(title)


@pytest.mark.parametrize(
    ("body", "headers", "outcome", "title"),
    [
        # byte order marks: UTF-8's is dropped (and wins over a declaration, as feedparser lets it);
        # UTF-16's and EBCDIC's documents are not ASCII-compatible, so feedparser reads them
        (codecs.BOM_UTF8 + _declared("utf-8", "café €").encode(), {}, "taken", "café €"),
        (codecs.BOM_UTF8 + ONE_ITEM.format("café €").encode(), {}, "taken", "café €"),
        (codecs.BOM_UTF8 + _declared("iso-8859-1", "café").encode(), {}, "taken", "café"),
        (codecs.BOM_UTF8 + _declared("utf-8", "café").encode(), {"Content-Type": "application/xml; charset=iso-8859-1"},
         "taken", "café"),
        (_declared("utf-16", "café").encode("utf-16"), {}, "not ASCII-compatible", "café"),
        (_declared("utf-16", "café").encode("utf-16-le"), {}, "does not decode as utf-8", "café"),
        (_declared("cp037", "cafe").encode("cp037"), {}, "not ASCII-compatible", "cafe"),
        # declared charsets, in the XML declaration or the header (RFC 3023: the header wins for XML types)
        (_declared("windows-1252", "“café” €").encode("cp1252"), {}, "taken", "“café” €"),
        (_declared("iso-8859-1", "café").encode("latin-1"), {"Content-Type": "application/rss+xml; charset=ISO-8859-1"},
         "taken", "café"),
        (_declared("iso-8859-1", "café €").encode(), {"Content-Type": "application/rss+xml; charset=utf-8"},
         "taken", "café €"),
        (_declared("gb2312", "新闻").encode("gb18030"), {}, "taken", "新闻"),
        (_declared("koi8-r", "новости").encode("koi8-r"), {}, "taken", "новости"),
        (_declared("x-no-such", "cafe").encode(), {}, "does not decode as x-no-such", "cafe"),
        # text/xml without a charset is us-ascii (RFC 3023 section 3.1), whatever the document declares
        (_declared("utf-8", "cafe").encode(), {"Content-Type": "text/xml"}, "taken", "cafe"),
        (_declared("utf-8", "café").encode(), {"Content-Type": "text/xml"}, "does not decode as us-ascii", "café"),
        # headers without a Content-Type: iso-8859-1 unless declared; UTF-8 so read is repaired as feedparser does
        (ONE_ITEM.format("café").encode("latin-1"), {"Server": "x"}, "taken", "café"),
        (ONE_ITEM.format("café").encode(), {"Server": "x"}, "taken", "café"),
        # a declared charset that lies: UTF-8 bytes under iso-8859-1 decode (and are repaired);
        # cp1252 bytes under utf-8, by the declaration or by the header, do not
        (_declared("iso-8859-1", "café").encode(), {}, "taken", "café"),
        (_declared("utf-8", "“café”").encode("cp1252"), {}, "does not decode as utf-8", "“café”"),
        (_declared("iso-8859-1", "café").encode("latin-1"), {"Content-Type": "application/rss+xml; charset=utf-8"},
         "does not decode as utf-8", "café"),
        (_declared("utf-16", "cafe").encode(), {}, "utf-16 is not ASCII-compatible", "cafe"),
    ],
    ids=["bom-utf8", "bom-utf8-undeclared", "bom-utf8-declared-latin1", "bom-utf8-header-latin1", "bom-utf16",
         "utf16le-without-bom", "ebcdic", "declared-cp1252", "header-latin1", "header-utf8-over-declaration",
         "declared-gb2312", "declared-koi8r", "unknown-charset", "text-xml-ascii", "text-xml-not-ascii",
         "no-content-type-latin1", "no-content-type-utf8", "lie-latin1-is-utf8", "lie-utf8-is-cp1252",
         "lie-header-utf8-is-latin1", "lie-utf16-is-ascii"],
)
def test_charsets_are_read_as_feedparser_reads_them(
        body: bytes, headers: dict[str, str], outcome: str, title: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way a feed names (or misnames) its charset: the reader takes the document only when it
    decodes as feedparser's rules say, and either way the records are feedparser's."""
    seen: list[FeedDocument | Declined] = []
    reader = feed_xml.read_feed_document
    monkeypatch.setattr("transforms.feeds.rss_atom.read_feed_document", lambda b, h: seen.append(reader(b, h)) or seen[-1])
    ours = parse_feed(body, FEED_URL, headers=headers)
    assert len(seen) == 1
    if outcome == "taken":
        assert isinstance(seen[0], FeedDocument), seen[0]
    else:
        assert isinstance(seen[0], Declined) and outcome in seen[0].reason, seen[0]
    assert [item.title for item in ours.items] == [title]
    assert ours == parse_feed(body, FEED_URL, headers=headers, parser="feedparser")
