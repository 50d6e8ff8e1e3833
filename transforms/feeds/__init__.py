"""Feeds to records: RSS 0.9x/1.0/2.0, Atom, JSON Feed and Google News sitemaps, one shape for all.

One module per concern, read top-down from :func:`parse_feed`:

* :mod:`~transforms.feeds.parse`: ``parse_feed``, the one entry point: caps, then the format;
* :mod:`~transforms.feeds.sniff`: what kind of document a body is, and the safety gate before any
  XML parser sees it (a size cap, no entity declarations, no DOCTYPE internal subset);
* :mod:`~transforms.feeds.rss_atom`: RSS and Atom, read by feedparser (the correctness
  reference) or, for well-formed RSS 2.0/Atom 1.0, by :mod:`~transforms.feeds.xml_reader`
  (feedparser's element handlers replayed over lxml's tree, the same records, #20);
* :mod:`~transforms.feeds.json_feed` and :mod:`~transforms.feeds.news_sitemap`: the two formats
  feedparser 6.0 does not read;
* :mod:`~transforms.feeds.entry`: the records (``FeedItem``, ``ParsedFeed``), stable guids, one
  item per guid and link, a title for an item without one;
* :mod:`~transforms.feeds.fields`: what every field goes through: HTML to plain text, caps
  (:data:`TITLE_MAX_CHARS`, :data:`SUMMARY_MAX_CHARS`), bylines without e-mail addresses,
  languages as their primary subtag.

The names below are the package's interface; its modules import one another directly.

Pure: no network, no files, no clock.
"""

from __future__ import annotations

from transforms.feeds.entry import (
    FEED_MAX_BYTES,
    FEED_MAX_ITEMS,
    FeedItem,
    ParsedFeed,
    is_plausible_published_at,
)
from transforms.feeds.fields import (
    SUMMARY_MAX_CHARS,
    TITLE_MAX_CHARS,
    author_name,
    normalize_language,
    title_from_summary,
    truncate_title,
)
from transforms.feeds.parse import parse_feed
from transforms.feeds.rss_atom import FeedParserChoice
from transforms.feeds.sniff import extract_mime_type

__all__ = [
    "FEED_MAX_BYTES",
    "FEED_MAX_ITEMS",
    "SUMMARY_MAX_CHARS",
    "TITLE_MAX_CHARS",
    "FeedItem",
    "FeedParserChoice",
    "ParsedFeed",
    "author_name",
    "extract_mime_type",
    "is_plausible_published_at",
    "normalize_language",
    "parse_feed",
    "title_from_summary",
    "truncate_title",
]
