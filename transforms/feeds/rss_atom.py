"""RSS 0.9x/1.0/2.0 and Atom to records: lxml's reader for well-formed feeds, feedparser for the rest.

feedparser is the correctness reference: it recovers from broken XML, wrong charsets and odd date
formats. :mod:`transforms.feeds.xml_reader` gives the same ``feed`` and ``entries`` for plain,
well-formed RSS 2.0/Atom 1.0 at a fraction of the cost (#20), and both go through the same
normalisation here. Also the channel fields feedparser does not read: ``skipHours``/``skipDays``
and WebSub hub/self links. feedparser is given a file-like object, never a string, because it
treats a string (and even ``bytes``) as a URL or a file name to open.
"""

from __future__ import annotations

import calendar
import io
import re
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urljoin

import feedparser

from transforms.canonical_url import absolute_http_url
from transforms.feeds.entry import FeedItem, ParsedFeed, empty_feed, finish_items, item_guid
from transforms.feeds.fields import (
    CONTROL_CHARS_RE,
    PLAIN_TEXT_MAX_INPUT_CHARS,
    SUMMARY_MAX_CHARS,
    author_name,
    byline,
    normalize_language,
    plain_line,
    plain_text,
    truncate_text,
    truncate_title,
    unique_texts,
)
from transforms.feeds.xml_reader import FeedDocument, read_feed_document
from transforms.text import normalize_whitespace

FeedParserChoice = Literal["lxml", "feedparser"]
"""``lxml``: well-formed RSS 2.0/Atom 1.0 read by :mod:`transforms.feeds.xml_reader`, feedparser for the rest;
``feedparser``: feedparser for every RSS/Atom document (the reference the lxml reader is tested against)."""
DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_HOUR_RE = re.compile(r"<hour\b[^>]*>\s*(\d{1,2})\s*</hour\s*>", re.IGNORECASE)
_DAY_RE = re.compile(r"<day\b[^>]*>\s*([A-Za-z]+)\s*</day\s*>", re.IGNORECASE)
_ISO_FIELDS_RE = re.compile(r"\s*-?\d{4}-(\d{1,2})-(\d{1,2})(?:[Tt ](\d{1,2}):(\d{1,2}))?")
_IMAGE_EXT_RE = re.compile(r"\.(?:jpe?g|png|gif|webp|avif)(?:$|[?#])", re.IGNORECASE)


def parse_rss_atom(
    body: bytes, url: str, text: str, http_headers: dict[str, str], max_items: int, parser: FeedParserChoice
) -> ParsedFeed:
    # Relative links resolve against Content-Location (itself maybe relative), else the URL.
    # feedparser is not told the base: it would also "resolve" guids such as "12345" into
    # URLs, which would make item keys change whenever the feed moves. It still applies
    # xml:base; we resolve what remains relative.
    base = urljoin(url, http_headers.get("content-location", "")) or url
    response_headers = {k: v for k, v in http_headers.items() if k != "content-location"}
    if text[:1] != "\ufeff" and body[:1].isspace():
        # Whitespace before "<?xml" is a common server bug that sends expat to feedparser's
        # slower, lossier fallback parser; the declaration is meant to be at the start.
        stripped = body.lstrip(b" \t\r\n")
        if stripped.startswith(b"<?xml"):
            body = stripped
    if parser == "lxml":
        # Well-formed RSS 2.0 / Atom 1.0: the entries feedparser would give, read from lxml's tree
        # (#20); anything the reader is not sure of goes to feedparser below.
        document = read_feed_document(body, response_headers)
        if isinstance(document, FeedDocument):
            return _feed_from_entries(document.version, document.feed, document.entries, base, text, http_headers,
                                      max_items, is_malformed=False, error=None)
    try:
        result = feedparser.parse(
            io.BytesIO(body),
            response_headers=response_headers,
            resolve_relative_uris=False,  # we keep plain text only; links are resolved below
            sanitize_html=False,  # script/style are dropped by our own HTML-to-text
        )
    except Exception as e:  # feedparser promises not to raise; record it if it does
        return empty_feed(is_malformed=True, error=f"parser crashed: {type(e).__name__}: {e}")

    bozo_exception = result.get("bozo_exception")
    # A missing or non-XML Content-Type says nothing about the document itself; feedparser
    # flags it anyway (and any later, real problem replaces it as bozo_exception).
    is_malformed = bool(result.get("bozo")) and not isinstance(bozo_exception, feedparser.NonXMLContentType)
    error = _describe_bozo(bozo_exception) if is_malformed else None
    entries: list[Mapping[str, Any]] = list(result.get("entries", []))
    if not result.get("version") and not entries:
        is_malformed = True
        error = error or "not a recognised feed format (no RSS, Atom or RDF root element)"
    return _feed_from_entries(str(result.get("version") or ""), result.get("feed", {}), entries, base, text,
                              http_headers, max_items, is_malformed=is_malformed, error=error)


def _feed_from_entries(
    version: str, feed: Mapping[str, Any], entries: Iterable[Mapping[str, Any]], base: str, text: str,
    http_headers: Mapping[str, str], max_items: int, *, is_malformed: bool, error: str | None,
) -> ParsedFeed:
    """The records of feedparser's ``feed`` and ``entries`` (or the lxml reader's, which has the same shape)."""
    language = normalize_language(feed.get("language") or http_headers.get("content-language"))
    # RFC 4287 §4.2.1: an Atom entry without an author has the feed's authors. An RSS channel's
    # managingEditor is not the author of its items, so only Atom feeds pass theirs down.
    feed_authors = _entry_authors(feed) if version.startswith("atom") else ()
    items = finish_items((_feed_entry_to_item(e, base, language, feed_authors) for e in entries), max_items)
    links: list[Mapping[str, Any]] = [link for link in feed.get("links", []) if isinstance(link, Mapping)]
    return ParsedFeed(
        title=truncate_title(_detail_text(feed.get("title"), feed.get("title_detail"))) or None,
        link=absolute_http_url(feed.get("link"), base),
        language=language,
        items=items,
        ttl_minutes=_positive_int(feed.get("ttl")),
        skip_hours=_skip_hours(text),
        skip_days=_skip_days(text),
        hub_url=_link_with_rel(links, "hub", base),
        self_url=_link_with_rel(links, "self", base),
        is_malformed=is_malformed,
        error=error,
    )


def _feed_entry_to_item(entry: Mapping[str, Any], base: str, feed_language: str | None,
                        feed_authors: tuple[str, ...] = ()) -> FeedItem:
    # The guid hashes the whole title, the item keeps a headline.
    full_title = _detail_text(entry.get("title"), entry.get("title_detail"))
    summary_html = entry.get("summary")
    if not summary_html:
        content = entry.get("content") or []
        summary_html = content[0].get("value") if content and isinstance(content[0], Mapping) else None
    link = absolute_http_url(entry.get("link"), base)
    published_at = _entry_date(entry, "published") or _entry_date(entry, "created")
    updated_at = _entry_date(entry, "updated")
    title_detail = entry.get("title_detail")
    item_language = title_detail.get("language") if isinstance(title_detail, Mapping) else None
    raw_published = str(entry.get("published") or entry.get("updated") or "")
    return FeedItem(
        guid=item_guid(entry.get("id"), link, full_title, raw_published, summary_html),
        link=link,
        title=truncate_title(full_title),
        summary=truncate_text(plain_text(summary_html, keep_chars=SUMMARY_MAX_CHARS), SUMMARY_MAX_CHARS),
        published_at=published_at or updated_at,
        updated_at=updated_at,
        categories=unique_texts(
            plain_line(tag.get("term") or tag.get("label"))
            for tag in entry.get("tags") or []
            if isinstance(tag, Mapping)
        ),
        author=byline(_entry_authors(entry) or feed_authors),
        image_url=_entry_image(entry, base),
        language=normalize_language(item_language) or feed_language,
    )


def _detail_text(value: object, detail: object) -> str:
    """A title as text: decoded by the XML parser, never stripped as markup unless declared markup.

    feedparser marks a title ``text/plain`` unless it holds (or declares, Atom ``type="html"``
    and ``"xhtml"``) markup: ``Never trust &lt;script&gt; tags`` and CDATA ``If a<b and b>c then``
    are plain text and keep every character (#16). Only a title feedparser reads as HTML is turned
    into text the way a summary is.
    """
    kind = detail.get("type") if isinstance(detail, Mapping) else None
    if kind == "text/plain" and isinstance(value, str):
        return normalize_whitespace(CONTROL_CHARS_RE.sub(" ", value[:PLAIN_TEXT_MAX_INPUT_CHARS]))
    return plain_text(value)


def _entry_authors(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """Every author of an entry, by name (feedparser keeps them all in ``authors``; ``author`` is the last)."""
    authors = [a for a in entry.get("authors") or [] if isinstance(a, Mapping)]
    names = [author_name(a.get("name")) for a in authors]
    if not any(names) and isinstance(entry.get("author"), str):
        names = [author_name(entry["author"])]
    return unique_texts(names)


def _entry_image(entry: Mapping[str, Any], base: str) -> str | None:
    """media:content (images), media:thumbnail, image enclosures, then itunes:image."""
    candidates: list[Any] = []
    for media in entry.get("media_content") or []:
        if not isinstance(media, Mapping):
            continue
        kind = str(media.get("medium") or media.get("type") or "")
        if kind.startswith("image") or (not kind and _IMAGE_EXT_RE.search(str(media.get("url") or ""))):
            candidates.append(media.get("url"))
    candidates += [t.get("url") for t in entry.get("media_thumbnail") or [] if isinstance(t, Mapping)]
    candidates += [
        e.get("href")
        for e in entry.get("enclosures") or []
        if isinstance(e, Mapping) and str(e.get("type") or "").startswith("image")
    ]
    image = entry.get("image")
    if isinstance(image, Mapping):
        candidates.append(image.get("href") or image.get("url"))
    for candidate in candidates:
        resolved = absolute_http_url(candidate, base)
        if resolved:
            return resolved
    return None


def _describe_bozo(exception: object) -> str:
    if exception is None:
        return "feed is not well-formed"
    name = type(exception).__name__
    message = normalize_whitespace(str(exception))
    return f"{name}: {message}" if message else name


def _link_with_rel(links: Iterable[Mapping[str, Any]], rel: str, base: str) -> str | None:
    for link in links:
        rels = str(link.get("rel") or "").lower().split()
        if rel in rels:
            resolved = absolute_http_url(link.get("href"), base)
            if resolved:
                return resolved
    return None


def _skip_hours(text: str) -> frozenset[int]:
    """RSS 2.0 ``<skipHours>``: hours 0-23 (GMT); 24 is read as midnight, as some feeds write it."""
    hours = {int(v) for v in _HOUR_RE.findall(_first_block(text, "skiphours"))}
    return frozenset(h % 24 for h in hours if 0 <= h <= 24)


def _skip_days(text: str) -> frozenset[str]:
    """RSS 2.0 ``<skipDays>``: English day names, case-insensitive; others are dropped."""
    names = {v.capitalize() for v in _DAY_RE.findall(_first_block(text, "skipdays"))}
    return frozenset(names & set(DAY_NAMES))


def _first_block(text: str, tag: str) -> str:
    """Text between the first ``<tag`` and the next ``</tag`` (any case); ``""`` if absent.

    Plain ``find`` rather than a lazy regex, which would go quadratic on a body full of
    unclosed opening tags.
    """
    start = re.search(f"<{tag}", text, re.IGNORECASE)
    if start is None:
        return ""
    end = re.compile(f"</{tag}", re.IGNORECASE).search(text, start.end())
    return text[start.start() : end.start() if end else start.end() + 4096]


def _positive_int(value: object) -> int | None:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _entry_date(entry: Mapping[str, Any], key: str) -> datetime | None:
    """feedparser's parsed date for ``key``, or ``None`` if missing or out of range.

    feedparser's W3C-DTF handler normalises out-of-range fields the way ``mktime`` does
    (month 13 becomes January of the next year); such a date is garbage, not a date.
    """
    raw = entry.get(key)
    if isinstance(raw, str):
        match = _ISO_FIELDS_RE.match(raw)
        if match:
            month, day = int(match.group(1)), int(match.group(2))
            hour, minute = int(match.group(3) or 0), int(match.group(4) or 0)
            if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 24 and minute <= 59):
                return None
    return _struct_to_datetime(entry.get(f"{key}_parsed"))


def _struct_to_datetime(value: object) -> datetime | None:
    """feedparser's UTC ``struct_time`` to an aware datetime; ``None`` for anything invalid."""
    if not isinstance(value, time.struct_time):
        return None
    try:
        seconds = calendar.timegm(value)
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, ValueError, OSError):
        return None
