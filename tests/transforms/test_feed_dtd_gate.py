"""The XML safety gate of ``parse_feed`` against ways around it, and the caps on parsed text.

The gate used to end a DOCTYPE's internal subset at the first ``]>``, even inside a comment or a
quoted literal, so ``<!-- ]> -->`` hid every entity declaration after it; and feedparser itself
turns ``<!ENTITY>`` lines found before the root element into an internal subset, so a DOCTYPE
without any ``[`` could still declare entities. Each case here reached feedparser before the fix.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from transforms.errors import FeedRejectedError
from transforms.feeds import SUMMARY_MAX_CHARS, TITLE_MAX_CHARS, parse_feed, truncate_title

FEED_URL = "https://news.example/feeds/main.xml"
ITEM = '<item><title>{title}</title><link>https://news.example/1</link></item>'


def _rss(prolog: str, title: str = "&e;", *, declaration: str = '<?xml version="1.0"?>') -> bytes:
    return (f'{declaration}{prolog}<rss version="2.0"><channel><title>t</title>'
            f'{ITEM.format(title=title)}</channel></rss>').encode()


# 1,000 "A"s, then four levels of x10: &e; is 10 MB, &d; 1 MB (reviewer's cases 06 and 06b).
NESTED = '<!ENTITY a "' + "A" * 1000 + '">' + "".join(
    f'<!ENTITY {chr(98 + i)} "' + f"&{chr(97 + i)};" * 10 + '">' for i in range(4))
LINE_ENTITY = '\n<!ENTITY a "' + "A" * 100_000 + '">\n'


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (_rss(f"<!DOCTYPE rss [<!-- ]> -->{NESTED}]>"), "refusing entity expansion"),
        (_rss(f"<!DOCTYPE rss [<!-- ]> -->{NESTED}]>", "&d;" * 6), "refusing entity expansion"),
        (_rss("<!DOCTYPE rss [<!-- ]> --><!ENTITY x SYSTEM \"file:///etc/hostname\">]>", "a&x;b"),
         "external entity (x)"),
        (_rss(f"<!DOCTYPE rss [<!ENTITY q \"]>\">{NESTED}]>"), "refusing entity expansion"),
        (_rss(f"<!DOCTYPE rss [<?pi ]> ?>{NESTED}]>"), "refusing entity expansion"),
        (_rss(f"<!DOCTYPE rss [<!ATTLIST rss x CDATA ']>'>{NESTED}]>"), "refusing entity expansion"),
        # No "[" at all: feedparser builds the subset itself from <!ENTITY> lines before the root.
        (_rss(f"\n<!DOCTYPE rss>{LINE_ENTITY}", "&a;" * 50), "refusing entity expansion"),
        (_rss(f"\n<!DOCTYPE rss>\n<!--{LINE_ENTITY}-->\n", "&a;" * 50), "refusing entity expansion"),
        (_rss(f"\n<!DOCTYPE rss>\n<![CDATA[{LINE_ENTITY}]]>\n", "&a;" * 50), "refusing entity expansion"),
        (_rss(LINE_ENTITY, "&a;" * 50), "refusing entity expansion"),
        (_rss(f'<!DOCTYPE rss PUBLIC "-//X//EN" "x.dtd" [{NESTED}]>'), "refusing entity expansion"),
        (_rss(f"<!DOCTYPE rss [<!-- ]> -->{NESTED}]>").decode().encode("utf-16"), "refusing entity expansion"),
        (_rss(f"<!DOCTYPE rss [<!-- ]> -->{NESTED}]>", declaration=""), "refusing entity expansion"),
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
    body = _rss(f"<!DOCTYPE rss [<!-- ]> -->{NESTED}]>{padding}")
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
        parse_feed(_rss(f"<!DOCTYPE rss [{subset}]>", "plain"), FEED_URL)


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
    feed = parse_feed(_rss(f"\n{doctype}\n", "One"), FEED_URL)
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
        _rss("", LONG_TITLE),
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
