"""Feed fields are text: titles keep every character, one guid never hides several items, bylines
keep every author and never an e-mail address (#16). Cases from feedparser's conformance suite where
it has one, else the examples the other projects' suites found."""

from __future__ import annotations

import json

import pytest
from corpus_paths import CORPUS

from transforms.feeds import parse_feed

FEED_URL = "https://news.example/feed"
CONFORMANCE = CORPUS / "feeds" / "conformance" / "wellformed"


def _rss(items: str, channel: str = "") -> bytes:
    return f'<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><channel>{channel}{items}</channel></rss>'.encode()


def _json(items: list[dict[str, object]], **feed: object) -> bytes:
    return json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "J", "items": items, **feed}).encode()


@pytest.mark.parametrize(
    ("body", "title"),
    [
        (_json([{"id": "1", "url": "https://n.example/1", "title": "Why <div> soup is bad"}]), "Why <div> soup is bad"),
        (_json([{"id": "1", "url": "https://n.example/1", "title": "AT&amp;T &lt;3 R&D"}]), "AT&T <3 R&D"),
        (_rss("<item><title>Never trust &lt;script&gt; tags</title><link>https://n.example/1</link></item>"),
         "Never trust <script> tags"),
        (_rss("<item><title><![CDATA[If a<b and b>c then]]></title><link>https://n.example/1</link></item>"),
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
    assert parse_feed(body, FEED_URL).items[0].title == title


@pytest.mark.parametrize(
    ("body", "title"),
    [
        ((CONFORMANCE / "rss" / "channel_title_lt.xml").read_bytes(), "1 < 2"),
        (_json([], title="Soup & <div>s"), "Soup & <div>s"),
    ],
    ids=["conformance-rss-channel-lt", "json-feed"],
)
def test_a_feed_title_is_text(body: bytes, title: str) -> None:
    assert parse_feed(body, FEED_URL).title == title


def test_a_json_feed_summary_is_text() -> None:
    body = _json([{"id": "1", "url": "https://n.example/1", "title": "t", "summary": "Use <div> for blocks"}])
    assert parse_feed(body, FEED_URL).items[0].summary == "Use <div> for blocks"


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
    feed = parse_feed(_rss(items), FEED_URL)
    assert [i.title for i in feed.items] == ["One", "Two"]
    assert len({i.guid for i in feed.items}) == 2
    assert [i.guid for i in parse_feed(_rss(items), FEED_URL).items] == [i.guid for i in feed.items]  # stable


def test_json_items_sharing_an_id_are_not_collapsed() -> None:
    body = _json([{"id": "x", "url": "https://n.example/1", "title": "One"},
                  {"id": "x", "url": "https://n.example/2", "title": "Two"}])
    assert [i.title for i in parse_feed(body, FEED_URL).items] == ["One", "Two"]


def test_the_same_item_twice_is_kept_once() -> None:
    item = "<item><guid isPermaLink='false'>g</guid><title>One</title><link>https://n.example/1</link></item>"
    assert len(parse_feed(_rss(item * 2), FEED_URL).items) == 1


@pytest.mark.parametrize(
    ("body", "author"),
    [
        (_rss("<item><title>t</title><author>Jane Doe (mailto:jane@example.com)</author></item>"), "Jane Doe"),
        (_rss("<item><title>t</title><author>jane@example.com (Jane Doe)</author></item>"), "Jane Doe"),
        (_rss("<item><title>t</title><author>jane@example.com</author></item>"), None),
        (_rss("<item><title>t</title><dc:creator>Ann A</dc:creator><dc:creator>Bob B</dc:creator></item>"),
         "Ann A, Bob B"),
        (b'<feed xmlns="http://www.w3.org/2005/Atom"><author><name>Desk</name></author>'
         b"<entry><title>t</title></entry></feed>", "Desk"),
        (b'<feed xmlns="http://www.w3.org/2005/Atom"><author><name>Desk</name></author><entry><title>t</title>'
         b"<author><name>A</name></author><author><name>B</name><email>b@x.org</email></author></entry></feed>", "A, B"),
        (_rss("<item><title>t</title></item>", channel="<managingEditor>ed@x.org (Ed)</managingEditor>"), None),
        (_json([{"id": "1", "title": "t", "authors": [{"name": "A"}, {"name": "B"}]}]), "A, B"),
        (_json([{"id": "1", "title": "t"}], authors=[{"name": "Desk"}]), "Desk"),
        ((CONFORMANCE / "atom10" / "entry_authors_name.xml").read_bytes(), "one, two"),
    ],
    ids=["rss-name-mailto", "rss-email-name", "rss-email-only", "dc-creators", "atom-feed-author",
         "atom-two-authors", "rss-channel-editor-not-inherited", "json-two-authors", "json-feed-author",
         "conformance-atom-authors"],
)
def test_authors(body: bytes, author: str | None) -> None:
    item = parse_feed(body, FEED_URL).items[0]
    assert item.author == author
    assert "@" not in (item.author or "")  # an e-mail address is personal data: never kept


@pytest.mark.parametrize("meta", ["Jane Doe (mailto:jane@example.com)", "jane@example.com (Jane Doe)"])
def test_a_page_byline_keeps_the_name_not_the_address(meta: str) -> None:
    from transforms.extraction import extract_page

    page = extract_page(f'<html><head><meta name="author" content="{meta}"><title>T</title></head>'
                        "<body><p>text</p></body></html>", "https://n.example/a")
    assert page.author == "Jane Doe"
