"""``parse_feed``: one body in, one ``ParsedFeed`` out, whatever the format.

It checks the caps, reads the Content-Type once for the gate and the parsers alike, asks
:mod:`transforms.feeds.sniff` what the document is (refusing unsafe XML), and hands it to the
reader of that format.
"""

from __future__ import annotations

from collections.abc import Mapping

from transforms.errors import FeedRejectedError
from transforms.feeds.entry import FEED_MAX_BYTES, FEED_MAX_ITEMS, ParsedFeed
from transforms.feeds.json_feed import parse_json_feed
from transforms.feeds.news_sitemap import parse_news_sitemap
from transforms.feeds.rss_atom import FeedParserChoice, parse_rss_atom
from transforms.feeds.sniff import extract_mime_type, sniff_document


def parse_feed(
    body: bytes,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    max_items: int = FEED_MAX_ITEMS,
    max_bytes: int = FEED_MAX_BYTES,
    parser: FeedParserChoice = "lxml",
) -> ParsedFeed:
    """Parse an RSS, Atom, JSON Feed or Google News sitemap document.

    Args:
        body: The response body, as received (any charset).
        url: The URL the body was fetched from; relative links resolve against it (or against
            ``Content-Location`` and ``xml:base`` when present).
        headers: HTTP response headers, if any; ``Content-Type`` (charset) and
            ``Content-Language`` are used. Keys are case-insensitive.
        max_items: Keep at most this many items (the first ones in the document).
        max_bytes: Refuse bodies larger than this.
        parser: ``"lxml"`` (the default) reads well-formed RSS 2.0 and Atom 1.0 with lxml and
            leaves the rest to feedparser, with the same records (#20); ``"feedparser"`` sends
            every RSS/Atom document to feedparser, the reference.

    Returns:
        The parsed feed. Never raises for malformed input: such feeds come back with
        ``is_malformed=True`` and ``error`` set.

    Raises:
        FeedRejectedError: The body is larger than ``max_bytes``, or (XML) it declares entities
            anywhere or has a DOCTYPE internal subset: entity expansion and external entities
            are refused before any XML parser sees the body.
        ValueError: ``max_items`` or ``max_bytes`` is not positive.

    >>> feed = parse_feed(b'<rss version="2.0"><channel><title>T</title><item><title>A &amp; B</title>'
    ...                   b'<link>/a</link></item></channel></rss>', "https://news.example/feed")
    >>> feed.title, feed.items[0].title, feed.items[0].link, feed.items[0].guid
    ('T', 'A & B', 'https://news.example/a', 'https://news.example/a')
    """
    if max_items < 1:
        raise ValueError(f"max_items must be >= 1, got {max_items}")
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
    if len(body) > max_bytes:
        raise FeedRejectedError(f"body is {len(body):,} bytes, over the {max_bytes:,}-byte cap", url=url)
    http_headers = {k.lower(): v for k, v in (headers or {}).items()}
    if "content-type" in http_headers:
        # One Content-Type for the gate and feedparser alike: of repeated headers (joined by ", ")
        # the gate once took the first charset and feedparser the last. Unparseable says nothing.
        mime_type = extract_mime_type(http_headers["content-type"])
        essence, charset = mime_type or ("", None)
        http_headers["content-type"] = f"{essence}; charset={charset}" if charset else essence
    document = sniff_document(body, url, http_headers.get("content-type", ""))
    if document.format == "json_feed":
        return parse_json_feed(body, url, max_items)
    if document.format == "news_sitemap":
        return parse_news_sitemap(body, url, max_items)
    return parse_rss_atom(body, url, document.text, http_headers, max_items, parser)
