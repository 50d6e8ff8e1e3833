"""Feed normaliser: RSS 0.9x/1.0/2.0, Atom, JSON Feed and Google News sitemaps to one shape.

feedparser does the RSS/Atom work (it is the correctness reference: it recovers from broken
XML, wrong charsets and odd date formats). This module adds what feedparser leaves to us:

* a safety gate before any XML parser sees the body: a size cap, and refusal of any entity
  declaration anywhere in the document and of any DOCTYPE internal subset (billion laughs,
  external entities / XXE);
* one flat, typed record per item with plain-text title/summary, absolute http(s) links, UTC
  datetimes, a stable ``guid`` and an image URL; titles, authors and categories are capped at
  :data:`TITLE_MAX_CHARS` and summaries at :data:`SUMMARY_MAX_CHARS`, whatever a parser expands;
* titles are text: a title that is not markup (RSS ``&lt;script&gt;``, CDATA ``a<b``, every JSON
  Feed title) keeps every character, and only declared or detected HTML is turned into text;
* one guid shared by items with different links names several items, each kept (``_dedupe_items``);
* an item without a title is titled with the first words of its summary (``title_from_summary``);
* bylines keep every author (an Atom or JSON Feed entry without one has the feed's) and never an
  e-mail address: an address is personal data and no reader needs it (``author_name``);
* the channel fields feedparser does not read: ``skipHours``/``skipDays``; WebSub hub/self
  links; news sitemaps (``<urlset>`` with ``news:news``) and JSON Feed, which feedparser 6.0
  does not parse.

Pure: no network, no files, no clock. feedparser is given a file-like object, never a string,
because it treats a string (and even ``bytes``) as a URL or a file name to open.
"""

from __future__ import annotations

import calendar
import dataclasses
import hashlib
import html
import io
import itertools
import json
import re
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any, Literal
from urllib.parse import urljoin
from xml.etree.ElementTree import Element, ParseError

import defusedxml.ElementTree
import feedparser
from defusedxml import DefusedXmlException

from transforms.canonical_url import absolute_http_url
from transforms.errors import FeedRejectedError
from transforms.feeds.xml_reader import FeedDocument, read_feed_document
from transforms.text import declared_xml_encoding, normalize_whitespace
from transforms.times import parse_stated_datetime

FEED_MAX_BYTES = 10 * 1024 * 1024
FEED_MAX_ITEMS = 500
SUMMARY_MAX_CHARS = 1_000
# A headline, never a body (licensing: we keep a headline and a short snippet). Also the cap on
# the other one-line fields (feed title, author, category).
TITLE_MAX_CHARS = 300
PLAIN_TEXT_MAX_INPUT_CHARS = 64 * 1024
UNTITLED_TITLE_MAX_CHARS = 100
"""An item without a title is titled with at most this many characters of its summary."""
_PREFIX_CHARS_PER_KEPT_CHAR = 4
_PREFIX_MARGIN_CHARS = 256
ELLIPSIS = "\u2026"
# A publication time before the web had news sites, or more than a day after we first saw the
# article, is a CMS default (1900, 1970), a placeholder (9999) or a wrong time zone gone far: it is
# not used for discovery lag, polling rates or ranking (#16); the claim is kept on its own.
EARLIEST_PUBLISHED_AT = datetime(1995, 1, 1, tzinfo=UTC)
PUBLISHED_FUTURE_SLACK = timedelta(days=1)
FeedParserChoice = Literal["lxml", "feedparser"]
"""``lxml``: well-formed RSS 2.0/Atom 1.0 read by :mod:`transforms.feeds.xml_reader`, feedparser for the rest;
``feedparser``: feedparser for every RSS/Atom document (the reference the lxml reader is tested against)."""
DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_MARKUP_PROBE = "<!DOCTYPE x [<!ENTITY % y SYSTEM 'z'>]>"
# A declaration up to its internal subset ("[") or its end: name and quoted external ids.
_DECLARATION_HEAD_RE = re.compile(r"""<!(?:[^\[>"']+|"[^"]*"|'[^']*')*""")
_DOCTYPE_HEAD_RE = re.compile(r"""<!DOCTYPE(?:[^\[>"']+|"[^"]*"|'[^']*')*""", re.IGNORECASE)
_ENTITY_OPEN_RE = re.compile(r"<!ENTITY", re.IGNORECASE)
# Name and the keyword after it: an external entity names SYSTEM/PUBLIC right after its name,
# an internal one a quoted value. Bounded, so the scan stays linear whatever follows.
_ENTITY_DECL_RE = re.compile(r"""<!ENTITY\s+(%\s+)?([^\s<>"'%&]{1,100})""", re.IGNORECASE)
_EXTERNAL_ENTITY_RE = re.compile(r"""<!ENTITY\s+(?:%\s+)?[^\s<>"'%&]{1,100}\s+(?:SYSTEM|PUBLIC)\b""", re.IGNORECASE)
_ENTITY_NAMES_SHOWN = 5
_ENTITY_DECLS_READ = 64
_SUBSET_END_RE = re.compile(r"\]\s*>")
_CHARSET_RE = re.compile(r"""charset\s*=\s*["']?([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_HTTP_WHITESPACE = " \t\r\n"
_HTTP_TOKEN_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_LANGUAGE_SEPARATOR_RE = re.compile(r"[\s_,;-]+")
_LANGUAGE_CODE_RE = re.compile(r"[a-z]{2,3}")
# One value of a comma-separated header: a comma inside a quoted string does not end it.
_HEADER_VALUE_RE = re.compile(r"""(?:"(?:[^"\\]|\\.)*"?|[^,"])*""")
# One ";"-separated MIME type parameter: a name, then "=" and either a quoted string (anything
# after its closing quote is dropped) or a plain value up to the next ";" (WHATWG MIME Sniffing).
_MIME_PARAMETER_RE = re.compile(r"""([^;=]*)(?:=[ \t\r\n]*(?:"((?:[^"\\]|\\.)*)"?)?([^;]*))?;?""")
_ROOT_RE = re.compile(r"<(?![?!])([A-Za-z_][\w.:-]*)")
_HOUR_RE = re.compile(r"<hour\b[^>]*>\s*(\d{1,2})\s*</hour\s*>", re.IGNORECASE)
_DAY_RE = re.compile(r"<day\b[^>]*>\s*([A-Za-z]+)\s*</day\s*>", re.IGNORECASE)
_ISO_FIELDS_RE = re.compile(r"\s*-?\d{4}-(\d{1,2})-(\d{1,2})(?:[Tt ](\d{1,2}):(\d{1,2}))?")
_IMAGE_EXT_RE = re.compile(r"\.(?:jpe?g|png|gif|webp|avif)(?:$|[?#])", re.IGNORECASE)
_EMAIL_RE = re.compile(r"(?:mailto:)?[^\s()<>\[\],;:\"]+@[^\s()<>\[\],;:\"]+\.[^\s()<>\[\],;:\"]+", re.IGNORECASE)
_MAILTO_RE = re.compile(r"\bmailto:", re.IGNORECASE)
_EMPTY_BRACKETS_RE = re.compile(r"\(\s*\)|<\s*>|\[\s*\]")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SKIPPED_HTML_TAGS = frozenset({"script", "style", "noscript", "template", "head", "title"})
_BLOCK_HTML_TAGS = frozenset(
    {"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "td", "th",
     "blockquote", "pre", "section", "article", "header", "footer", "figure", "figcaption", "hr",
     "table", "dd", "dt"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class FeedItem:
    """One entry of a feed, normalised.

    ``guid`` is the stable key within a feed: the entry's id/guid, else its link, else a hash
    of title and published date. ``published_at`` falls back to the updated date when the item
    has no published date (common in Atom). All datetimes are timezone-aware UTC.
    """

    guid: str
    link: str | None
    title: str
    summary: str
    published_at: datetime | None
    updated_at: datetime | None
    categories: tuple[str, ...]
    author: str | None
    image_url: str | None
    language: str | None


@dataclass(frozen=True, slots=True)
class ParsedFeed:
    """A parsed feed document: channel fields and up to ``max_items`` items in document order.

    ``is_malformed`` is feedparser's "bozo" flag (not well-formed XML, a charset that had to be
    overridden, not a feed at all); ``error`` then says why. A malformed feed may still carry
    items, which are usable.
    """

    title: str | None
    link: str | None
    language: str | None
    items: tuple[FeedItem, ...]
    ttl_minutes: int | None
    skip_hours: frozenset[int]
    skip_days: frozenset[str]
    hub_url: str | None
    self_url: str | None
    is_malformed: bool
    error: str | None


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
    texts = _sniff_texts(body, http_headers.get("content-type", ""))
    text = texts[0]
    if text.lstrip("\ufeff \t\r\n").startswith("{"):
        # JSON never reaches an XML parser: markup quoted in its strings is only text.
        return _parse_json_feed(body, url, max_items)
    for sniffed in texts:
        reason = _unsafe_dtd_reason(sniffed)
        if reason is not None:
            raise FeedRejectedError(reason, url=url)
    root = _root_element_name(text)
    if root in ("urlset", "sitemapindex"):
        return _parse_news_sitemap(body, url, max_items)
    return _parse_rss_atom(body, url, text, http_headers, max_items, parser)


def extract_mime_type(content_type: str | None) -> tuple[str, str | None] | None:
    """The MIME type a Content-Type header value stands for: its essence and charset.

    Repeated Content-Type headers arrive joined by ", " (httpx, RFC 9110 §5.3). They are read
    as browsers read them (WHATWG Fetch "extract a MIME type"): the last value that parses wins,
    and keeps the charset of an earlier one only while the essence stays the same. Unlike
    WHATWG, whitespace around "=" and a single-quoted charset are tolerated, as servers send them.

    Args:
        content_type: The header value, e.g. ``text/html; charset=windows-1251``.

    Returns:
        ``(essence, charset)``: the essence lowercased, the charset unquoted as sent (None when
        there is none, or when it is not a token, as no encoding label is); None when no value
        parses.

    >>> extract_mime_type("text/html; charset=windows-1251, text/html")
    ('text/html', 'windows-1251')
    >>> extract_mime_type("text/plain; charset=windows-1251, text/html")
    ('text/html', None)
    >>> extract_mime_type("nonsense") is None
    True
    """
    mime_type: tuple[str, str | None] | None = None
    charset: str | None = None
    for value in _split_header_values(content_type or ""):
        parsed = _parse_mime_type(value)
        if parsed is None or parsed[0] == "*/*":
            continue
        if mime_type is None or parsed[0] != mime_type[0]:
            mime_type = parsed
            charset = parsed[1]
        else:
            mime_type = (parsed[0], parsed[1] or charset)
    return mime_type


def _split_header_values(value: str) -> list[str]:
    """WHATWG "get, decode, and split": the comma-separated values of a header, trimmed."""
    values: list[str] = []
    pos = 0
    while pos <= len(value):
        match = _HEADER_VALUE_RE.match(value, pos)
        assert match is not None  # the pattern matches the empty string
        values.append(match.group().strip(" \t"))
        pos = match.end() + 1  # past the comma
    return values


def _parse_mime_type(value: str) -> tuple[str, str | None] | None:
    """Essence and charset of one MIME type (WHATWG "parse a MIME type"); None if it does not parse."""
    essence, _, parameters = value.partition(";")
    kind, slash, subtype = essence.strip(_HTTP_WHITESPACE).partition("/")
    if not (slash and _HTTP_TOKEN_RE.fullmatch(kind) and _HTTP_TOKEN_RE.fullmatch(subtype)):
        return None
    pos = 0
    while pos < len(parameters):
        match = _MIME_PARAMETER_RE.match(parameters, pos)
        assert match is not None  # the pattern matches the empty string
        pos = match.end()
        name, quoted, plain = match.groups()
        if plain is None or name.strip(_HTTP_WHITESPACE).lower() != "charset":
            continue
        charset = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else plain.strip(_HTTP_WHITESPACE)
        charset = charset.strip("'")
        if charset:  # the first non-empty charset parameter counts
            return f"{kind}/{subtype}".lower(), charset if _HTTP_TOKEN_RE.fullmatch(charset) else None
    return f"{kind}/{subtype}".lower(), None


# --- safety gate ---------------------------------------------------------------------------


def _sniff_texts(body: bytes, content_type: str) -> list[str]:
    """The body decoded for scanning markup: by BOM/NUL pattern, else latin-1.

    Also decoded with any declared encoding (HTTP charset or XML declaration) that is not
    ASCII-compatible (UTF-7, UTF-16...), so that markup cannot hide from the scan behind an
    encoding that feedparser would decode.
    """
    head = body[:4]
    if head.startswith((b"\x00\x00\xfe\xff", b"\x00\x00\x00<")):
        encoding = "utf-32-be"
    elif head.startswith((b"\xff\xfe\x00\x00", b"<\x00\x00\x00")):
        encoding = "utf-32-le"
    elif head.startswith((b"\xfe\xff", b"\x00<", b"\x00\n", b"\x00 ")):
        encoding = "utf-16-be"
    elif head.startswith((b"\xff\xfe", b"<\x00", b"\n\x00", b" \x00")):
        encoding = "utf-16-le"
    elif head.startswith(b"\x4c\x6f\xa7\x94"):  # "<?xm" in EBCDIC
        encoding = "cp037"
    else:
        encoding = "latin-1"
    texts = [body.decode(encoding, "replace")]
    charset = _CHARSET_RE.search(content_type)
    declared = (declared_xml_encoding(texts[0][:1024]), charset.group(1) if charset else None)
    for name in {d.lower() for d in declared if d}:
        try:
            if _MARKUP_PROBE.encode(name) == _MARKUP_PROBE.encode("ascii"):
                continue  # ASCII-compatible: markup bytes read the same in the first text
            texts.append(body.decode(name, "replace"))
        except (LookupError, UnicodeError, ValueError, TypeError):
            continue  # unknown or unusable codec: feedparser cannot use it either
    return texts


def _unsafe_dtd_reason(text: str) -> str | None:
    """Why a document must be refused before parsing (entities, an internal subset), or ``None``.

    Two rules, each a plain linear scan that needs no notion of where a DOCTYPE, comment or
    literal ends, so nothing in the document can hide a declaration from it:

    * any ``<!ENTITY`` anywhere is refused. Tracking the end of the internal subset is not
      enough: it once ended at the first ``]>``, even inside ``<!-- ]> -->``, and feedparser
      itself gathers ``<!ENTITY`` lines found before the root element into a new internal
      subset (``sanitizer.replace_doctype``), so a DOCTYPE without ``[`` can declare entities.
      A feed never needs one; one quoted raw in a CDATA section is refused too, a rare loss.
    * any DOCTYPE with an internal subset is refused, entities or not: no feed in the captured
      corpus or in feedparser's conformance suite has one except the two that declare entities.

    A DOCTYPE without an internal subset (RSS 0.91's Netscape DTD) is fine: feedparser never
    fetches external DTDs. Every DOCTYPE in the text is checked, not only the first, because
    feedparser's fallback parser reads documents with junk before the prolog.
    """
    count = len(_ENTITY_OPEN_RE.findall(text))
    if count:
        external = _EXTERNAL_ENTITY_RE.search(text)
        if external:
            name = _entity_name(text, external.start())
            return f"document declares an external entity ({name}); refusing to parse (XXE)"
        # Names are for the message only: read a few declarations, not a million.
        heads = itertools.islice(_ENTITY_OPEN_RE.finditer(text), _ENTITY_DECLS_READ)
        names = ", ".join(sorted({_entity_name(text, d.start()) for d in heads})[:_ENTITY_NAMES_SHOWN])
        return f"document declares {count} entit{'y' if count == 1 else 'ies'} ({names}); refusing entity expansion"
    for head in _DOCTYPE_HEAD_RE.finditer(text):
        if text.startswith("[", head.end()):
            return "DOCTYPE has an internal subset; refusing it (it can declare entities and no feed needs one)"
    return None


def _entity_name(text: str, start: int) -> str:
    """The name declared by the ``<!ENTITY`` at ``start`` (``%name`` for a parameter entity)."""
    match = _ENTITY_DECL_RE.match(text, start)
    if match is None:
        return "unnamed"
    return ("%" if match.group(1) else "") + match.group(2)[:40]


def _root_element_name(text: str) -> str | None:
    """Local name of the first element, skipping the prolog (declaration, comments, DOCTYPE)."""
    pos = 0
    while True:
        lt = text.find("<", pos)
        if lt < 0:
            return None
        if text.startswith("<?", lt):
            pos = _end_of(text, "?>", lt)
        elif text.startswith("<!--", lt):
            pos = _end_of(text, "-->", lt)
        elif text.startswith("<!", lt):
            head = _DECLARATION_HEAD_RE.match(text, lt)
            pos = head.end() if head else lt + 2
            if text.startswith("[", pos):
                end = _SUBSET_END_RE.search(text, pos)
                pos = end.end() if end else len(text)
        else:
            match = _ROOT_RE.match(text, lt)
            if match:
                return match.group(1).rsplit(":", 1)[-1].lower()
            pos = lt + 1


def _end_of(text: str, marker: str, start: int) -> int:
    end = text.find(marker, start)
    return len(text) if end < 0 else end + len(marker)


# --- RSS / Atom via feedparser -----------------------------------------------------------------


def _parse_rss_atom(
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
        return _empty_feed(is_malformed=True, error=f"parser crashed: {type(e).__name__}: {e}")

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
    items = _finish_items((_feed_entry_to_item(e, base, language, feed_authors) for e in entries), max_items)
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
        guid=_guid(entry.get("id"), link, full_title, raw_published, summary_html),
        link=link,
        title=truncate_title(full_title),
        summary=_truncate(_plain_text(summary_html, keep_chars=SUMMARY_MAX_CHARS), SUMMARY_MAX_CHARS),
        published_at=published_at or updated_at,
        updated_at=updated_at,
        categories=_unique(
            _plain_line(tag.get("term") or tag.get("label"))
            for tag in entry.get("tags") or []
            if isinstance(tag, Mapping)
        ),
        author=_byline(_entry_authors(entry) or feed_authors),
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
        return normalize_whitespace(_CONTROL_RE.sub(" ", value[:PLAIN_TEXT_MAX_INPUT_CHARS]))
    return _plain_text(value)


def _entry_authors(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """Every author of an entry, by name (feedparser keeps them all in ``authors``; ``author`` is the last)."""
    authors = [a for a in entry.get("authors") or [] if isinstance(a, Mapping)]
    names = [author_name(a.get("name")) for a in authors]
    if not any(names) and isinstance(entry.get("author"), str):
        names = [author_name(entry["author"])]
    return _unique(names)


def author_name(value: object) -> str:
    """A byline name without e-mail addresses: ``Jane Doe (mailto:jane@example.com)`` -> ``Jane Doe``.

    An e-mail address is personal data and no reader needs it, so none is ever kept; an author given
    only as an address has no name. feedparser cuts ``Name (mailto:x@y)`` to ``Name (mailto:``,
    whose remains go too. What else the byline says stays as written, brackets included, as
    feedparser's ``author_detail.name`` keeps it: ``Jane Doe (https://jane.example)``,
    ``Jane Doe (Reuters)``. A bracket left without its pair by a removed address goes, and so do
    the brackets around a name that an address preceded (``jane@example.com (Jane Doe)``).

    >>> [author_name(v) for v in ("Jane Doe (mailto:", "jane@example.com (Jane Doe)", "a@b.example", "Ann <a@b.c>")]
    ['Jane Doe', 'Jane Doe', '', 'Ann']
    >>> [author_name(v) for v in ("Jane Doe (https://jane.example)", "Jane Doe (Reuters) (mailto:j@r.example)")]
    ['Jane Doe (https://jane.example)', 'Jane Doe (Reuters)']
    """
    text = _plain_text(value)
    text = _MAILTO_RE.sub(" ", _EMAIL_RE.sub(" ", text))
    text = _EMPTY_BRACKETS_RE.sub(" ", text)
    text = normalize_whitespace(_without_unpaired_brackets(text)).strip(" ,;:")
    while len(text) > 1 and _BRACKET_PAIRS.get(text[0]) == text[-1] and _pairs_with_last(text):
        text = text[1:-1].strip(" ,;:")  # "(Jane Doe)": the name an address stood before
    return truncate_title(text)


_BRACKET_PAIRS = {"(": ")", "[": "]", "<": ">"}


def _without_unpaired_brackets(text: str) -> str:
    """``text`` less every bracket that closes nothing or is never closed.

    >>> _without_unpaired_brackets("Jane (a (b) ] c")
    'Jane a (b)  c'
    """
    closers = {close: open_ for open_, close in _BRACKET_PAIRS.items()}
    open_at: list[int] = []
    unpaired: set[int] = set()
    for i, ch in enumerate(text):
        if ch in _BRACKET_PAIRS:
            open_at.append(i)
        elif ch in closers:
            if open_at and text[open_at[-1]] == closers[ch]:
                open_at.pop()
            else:
                unpaired.add(i)
    unpaired.update(open_at)
    return "".join(ch for i, ch in enumerate(text) if i not in unpaired) if unpaired else text


def _pairs_with_last(text: str) -> bool:
    """Whether the bracket opening ``text`` is the one its last character closes (``(a) (b)`` is not)."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == text[0]:
            depth += 1
        elif ch == text[-1]:
            depth -= 1
            if depth == 0:
                return i == len(text) - 1
    return False


def _byline(names: Iterable[str]) -> str | None:
    """Several authors joined with ", " (as pages' bylines are), capped as a headline."""
    joined = ", ".join(_unique(names))
    return truncate_title(joined) if joined else None


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


# --- Google News sitemaps ----------------------------------------------------------------------


def _parse_news_sitemap(body: bytes, url: str, max_items: int) -> ParsedFeed:
    """``<urlset>`` with ``<news:news>`` entries (Google News sitemap); other URLs are skipped."""
    try:
        root = defusedxml.ElementTree.fromstring(body)
    except DefusedXmlException as e:
        raise FeedRejectedError(f"sitemap uses forbidden XML features: {e}", url=url) from e
    except (ParseError, ValueError) as e:
        return _empty_feed(is_malformed=True, error=f"ParseError: {e}")

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
            publication or (_plain_line(_child_text(pub, "name")) if pub is not None else None) or None
        )
        feed_language = feed_language or language
        image = _child(entry, "image")
        keywords = (_child_text(news, "keywords") or "").split(",")
        items.append(
            FeedItem(
                guid=loc,
                link=loc,
                title=_plain_line(_child_text(news, "title")),
                summary="",
                published_at=parse_stated_datetime(_child_text(news, "publication_date")),
                updated_at=parse_stated_datetime(_child_text(entry, "lastmod")),
                categories=_unique(truncate_title(normalize_whitespace(k)) for k in keywords),
                author=None,
                image_url=absolute_http_url(_child_text(image, "loc"), url) if image is not None else None,
                language=language,
            )
        )
    return ParsedFeed(
        title=publication,
        link=None,
        language=feed_language,
        items=_finish_items(items, max_items),
        ttl_minutes=None,
        skip_hours=frozenset(),
        skip_days=frozenset(),
        hub_url=None,
        self_url=None,
        is_malformed=False,
        error=None,
    )


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


# --- JSON Feed -------------------------------------------------------------------------------


def _parse_json_feed(body: bytes, url: str, max_items: int) -> ParsedFeed:
    """JSON Feed 1.0/1.1 (https://jsonfeed.org/version/1.1); other JSON comes back malformed."""
    try:
        data = json.loads(body.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        return _empty_feed(is_malformed=True, error=f"JSON document does not parse: {type(e).__name__}: {e}")
    if not isinstance(data, dict) or not (
        str(data.get("version", "")).startswith("https://jsonfeed.org/version/")
        or isinstance(data.get("items"), list)
    ):
        return _empty_feed(is_malformed=True, error="JSON document is not a JSON Feed (no version, no items)")
    base = absolute_http_url(data.get("feed_url"), url) or url
    language = normalize_language(data.get("language"))
    # JSON Feed 1.1: an item without authors has the feed's (1.1 "authors", 1.0 "author").
    feed_authors = _json_authors(data)
    items = [_json_item_to_item(raw, base, language, feed_authors) for raw in _list_of_dicts(data.get("items"))]
    hub_url = next(
        (u for u in (absolute_http_url(h.get("url"), base) for h in _list_of_dicts(data.get("hubs"))) if u),
        None,
    )
    return ParsedFeed(
        title=truncate_title(_json_text(data.get("title"))) or None,
        link=absolute_http_url(data.get("home_page_url"), base),
        language=language,
        items=_finish_items(items, max_items),
        ttl_minutes=None,
        skip_hours=frozenset(),
        skip_days=frozenset(),
        hub_url=hub_url,
        self_url=absolute_http_url(data.get("feed_url"), url),
        is_malformed=False,
        error=None,
    )


def _json_item_to_item(raw: dict[str, Any], base: str, feed_language: str | None,
                       feed_authors: tuple[str, ...] = ()) -> FeedItem:
    link = absolute_http_url(raw.get("url") or raw.get("external_url"), base)
    # JSON Feed titles, summaries and content_text are plain text by the spec: markup quoted in
    # them is text ("Why <div> soup is bad"); only content_html is HTML (#16).
    full_title = _json_text(raw.get("title"))
    summary = (_json_text(raw.get("summary")) or _json_text(raw.get("content_text"))
               or _plain_text(_str_or_none(raw.get("content_html")), keep_chars=SUMMARY_MAX_CHARS))
    published = _str_or_none(raw.get("date_published"))
    updated_at = parse_stated_datetime(_str_or_none(raw.get("date_modified")))
    raw_id = raw.get("id")  # a string in the spec, but numbers are common
    tags = raw.get("tags")
    return FeedItem(
        guid=_guid(None if raw_id is None else str(raw_id), link, full_title, published or "", summary),
        link=link,
        title=truncate_title(full_title),
        summary=_truncate(summary, SUMMARY_MAX_CHARS),
        published_at=parse_stated_datetime(published) or updated_at,
        updated_at=updated_at,
        categories=_unique(
            _plain_line(t) for t in (tags if isinstance(tags, list) else []) if isinstance(t, str)
        ),
        author=_byline(_json_authors(raw) or feed_authors),
        image_url=absolute_http_url(raw.get("image") or raw.get("banner_image"), base),
        language=normalize_language(raw.get("language")) or feed_language,
    )


def _json_text(value: object) -> str:
    """A JSON Feed plain-text field: character references decoded (feeds made from HTML sources
    carry ``&amp;``), whitespace collapsed, control characters dropped; never parsed as markup."""
    if not isinstance(value, str):
        return ""
    text = html.unescape(value[:PLAIN_TEXT_MAX_INPUT_CHARS]) if "&" in value else value[:PLAIN_TEXT_MAX_INPUT_CHARS]
    return normalize_whitespace(_CONTROL_RE.sub(" ", text))


def _json_authors(obj: Mapping[str, Any]) -> tuple[str, ...]:
    authors = _list_of_dicts(obj.get("authors")) or _list_of_dicts([obj.get("author")])  # 1.1, then 1.0
    return _unique(author_name(_json_text(a.get("name"))) for a in authors)


def _list_of_dicts(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


# --- small helpers ---------------------------------------------------------------------------


def _empty_feed(*, is_malformed: bool, error: str | None) -> ParsedFeed:
    return ParsedFeed(
        title=None,
        link=None,
        language=None,
        items=(),
        ttl_minutes=None,
        skip_hours=frozenset(),
        skip_days=frozenset(),
        hub_url=None,
        self_url=None,
        is_malformed=is_malformed,
        error=error,
    )


def _finish_items(items: Iterable[FeedItem], max_items: int) -> tuple[FeedItem, ...]:
    """What every format's items go through last, whichever reader parsed them: duplicates dropped
    (:func:`_dedupe_items`), then a title for each item that has none (:func:`title_from_summary`)."""
    return tuple(item if item.title else dataclasses.replace(item, title=title_from_summary(item.summary))
                 for item in _dedupe_items(items, max_items))


def title_from_summary(summary: str, limit: int = UNTITLED_TITLE_MAX_CHARS) -> str:
    """The title of an item that has none: the first words of its summary, as feed readers show it.

    RSS 2.0 lets an item have only a description (microblogs, Mastodon, some wires), and a headline
    is what every page lists: an empty one made the item a blank line. The item's guid is not
    affected (it was taken before).

    >>> title_from_summary("Rain is expected across the north of the country from Tuesday evening onwards.", 40)
    'Rain is expected across the north of…'
    >>> title_from_summary("Short note."), title_from_summary("")
    ('Short note.', '')
    """
    return _truncate(summary, limit)


def _dedupe_items(items: Iterable[FeedItem], max_items: int) -> tuple[FeedItem, ...]:
    """First ``max_items`` items, keeping the first of each (guid, link) pair.

    A guid shared by items with different links names several items, not one (a CMS that stamps
    one guid on every item, a guid reused after an edit): each then gets a guid of its own, the
    shared one plus a hash of its link (or of title and summary when it has none), so none is
    collapsed into the first (#16). The same item repeated, same guid and link, is kept once.
    """
    listed = list(items)
    keys: dict[str, set[str]] = defaultdict(set)
    for item in listed:
        keys[item.guid].add(_item_key(item))
    seen: set[str] = set()
    kept: list[FeedItem] = []
    for item in listed:
        if len(keys[item.guid]) > 1:
            digest = hashlib.sha1(_item_key(item).encode("utf-8", "surrogatepass")).hexdigest()[:16]
            item = dataclasses.replace(item, guid=f"{item.guid}#sha1:{digest}")
        if item.guid in seen:
            continue
        seen.add(item.guid)
        kept.append(item)
        if len(kept) >= max_items:
            break
    return tuple(kept)


def _item_key(item: FeedItem) -> str:
    return item.link or f"{item.title}\n{item.summary}"


def _guid(raw_id: object, link: str | None, title: str, published: str, summary: object) -> str:
    """The entry's own id, else its link, else a hash of title and date (summary if both empty)."""
    if isinstance(raw_id, str) and raw_id.strip():
        return raw_id.strip()
    if link:
        return link
    key = f"{title}\n{published}" if title or published else f"\n\n{summary or ''}"
    return "sha1:" + hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()


class _TextExtractor(HTMLParser):
    """HTML to text: drops script/style, turns block elements into breaks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED_HTML_TAGS:
            self._skip_depth += 1
        elif tag in _BLOCK_HTML_TAGS:
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED_HTML_TAGS:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag in _BLOCK_HTML_TAGS:
            self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._skip_depth:
            self.parts.append(data)


def _plain_text(value: object, *, max_input_chars: int = PLAIN_TEXT_MAX_INPUT_CHARS,
                keep_chars: int | None = None) -> str:
    """Plain text from a title/summary that may hold HTML or entities; whitespace collapsed.

    Only the first ``max_input_chars`` characters are read: we keep at most
    :data:`SUMMARY_MAX_CHARS` of the result, and a huge body should not cost a huge parse. With
    ``keep_chars``, only the first ``keep_chars`` characters of the result matter (and whether there
    are more): the HTML is parsed a growing prefix at a time until the text of a prefix runs well
    past them (a full article in ``content:encoded`` yields its first paragraphs' text, #20).

    >>> _plain_text("<p>Caf&eacute; &amp; <b>bar</b></p>\\n <script>x()</script>")
    'Café & bar'
    >>> _plain_text("<p>" + "word " * 5000 + "</p>", keep_chars=20)[:20]
    'word word word word '
    """
    if not isinstance(value, str) or not value:
        return ""
    value = value[:max_input_chars]
    if "<" not in value and "&" not in value:
        return normalize_whitespace(value)
    if keep_chars is not None:
        prefix_chars = _PREFIX_CHARS_PER_KEPT_CHAR * keep_chars
        while prefix_chars < len(value):
            # The text of a prefix is a prefix of the whole text, but for its last few characters
            # (a tag or a character reference cut at the end): a margin keeps them out of the result.
            parser = _TextExtractor()
            parser.feed(value[:prefix_chars])
            text = normalize_whitespace("".join(parser.parts))
            if len(text) > keep_chars + _PREFIX_MARGIN_CHARS:
                return text[: keep_chars + 1]
            prefix_chars *= 4
    parser = _TextExtractor()
    parser.feed(value)
    parser.close()
    return normalize_whitespace("".join(parser.parts))


def _plain_line(value: object) -> str:
    """:func:`_plain_text` cut to :data:`TITLE_MAX_CHARS`: for titles, names and categories."""
    return truncate_title(_plain_text(value))


def truncate_title(title: str, limit: int = TITLE_MAX_CHARS) -> str:
    """A headline of at most ``limit`` characters, cut at a word boundary with an ellipsis.

    Feeds and pages sometimes put the whole article into a title field (``og:title``, an
    entity that expands); by product rule a body is never stored, only a headline and a
    snippet.

    Args:
        title: Plain text, whitespace already normalised.
        limit: The most characters kept, the ellipsis included.

    Returns:
        ``title`` unchanged if it fits, else its head and an ellipsis.

    Raises:
        ValueError: ``limit`` is below 2 (no room for a character and the ellipsis).

    >>> truncate_title("Budget rises", limit=20)
    'Budget rises'
    >>> truncate_title("The budget will rise next year", limit=20)
    'The budget will\u2026'
    """
    if limit < 2:
        raise ValueError(f"limit must be >= 2, got {limit}")
    return _truncate(title, limit)


def _truncate(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word boundary with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - len(ELLIPSIS)]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS


def normalize_language(value: object) -> str | None:
    """The primary subtag of a declared language: ``en_US ``, ``en US``, ``EN-us`` -> ``en``.

    One writer clusters a language whatever its region, and a language names object keys, so only
    a two- or three-letter (ISO 639) primary subtag is kept. Anything else, ``und`` too, is unknown:
    ``None``, so the next declaration (the feed's, the page's, the publisher's) decides.

    >>> [normalize_language(v) for v in (" en_US ", "en US", "EN-us", "fil", "de, en", "English", "und", None)]
    ['en', 'en', 'en', 'fil', 'de', None, None, None]
    """
    if not isinstance(value, str):
        return None
    primary = _LANGUAGE_SEPARATOR_RE.split(value.strip().lower(), maxsplit=1)[0]
    return primary if _LANGUAGE_CODE_RE.fullmatch(primary) and primary != "und" else None


def is_plausible_published_at(value: datetime, seen_at: datetime) -> bool:
    """Whether a stated publication time can be true of an article first seen at ``seen_at``.

    >>> seen = datetime(2026, 5, 1, tzinfo=UTC)
    >>> [is_plausible_published_at(datetime(y, 1, 1, tzinfo=UTC), seen) for y in (1900, 1970, 2026, 9999)]
    [False, False, True, False]
    >>> is_plausible_published_at(seen + timedelta(hours=23), seen), is_plausible_published_at(seen + timedelta(days=2), seen)
    (True, False)
    """
    return EARLIEST_PUBLISHED_AT <= value <= seen_at + PUBLISHED_FUTURE_SLACK


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


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for value in values:
        if value and value not in seen:
            seen[value] = None
    return tuple(seen)
