"""Google News sitemaps (``<urlset>`` with ``news:news``) to records; feedparser 6.0 does not read them."""

from __future__ import annotations

from xml.etree.ElementTree import Element, ParseError

import defusedxml.ElementTree
from defusedxml import DefusedXmlException

from transforms.canonical_url import absolute_http_url
from transforms.errors import FeedRejectedError
from transforms.feeds.entry import FeedItem, ParsedFeed, empty_feed, finish_items
from transforms.feeds.fields import normalize_language, plain_line, truncate_title, unique_texts
from transforms.text import normalize_whitespace
from transforms.times import parse_stated_datetime


def parse_news_sitemap(body: bytes, url: str, max_items: int) -> ParsedFeed:
    """``<urlset>`` with ``<news:news>`` entries (Google News sitemap); other URLs are skipped."""
    try:
        root = defusedxml.ElementTree.fromstring(body)
    except DefusedXmlException as e:
        raise FeedRejectedError(f"sitemap uses forbidden XML features: {e}", url=url) from e
    except (ParseError, ValueError) as e:
        return empty_feed(is_malformed=True, error=f"ParseError: {e}")

    items: list[FeedItem] = []
    publication: str | None = None
    feed_language: str | None = None
    for entry in root:
        if _local(entry.tag) != "url":
            continue
        news = _child(entry, "news")
        loc = absolute_http_url(_child_text(entry, "loc"), url)
        if news is None or loc is None:
            continue
        pub = _child(news, "publication")
        language = normalize_language(_child_text(pub, "language")) if pub is not None else None
        publication = (
            publication or (plain_line(_child_text(pub, "name")) if pub is not None else None) or None
        )
        feed_language = feed_language or language
        image = _child(entry, "image")
        keywords = (_child_text(news, "keywords") or "").split(",")
        items.append(
            FeedItem(
                guid=loc,
                link=loc,
                title=plain_line(_child_text(news, "title")),
                summary="",
                published_at=parse_stated_datetime(_child_text(news, "publication_date")),
                updated_at=parse_stated_datetime(_child_text(entry, "lastmod")),
                categories=unique_texts(truncate_title(normalize_whitespace(k)) for k in keywords),
                author=None,
                image_url=absolute_http_url(_child_text(image, "loc"), url) if image is not None else None,
                language=language,
            )
        )
    return ParsedFeed(title=publication, link=None, language=feed_language, items=finish_items(items, max_items))


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""


def _child(element: Element | None, name: str) -> Element | None:
    if element is None:
        return None
    for child in element:
        if _local(child.tag) == name:
            return child
    return None


def _child_text(element: Element | None, name: str) -> str | None:
    child = _child(element, name)
    return child.text.strip() if child is not None and child.text else None
