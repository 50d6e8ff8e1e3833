"""Well-formed RSS 2.0 and Atom 1.0 read with lxml: the entries feedparser would give, at a fraction of its cost (#20).

feedparser stays the reference: it recovers from broken XML, wrong charsets and odd dialects, and
every record :func:`transforms.feeds.parse_feed` makes is defined by what feedparser reads. But on
a feed that is plain, well-formed RSS 2.0 or Atom 1.0 most of feedparser's time goes into its
per-event Python (a SAX callback, a ``getattr`` dispatch, a ``FeedParserDict`` lookup and a
``deepcopy`` for every element), 65-80% of a poller's CPU (docs/measurements.md). This module
replays the same element handlers over a tree lxml builds in C, with the same state (the element
stack, ``title_depth``, ``inentry``/``inimage``/``inauthor``..., the per-entry depth map, the
``summary``/``content`` hand-over) and feedparser's own helpers where it has them (date parsing,
URL fix-up, the HTML sniff, the cp1252 map), and returns the same ``feed`` and ``entries``
mappings, which ``parse_feed`` then normalises with the very code it runs on feedparser's.

It declines, and feedparser parses, whenever it is not sure to match: a document feedparser would
flag (not well-formed, a charset that does not decode as declared), a DOCTYPE, a root other than
RSS or Atom 1.0, ``xml:base``, markup inside a text field (Atom ``type="xhtml"``, raw HTML
elements in a description), or any element feedparser has a handler for that is not replayed
here (``georss``, ``source`` in Atom, Creative Commons licences...). A test walks the captured
feeds and feedparser's conformance suite and requires, for every file, either a decline or the
same records as feedparser's (tests/transforms/test_feed_xml.py).

The reader is feedparser's state machine in four rooms, each a class the next builds on:
:mod:`~transforms.feeds.xml_stack` (the state, the element stack, where a value is stored),
:mod:`~transforms.feeds.xml_walk` (lxml's tree as feedparser's SAX events),
:mod:`~transforms.feeds.xml_handlers` (the RSS/Atom element handlers) and
:mod:`~transforms.feeds.xml_extensions` (Media RSS, iTunes, Creative Commons); this module
decodes the body as feedparser would, names each element's handlers and runs the walk.

Pure: no network, no files, no clock. The caller has already passed the safety gate (size cap,
no entity declarations, no DOCTYPE internal subset); the parser here also never resolves an
entity or touches the network.
"""

from __future__ import annotations

import codecs
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import feedparser.api
import feedparser.encodings
from lxml import etree

from transforms.errors import FeedDeclinedError
from transforms.feeds.xml_extensions import ExtensionHandlers
from transforms.feeds.xml_stack import EntryDict
from transforms.feeds.xml_walk import EndHandler, StartHandler, TreeWalk

_NEW_DECLARATION = "<?xml version='1.0' encoding='utf-8'?>"
_DOCTYPE_RE = re.compile(rb"<!DOCTYPE", re.IGNORECASE)
_ASCII_PROBE = "<?xml ?><rss><item></item></rss>"
_local = threading.local()


@dataclass(frozen=True, slots=True)
class Declined:
    """The reader is not sure to match feedparser on this document; ``reason`` says why."""

    reason: str


@dataclass(frozen=True, slots=True)
class FeedDocument:
    """What feedparser's ``parse`` would return for a well-formed feed, reduced to what parse_feed reads.

    ``feed`` and each of ``entries`` answer ``.get`` as ``FeedParserDict`` does for the keys
    parse_feed reads: ``updated``/``updated_parsed`` fall back to the published ones and
    ``enclosures`` lists the links with ``rel="enclosure"``.
    """

    version: str
    feed: Mapping[str, Any]
    entries: tuple[Mapping[str, Any], ...]


def read_feed_document(body: bytes, http_headers: Mapping[str, str]) -> FeedDocument | Declined:
    """Read a well-formed RSS 2.0 or Atom 1.0 document as feedparser would, or decline.

    Args:
        body: The response body, after parse_feed's safety gate (and with whitespace before an
            XML declaration dropped, as parse_feed does for feedparser).
        http_headers: The response headers parse_feed hands feedparser: lower-cased keys, its
            normalised ``content-type``, no ``content-location``.

    Returns:
        The document, or :class:`Declined` with the reason when feedparser must read it.
    """
    try:
        data = _as_feedparser_decodes(body, http_headers)
        if _DOCTYPE_RE.search(data):
            raise FeedDeclinedError("DOCTYPE: feedparser drops it, and with it any entity it defines")
        try:
            root = etree.fromstring(data, _parser())
        except etree.XMLSyntaxError as e:
            raise FeedDeclinedError(f"not well-formed: {e}") from e
        reader = _Reader(http_headers.get("content-language"))
        try:
            reader.walk(root)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
            # feedparser would raise out of its parse here, or swallow an AttributeError: either way not ours.
            raise FeedDeclinedError(f"handler error: {type(e).__name__}: {e}") from e
        if not reader.version:
            raise FeedDeclinedError("no version: not RSS or Atom")
    except FeedDeclinedError as e:
        return Declined(e.reason)
    return FeedDocument(reader.version, EntryDict(reader.feeddata), tuple(EntryDict(e) for e in reader.entries))


def _parser() -> etree.XMLParser:
    parser: etree.XMLParser | None = getattr(_local, "parser", None)
    if parser is None:  # an lxml parser is not to be shared between threads
        parser = etree.XMLParser(resolve_entities=False, no_network=True, remove_comments=True, remove_pis=True,
                                 huge_tree=False, collect_ids=False)
        _local.parser = parser
    return parser


def _as_feedparser_decodes(body: bytes, http_headers: Mapping[str, str]) -> bytes:
    """The bytes feedparser's strict parser would read: decoded with the encoding its RFC 3023 rules
    choose first (``feedparser.encodings.convert_to_utf8``), re-encoded as UTF-8 under a new XML
    declaration. A document that does not decode so is one feedparser flags: declined."""
    data = body
    if data[:3] == codecs.BOM_UTF8:
        data = data[3:]
    elif data[:2] in (codecs.BOM_UTF16_BE, codecs.BOM_UTF16_LE) or data[:1] in (b"\x00", b"\x4c"):
        raise FeedDeclinedError("encoding: not ASCII-compatible")
    xml_encoding = ""
    match = feedparser.encodings.RE_XML_PI_ENCODING.match(data)
    if match:
        try:
            xml_encoding = match.group(1).decode("utf-8").lower()
        except UnicodeDecodeError as e:
            raise FeedDeclinedError("encoding: undecodable declaration") from e
    content_type, http_encoding = feedparser.encodings.parse_content_type(http_headers.get("content-type") or "")
    if content_type in ("application/xml", "application/xml-dtd", "application/xml-external-parsed-entity") or (
            content_type.startswith("application/") and content_type.endswith("+xml")):
        encoding = http_encoding or xml_encoding or "utf-8"
    elif content_type.startswith("text/"):
        encoding = http_encoding or "us-ascii"
    elif http_headers and "content-type" not in http_headers:
        encoding = xml_encoding or "iso-8859-1"
    else:
        encoding = xml_encoding or "utf-8"
    if encoding.lower() == "gb2312":
        encoding = "gb18030"
    try:
        info = codecs.lookup(encoding)
        if not info._is_text_encoding or _ASCII_PROBE.encode(info.name) != _ASCII_PROBE.encode("ascii"):
            raise FeedDeclinedError(f"encoding: {encoding} is not ASCII-compatible")
        text = data.decode(encoding)
    except (LookupError, UnicodeError, ValueError) as e:
        raise FeedDeclinedError(f"encoding: does not decode as {encoding}") from e
    if feedparser.encodings.RE_XML_DECLARATION.search(text):
        text = feedparser.encodings.RE_XML_DECLARATION.sub(_NEW_DECLARATION, text)
    else:
        text = _NEW_DECLARATION + "\n" + text
    return text.encode("utf-8")


def _handler_table(prefix: str, aliases: Mapping[str, str]) -> dict[str, Callable[..., None]]:
    """Handlers by element key: each ``prefix + key`` method of the handler classes for its own
    ``key``, and for each alias the handler of the element it stands for (feedparser's
    ``_start_managingeditor = _start_author``...). Helpers of the handlers are named otherwise."""
    table = {name[len(prefix):]: getattr(ExtensionHandlers, name)
             for name in dir(ExtensionHandlers) if name.startswith(prefix)}
    table.update({alias: getattr(ExtensionHandlers, prefix + name) for alias, name in aliases.items()})
    return table


_ALIASES = {
    "managingeditor": "author", "dc_author": "author", "dc_creator": "author",
    "itunes_author": "author", "itunes_name": "name", "homepage": "url", "uri": "url",
    "itunes_email": "email", "tagline": "subtitle", "itunes_subtitle": "subtitle",
    "copyright": "rights", "dc_rights": "rights", "entry": "item", "dc_language": "language",
    "dc_publisher": "webmaster", "issued": "published", "pubdate": "published",
    "dcterms_issued": "published", "modified": "updated", "lastbuilddate": "updated",
    "dc_date": "updated", "dcterms_modified": "updated", "dcterms_created": "created",
    "keywords": "category", "dc_subject": "category", "id": "guid", "dc_title": "title",
    "dc_description": "description", "media_description": "description",
    "feedburner_browserfriendly": "info", "itunes_summary": "summary",
}
"""Elements feedparser reads as another, start and end alike (RSS, Dublin Core and iTunes names for the Atom ones)."""
_START: dict[str, StartHandler] = _handler_table("_start_", {**_ALIASES, **{
    "media_title": "title", "fullitem": "content_encoded", "itunes_link": "itunes_image",
}})
_END: dict[str, EndHandler] = _handler_table("_end_", {**_ALIASES, **{
    "feed": "channel", "media_category": "category", "itunes_category": "category",
    "abstract": "description", "content_encoded": "content", "fullitem": "content",
}})


class _Reader(TreeWalk, ExtensionHandlers):
    """feedparser's ``_FeedParserMixin`` state machine, for the handlers well-formed RSS 2.0 and Atom 1.0 use.

    Each handler is the one of the same name in feedparser 6.0 (``mixin.py``,
    ``namespaces/_base.py``, ``dc.py``, ``mediarss.py``, ``itunes.py``), kept line for line where
    the line matters to a field parse_feed reads, so that a difference shows in a diff against it.
    """

    starts = _START
    ends = _END
