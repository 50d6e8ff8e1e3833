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

Pure: no network, no files, no clock. The caller has already passed the safety gate (size cap,
no entity declarations, no DOCTYPE internal subset); the parser here also never resolves an
entity or touches the network.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import threading
import xml.sax.saxutils
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import feedparser.api
import feedparser.encodings
from feedparser.datetimes import _parse_date
from feedparser.html import _cp1252
from feedparser.mixin import _FeedParserMixin
from feedparser.urls import _urljoin, make_safe_absolute_uri
from feedparser.util import FeedParserDict
from lxml import etree

_ROOTS = frozenset({"rss", "feed", "rdf:rdf"})
_MATCH_NAMESPACES = {uri.lower(): prefix for uri, prefix in _FeedParserMixin.namespaces.items()}
# Elements feedparser has a start or an end handler for: one not replayed here is declined.
_FEEDPARSER_STARTS = frozenset(n[7:] for n in dir(feedparser.api.StrictFeedParser) if n.startswith("_start_"))
_FEEDPARSER_ENDS = frozenset(n[5:] for n in dir(feedparser.api.StrictFeedParser) if n.startswith("_end_"))
_HTML_TYPES = frozenset(_FeedParserMixin.html_types)
_CAN_BE_RELATIVE_URI = frozenset(_FeedParserMixin.can_be_relative_uri)
_looks_like_html = _FeedParserMixin.looks_like_html
_map_content_type = _FeedParserMixin.map_content_type
_NEW_DECLARATION = "<?xml version='1.0' encoding='utf-8'?>"
_DOCTYPE_RE = re.compile(rb"<!DOCTYPE", re.IGNORECASE)
_LINK_ENTITY_RE = re.compile("&([A-Za-z0-9_]+);")
_CP1252_RE = re.compile("[\x80-\x9f]")  # the code points feedparser's _cp1252 table maps
# feedparser's own address pattern in ``_sync_author_detail`` (mixin.py), kept as it is.
_AUTHOR_EMAIL_RE = re.compile(
    r"""(([a-zA-Z0-9\_\-\.\+]+)@((\[[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.)|(([a-zA-Z0-9\-]+\.)+))"""
    r"""([a-zA-Z]{2,4}|[0-9]{1,3})(\]?))(\?subject=\S+)?"""
)
_ASCII_PROBE = "<?xml ?><rss><item></item></rss>"
_XML_NS = "http://www.w3.org/XML/1998/namespace"
_MATHML_NS = "http://www.w3.org/1998/Math/MathML"
_SVG_NS = "http://www.w3.org/2000/svg"
_KEYMAP: dict[str, str | list[str]] = FeedParserDict.keymap
_TAG_STATES_KEPT = 256
_TAGS: dict[tuple[tuple[tuple[str, str], ...], tuple[tuple[str | None, str], ...]], dict[str, _Tag]] = {}
"""What each tag means, by the namespaces declared before it (most feeds declare the same few)."""
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


class _Entry(dict[str, Any]):
    """A plain dict answering ``get`` as FeedParserDict does for the keys parse_feed reads."""

    __slots__ = ()

    def get(self, key: str, default: Any = None) -> Any:  # noqa: ANN401 - a mapping's value
        if key == "updated" or key == "updated_parsed":
            # feedparser 6.0 keeps its issue-310 fallback: a missing updated date reads as the published one.
            if key not in self:
                published = "published" + key[7:]
                if published in self:
                    return self[published]
        elif key == "enclosures":
            links = dict.get(self, "links")
            if links is None:
                return default
            return [{k: v for k, v in link.items() if k != "rel"}
                    for link in links if link["rel"] == "enclosure"]
        return dict.get(self, key, default)


Attrs = dict[str, str]
"""An element's attributes: lower-cased names (``prefix:local`` for a namespaced one) to their values."""

_Start = Callable[["_Reader", Attrs], None]
_End = Callable[["_Reader"], None]


class _Tag(NamedTuple):
    name: str  # feedparser's element name: "title", "dc:creator", "media:content"
    key: str  # its handler suffix and storage key: "title", "dc_creator", "media_content"
    start: _Start | None
    end: _End | None
    unknown_start: bool  # feedparser has a start handler this module does not replay
    unknown_end: bool
    has_end: bool
    keeps_textinput: bool
    keeps_image: bool
    markup_name: str  # the tag written back inside an XHTML text field
    end_markup_name: str
    adds_xmlns: bool


def _strattrs(attrs: Mapping[str, str]) -> str:
    return "".join(f' {k}="{xml.sax.saxutils.escape(v, {chr(34): "&quot;"})}"' for k, v in attrs.items())


def _store(context: dict[str, Any], key: str, value: Any) -> None:  # noqa: ANN401 - any feed value
    """``context[key] = value`` as FeedParserDict stores it: ``url`` as ``href``, ``guid`` as ``id``..."""
    mapped = _KEYMAP.get(key, key)
    context[mapped if isinstance(mapped, str) else mapped[0]] = value


class _Decline(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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
            raise _Decline("DOCTYPE: feedparser drops it, and with it any entity it defines")
        try:
            root = etree.fromstring(data, _parser())
        except etree.XMLSyntaxError as e:
            raise _Decline(f"not well-formed: {e}") from e
        reader = _Reader(http_headers.get("content-language"))
        try:
            reader.walk(root)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
            # feedparser would raise out of its parse here, or swallow an AttributeError: either way not ours.
            raise _Decline(f"handler error: {type(e).__name__}: {e}") from e
        if not reader.version:
            raise _Decline("no version: not RSS or Atom")
    except _Decline as e:
        return Declined(e.reason)
    return FeedDocument(reader.version, _Entry(reader.feeddata), tuple(_Entry(e) for e in reader.entries))


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
        raise _Decline("encoding: not ASCII-compatible")
    xml_encoding = ""
    match = feedparser.encodings.RE_XML_PI_ENCODING.match(data)
    if match:
        try:
            xml_encoding = match.group(1).decode("utf-8").lower()
        except UnicodeDecodeError as e:
            raise _Decline("encoding: undecodable declaration") from e
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
            raise _Decline(f"encoding: {encoding} is not ASCII-compatible")
        text = data.decode(encoding)
    except (LookupError, UnicodeError, ValueError) as e:
        raise _Decline(f"encoding: does not decode as {encoding}") from e
    if feedparser.encodings.RE_XML_DECLARATION.search(text):
        text = feedparser.encodings.RE_XML_DECLARATION.sub(_NEW_DECLARATION, text)
    else:
        text = _NEW_DECLARATION + "\n" + text
    return text.encode("utf-8")


def _enforce_href(attrs: Attrs) -> Attrs:
    href = attrs.get("url", attrs.get("uri", attrs.get("href", None)))
    if href:
        attrs.pop("url", None)
        attrs.pop("uri", None)
        attrs["href"] = href
    return attrs


class _Reader:
    """feedparser's ``_FeedParserMixin`` state machine, for the handlers well-formed RSS 2.0 and Atom 1.0 use.

    Each method here is the handler of the same name in feedparser 6.0 (``mixin.py``,
    ``namespaces/_base.py``, ``dc.py``, ``mediarss.py``, ``itunes.py``), kept line for line where
    the line matters to a field parse_feed reads, so that a difference shows in a diff against it.
    """

    def __init__(self, baselang: str | None) -> None:
        self.feeddata = _Entry()
        self.entries: list[_Entry] = []
        self.version = ""
        self.namespaces_in_use: dict[str, str] = {}
        self.namespacemap: dict[str | None, str] = {}
        self.infeed = self.inentry = self.incontent = self.intextinput = self.inimage = 0
        self.inauthor = self.incontributor = self.inpublisher = self.insource = 0
        self.sourcedata = _Entry()
        self.contentparams: dict[str, Any] = {}
        self.summary_key: str | None = None
        self.stack: list[list[Any]] = []
        self.langstack: list[str | None] = []
        self.baseuri = ""
        self.basestack: list[str] = []
        self.title_depth = -1
        self.depth = 0
        self.has_content = 0
        self.guidislink = False
        self.depth_map: dict[int, dict[str, int]] = {}
        self.decls: dict[str, str] = {}
        self.lang = baselang
        if self.lang:
            self.feeddata["language"] = self.lang.replace("_", "-")
        self._tags: dict[str, _Tag] = _TAGS.setdefault(((), ()), {})
        self._bases: dict[tuple[str, str], str] = {}

    # --- the walk: lxml's tree replayed as SAX events -------------------------------------------

    def walk(self, root: etree._Element) -> None:
        start, end, data = self.start_element, self.end_element, self.handle_data
        for event, node in etree.iterwalk(root, events=("start-ns", "start", "end")):
            if event == "start":
                start(node)
                if node.text:
                    data(node.text)
            elif event == "end":
                end(node)
                if node.tail:
                    data(node.tail)
            else:
                prefix, uri = node
                self.start_prefix_mapping(prefix or None, uri)

    def start_prefix_mapping(self, prefix: str | None, uri: str) -> None:
        if not uri:
            return
        self.track_namespace(prefix, uri)
        if prefix and uri == "http://www.w3.org/1999/xlink":
            self.decls["xmlns:" + prefix] = uri

    def track_namespace(self, prefix: str | None, uri: str) -> None:
        self._track_namespace(prefix, uri)
        # Element names depend on the namespaces declared so far: the cache follows them.
        state = (tuple(self.namespaces_in_use.items()), tuple(self.namespacemap.items()))
        if len(_TAGS) > _TAG_STATES_KEPT:
            _TAGS.clear()
        self._tags = _TAGS.setdefault(state, {})

    def _track_namespace(self, prefix: str | None, uri: str) -> None:
        loweruri = uri.lower()
        if not self.version:
            if (prefix, loweruri) == (None, "http://my.netscape.com/rdf/simple/0.9/"):
                self.version = "rss090"
            elif loweruri == "http://purl.org/rss/1.0/":
                self.version = "rss10"
            elif loweruri == "http://www.w3.org/2005/atom":
                self.version = "atom10"
        if loweruri.find("backend.userland.com/rss") != -1:
            uri = "http://backend.userland.com/rss"
            loweruri = uri
        if loweruri in _MATCH_NAMESPACES:
            self.namespacemap[prefix] = _MATCH_NAMESPACES[loweruri]
            self.namespaces_in_use[_MATCH_NAMESPACES[loweruri]] = uri
        else:
            self.namespaces_in_use[prefix or ""] = uri

    def _tag(self, tag: str) -> _Tag:
        """What feedparser makes of an element's tag: ``startElementNS`` (expat reports no qname),
        then ``unknown_starttag``'s prefix mapping and handler lookup. Cached until a namespace is declared."""
        if tag[0] == "{":
            namespace, localname = tag[1:].split("}", 1)
        else:
            namespace, localname = "", tag
        lowernamespace = namespace.lower()
        if lowernamespace.find("backend.userland.com/rss") != -1:
            namespace = lowernamespace = "http://backend.userland.com/rss"
        prefix = _MATCH_NAMESPACES.get(lowernamespace)
        name = localname.lower()
        if prefix:
            name = prefix.lower() + ":" + name
        elif namespace:
            for known, value in self.namespaces_in_use.items():
                if known and value == namespace:
                    name = known + ":" + name
                    break
        name = name.lower()
        if ":" in name:
            mapped, suffix = name.split(":", 1)
        else:
            mapped, suffix = "", name
        mapped = self.namespacemap.get(mapped, mapped)
        key = mapped + "_" + suffix if mapped else suffix
        info = _Tag(
            name=name, key=key, start=_START.get(key), end=_END.get(key),
            unknown_start=key in _FEEDPARSER_STARTS and key not in _START,
            unknown_end=key in _FEEDPARSER_ENDS and key not in _END,
            has_end=key in _END or key in _FEEDPARSER_ENDS,
            keeps_textinput=bool(mapped) or name in ("title", "link", "description", "name"),
            keeps_image=bool(mapped) or name in ("title", "link", "description", "url", "href", "width", "height"),
            markup_name=name.split(":", 1)[1] if ":" in name else name,
            end_markup_name=name.split(":")[-1],
            adds_xmlns=(localname.lower() == "math" and namespace == _MATHML_NS)
            or (localname.lower() == "svg" and namespace == _SVG_NS),
        )
        self._tags[tag] = info
        return info

    def _attributes(self, node: etree._Element, items: list[tuple[str, str]], info: _Tag) -> Attrs:
        attrs, self.decls = self.decls, {}
        if info.adds_xmlns:
            raise _Decline("not replayed: MathML or SVG")
        qnames: list[tuple[str, str]] = []
        for key, value in items:
            if key[0] != "{":
                attrs[key.lower()] = value
                continue
            uri, local = key[1:].split("}", 1)
            prefix = _MATCH_NAMESPACES.get(uri.lower(), "")
            attrs[(prefix + ":" + local if prefix else local).lower()] = value
            if uri == _XML_NS:
                given = "xml"
            else:
                given_prefixes = [p for p, u in node.nsmap.items() if u == uri and p]
                if len(given_prefixes) != 1:
                    raise _Decline("not replayed: an attribute prefix bound twice")
                given = given_prefixes[0]
            qnames.append((given + ":" + local, value))
        for qname, value in qnames:  # expat's qnames come after every attribute's expanded name
            attrs[qname.lower()] = value
        for key in ("rel", "type"):
            value = attrs.get(key)
            if value:
                attrs[key] = value.lower()
        return attrs

    def start_element(self, node: etree._Element) -> None:  # noqa: C901 - feedparser's unknown_starttag
        tag = node.tag
        if not isinstance(tag, str):
            return
        info = self._tags.get(tag) or self._tag(tag)
        items = node.items()
        attrs = self._attributes(node, items, info) if items or self.decls else {}
        name = info.name
        if self.depth == 0 and name not in _ROOTS:
            raise _Decline(f"root element: <{name}>")
        self.depth += 1
        if attrs:
            baseuri = attrs.get("xml:base", attrs.get("base")) or self.baseuri
            lang = attrs.get("xml:lang", attrs.get("lang"))
        else:
            baseuri, lang = self.baseuri, None
        if self.baseuri:
            self.baseuri = self._absolute_base(self.baseuri, baseuri)
        elif baseuri:
            self.baseuri = _urljoin(self.baseuri, baseuri)
        if lang == "":
            lang = None
        elif lang is None:
            lang = self.lang
        if lang and name in ("feed", "rss", "rdf:RDF"):  # (feedparser's "rdf:RDF" never matches its lower-cased tag)
            self.feeddata["language"] = lang.replace("_", "-")
        self.lang = lang
        self.basestack.append(self.baseuri)
        self.langstack.append(lang)
        if attrs:
            for key, uri in list(attrs.items()):
                if key.startswith("xmlns:"):
                    self.track_namespace(key[6:], uri)
                elif key == "xmlns":
                    self.track_namespace(None, uri)
        if self.incontent:
            # Markup inside a text field: feedparser turns it back into text (XHTML), and still runs
            # the end handler of each element inside; only elements without one are replayed.
            if info.has_end or info.name in ("svg", "xhtml:svg", "math"):
                raise _Decline(f"markup in a text field: <{name}>")
            if not self.contentparams.get("type", "xml").endswith("xml"):
                if name in ("xhtml:div", "div"):
                    raise _Decline("markup in a text field: <div> in HTML text (feedparser loses track of its depth)")
                self.contentparams["type"] = "application/xhtml+xml"
            if self.contentparams.get("type") == "application/xhtml+xml":
                self.handle_data(f"<{info.markup_name}{_strattrs(attrs)}>", escape=False)
                return
            raise _Decline(f"markup in a text field: <{name}> in XML text")
        if not info.keeps_textinput:
            self.intextinput = 0
        if not info.keeps_image:
            self.inimage = 0
        if info.start is not None:
            info.start(self, attrs)
        elif info.unknown_start:
            raise _Decline(f"not replayed: <{name}>")
        elif not attrs:
            self.push(info.key, 1)
        else:
            _store(self._get_context(), info.key, attrs)

    def _absolute_base(self, base: str, rel: str) -> str:
        known = self._bases.get((base, rel))
        if known is None:
            known = self._bases[(base, rel)] = make_safe_absolute_uri(base, rel) or base
        return known

    def end_element(self, node: etree._Element) -> None:
        tag = node.tag
        if not isinstance(tag, str):
            return
        info = self._tags.get(tag) or self._tag(tag)
        if info.end is not None:
            info.end(self)
        elif info.unknown_end:
            raise _Decline(f"not replayed: <{info.name}>")
        else:
            self.pop(info.key)
        if self.incontent:
            if not self.contentparams.get("type", "xml").endswith("xml"):
                raise _Decline(f"markup in a text field: <{info.name}> in HTML text")
            if self.contentparams.get("type") == "application/xhtml+xml":
                self.handle_data(f"</{info.end_markup_name}>", escape=False)
        if self.basestack:
            self.basestack.pop()
            if self.basestack and self.basestack[-1]:
                self.baseuri = self.basestack[-1]
        if self.langstack:
            self.langstack.pop()
            if self.langstack:
                self.lang = self.langstack[-1]
        self.depth -= 1

    def handle_data(self, text: str, escape: bool = True) -> None:
        if not self.stack:
            return
        if escape and self.contentparams.get("type") == "application/xhtml+xml":
            text = xml.sax.saxutils.escape(text)
        self.stack[-1][2].append(text)

    # --- the element stack ------------------------------------------------------------------------

    def push(self, element: str, expecting_text: int) -> None:
        self.stack.append([element, expecting_text, []])

    def pop(self, element: str, strip_whitespace: int = 1) -> str | None:  # noqa: C901 - feedparser's pop
        if not self.stack or self.stack[-1][0] != element:
            return None
        element, expecting_text, pieces = self.stack.pop()
        if self.version == "atom10" and self.contentparams.get("type", "text") == "application/xhtml+xml":
            # Atom XHTML: drop the wrapping <div> when everything else is inside it.
            while pieces and len(pieces) > 1 and not pieces[-1].strip():
                del pieces[-1]
            while pieces and len(pieces) > 1 and not pieces[0].strip():
                del pieces[0]
            if pieces and (pieces[0] == "<div>" or pieces[0].startswith("<div ")) and pieces[-1] == "</div>":
                depth = 0
                for piece in pieces[:-1]:
                    if piece.startswith("</"):
                        depth -= 1
                        if depth == 0:
                            break
                    elif piece.startswith("<") and not piece.endswith("/>"):
                        depth += 1
                else:
                    pieces = pieces[1:-1]
        output = "".join(pieces)
        if strip_whitespace:
            output = output.strip()
        if not expecting_text:
            return output
        if self.contentparams.get("base64", 0):
            try:
                output = base64.decodebytes(output.encode("utf8")).decode("utf8")
            except (binascii.Error, binascii.Incomplete, UnicodeDecodeError):
                pass
        if element in _CAN_BE_RELATIVE_URI and output:
            if not element == "id" or self.guidislink:
                output = self.resolve_uri(output)
        if not self.version.startswith("atom") and self.contentparams.get("type") == "text/plain":
            # looks_like_html needs a close tag or an entity reference: never without "<" or "&"
            if ("<" in output or "&" in output) and _looks_like_html(output):
                self.contentparams["type"] = "text/html"
        self.contentparams.pop("mode", None)
        self.contentparams.pop("base64", None)
        if not output.isascii():  # both steps below leave ASCII as it is
            try:  # feedparser's repair of UTF-8 read as ISO-8859-1 (its strict parser's encoding is always utf-8)
                output = output.encode("iso-8859-1").decode("utf-8")
            except (UnicodeEncodeError, UnicodeDecodeError):
                pass
            if _CP1252_RE.search(output):
                output = output.translate(_cp1252)
        if element in ("category", "tags", "itunes_keywords"):
            return output
        if element == "title" and -1 < self.title_depth <= self.depth:
            return output
        if self.inentry and not self.insource:
            entry = self.entries[-1]
            if element == "content":
                entry.setdefault(element, [])
                contentparams = dict(self.contentparams)
                contentparams["value"] = output
                entry[element].append(contentparams)
            elif element == "link":
                if not self.inimage:
                    if "&" in output:
                        output = output.replace("&amp;", "&")
                        output = _LINK_ENTITY_RE.sub(r"&\g<1>", output)
                    entry[element] = output
                    if output:
                        entry["links"][-1]["href"] = output
            else:
                if element == "description":
                    element = "summary"
                depths = self.depth_map.setdefault(id(entry), {})
                old_value_depth = depths.get(element)
                if old_value_depth is None or self.depth <= old_value_depth:
                    depths[element] = self.depth
                    _store(entry, element, output)
                if self.incontent:
                    contentparams = dict(self.contentparams)
                    contentparams["value"] = output
                    _store(entry, element + "_detail", contentparams)
        elif self.infeed or self.insource:
            context = self._get_context()
            if element == "description":
                element = "subtitle"
            _store(context, element, output)
            if element == "link":
                if "&" in output:
                    output = _LINK_ENTITY_RE.sub(r"&\g<1>", output)
                context[element] = output
                context["links"][-1]["href"] = output
            elif self.incontent:
                contentparams = dict(self.contentparams)
                contentparams["value"] = output
                _store(context, element + "_detail", contentparams)
        return output

    def push_content(self, tag: str, attrs: Attrs, default_content_type: str, expecting_text: int) -> None:
        self.incontent += 1
        if self.lang:
            self.lang = self.lang.replace("_", "-")
        self.contentparams = {
            "type": _map_content_type(attrs.get("type", default_content_type)),
            "language": self.lang,
            "base": self.baseuri,
        }
        self.contentparams["base64"] = self._is_base64(attrs)
        self.push(tag, expecting_text)

    def pop_content(self, tag: str) -> str | None:
        value = self.pop(tag)
        self.incontent -= 1
        self.contentparams.clear()
        return value

    def resolve_uri(self, uri: str) -> str:
        return str(_urljoin(self.baseuri or "", uri))

    def _is_base64(self, attrs: Attrs) -> int:
        if attrs.get("mode", "") == "base64":
            return 1
        kind = self.contentparams["type"]
        if kind.startswith("text/") or kind.endswith(("+xml", "/xml")):
            return 0
        return 1

    def _get_context(self) -> dict[str, Any]:
        if self.insource:
            return self.sourcedata
        if self.inimage and "image" in self.feeddata:
            return self.feeddata["image"]
        if self.intextinput:
            return self.feeddata["textinput"]
        if self.inentry:
            return self.entries[-1]
        return self.feeddata

    def _save(self, key: str, value: Any, overwrite: bool = False) -> None:  # noqa: ANN401
        context = self._get_context()
        if overwrite:
            context[key] = value
        else:
            context.setdefault(key, value)

    def _save_author(self, key: str, value: Any, prefix: str = "author") -> None:  # noqa: ANN401
        context = self._get_context()
        context.setdefault(prefix + "_detail", {})
        context[prefix + "_detail"][key] = value
        self._sync_author_detail()
        context.setdefault("authors", [{}])
        context["authors"][-1][key] = value

    def _save_contributor(self, key: str, value: Any) -> None:  # noqa: ANN401
        context = self._get_context()
        context.setdefault("contributors", [{}])
        context["contributors"][-1][key] = value

    def _sync_author_detail(self, key: str = "author") -> None:
        context = self._get_context()
        detail = context.get(f"{key}s", [{}])[-1]
        if detail:
            name = detail.get("name")
            email = detail.get("email")
            if name and email:
                context[key] = f"{name} ({email})"
            elif name:
                context[key] = name
            elif email:
                context[key] = email
            return
        author, email = context.get(key), None
        if not author:
            return
        emailmatch = _AUTHOR_EMAIL_RE.search(author)
        if emailmatch:
            email = emailmatch.group(0)
            author = author.replace(email, "")
            author = author.replace("()", "")
            author = author.replace("<>", "")
            author = author.replace("&lt;&gt;", "")
            author = author.strip()
            if author and (author[0] == "("):
                author = author[1:]
            if author and (author[-1] == ")"):
                author = author[:-1]
            author = author.strip()
        if author or email:
            context.setdefault(f"{key}_detail", detail)
        if author:
            detail["name"] = author
        if email:
            detail["email"] = email

    def _add_tag(self, term: Any, scheme: Any, label: Any) -> None:  # noqa: ANN401
        context = self._get_context()
        tags = context.setdefault("tags", [])
        if (not term) and (not scheme) and (not label):
            return
        value = dict(term=term, scheme=scheme, label=label)
        if value not in tags:
            tags.append(value)

    # --- handlers (namespaces/_base.py) -------------------------------------------------------------

    def _start_rss(self, attrs: Attrs) -> None:
        versionmap = {"0.91": "rss091u", "0.92": "rss092", "0.93": "rss093", "0.94": "rss094"}
        if not self.version or not self.version.startswith("rss"):
            attr_version = attrs.get("version", "")
            version = versionmap.get(attr_version)
            if version:
                self.version = version
            elif attr_version.startswith("2."):
                self.version = "rss20"
            else:
                self.version = "rss"

    def _start_channel(self, attrs: Attrs) -> None:
        self.infeed = 1
        self._cdf_common(attrs)

    def _cdf_common(self, attrs: Attrs) -> None:
        if "lastmod" in attrs:
            self._start_updated({})
            self.stack[-1][-1] = [attrs["lastmod"]]
            self._end_updated()
        if "href" in attrs:
            self._start_link({})
            self.stack[-1][-1] = [attrs["href"]]
            self._end_link()

    def _start_feed(self, attrs: Attrs) -> None:
        self.infeed = 1
        versionmap = {"0.1": "atom01", "0.2": "atom02", "0.3": "atom03"}
        if not self.version:
            self.version = versionmap.get(attrs.get("version"), "atom")  # type: ignore[arg-type]

    def _end_channel(self) -> None:
        self.infeed = 0

    def _start_image(self, attrs: Attrs) -> None:
        context = self._get_context()
        if not self.inentry:
            context.setdefault("image", {})
        self.inimage = 1
        self.title_depth = -1
        self.push("image", 0)

    def _end_image(self) -> None:
        self.pop("image")
        self.inimage = 0

    def _start_textinput(self, attrs: Attrs) -> None:
        context = self._get_context()
        context.setdefault("textinput", {})
        self.intextinput = 1
        self.title_depth = -1
        self.push("textinput", 0)

    def _end_textinput(self) -> None:
        self.pop("textinput")
        self.intextinput = 0

    def _start_author(self, attrs: Attrs) -> None:
        self.inauthor = 1
        self.push("author", 1)
        context = self._get_context()
        context.setdefault("authors", [])
        context["authors"].append({})

    def _end_author(self) -> None:
        self.pop("author")
        self.inauthor = 0
        self._sync_author_detail()

    def _start_contributor(self, attrs: Attrs) -> None:
        self.incontributor = 1
        context = self._get_context()
        context.setdefault("contributors", [])
        context["contributors"].append({})
        self.push("contributor", 0)

    def _end_contributor(self) -> None:
        self.pop("contributor")
        self.incontributor = 0

    def _start_dc_contributor(self, attrs: Attrs) -> None:
        self.incontributor = 1
        context = self._get_context()
        context.setdefault("contributors", [])
        context["contributors"].append({})
        self.push("name", 0)

    def _end_dc_contributor(self) -> None:
        self._end_name()
        self.incontributor = 0

    def _start_name(self, attrs: Attrs) -> None:
        self.push("name", 0)

    def _end_name(self) -> None:
        value = self.pop("name")
        if self.inpublisher:
            self._save_author("name", value, "publisher")
        elif self.inauthor:
            self._save_author("name", value)
        elif self.incontributor:
            self._save_contributor("name", value)
        elif self.intextinput:
            context = self._get_context()
            context["name"] = value

    def _start_width(self, attrs: Attrs) -> None:
        self.push("width", 0)

    def _end_width(self) -> None:
        self._end_dimension("width")

    def _start_height(self, attrs: Attrs) -> None:
        self.push("height", 0)

    def _end_height(self) -> None:
        self._end_dimension("height")

    def _end_dimension(self, key: str) -> None:
        value: Any = self.pop(key)
        try:
            value = int(value)  # type: ignore[arg-type]
        except ValueError:
            value = 0
        except TypeError as e:  # feedparser would raise out of the parse
            raise _Decline(f"not replayed: <{key}> outside an image") from e
        if self.inimage:
            self._get_context()[key] = value

    def _start_url(self, attrs: Attrs) -> None:
        self.push("href", 1)

    def _end_url(self) -> None:
        value = self.pop("href")
        if self.inauthor:
            self._save_author("href", value)
        elif self.incontributor:
            self._save_contributor("href", value)

    def _start_email(self, attrs: Attrs) -> None:
        self.push("email", 0)

    def _end_email(self) -> None:
        value = self.pop("email")
        if self.inpublisher:
            self._save_author("email", value, "publisher")
        elif self.inauthor:
            self._save_author("email", value)
        elif self.incontributor:
            self._save_contributor("email", value)

    def _start_subtitle(self, attrs: Attrs) -> None:
        self.push_content("subtitle", attrs, "text/plain", 1)

    def _end_subtitle(self) -> None:
        self.pop_content("subtitle")

    def _start_rights(self, attrs: Attrs) -> None:
        self.push_content("rights", attrs, "text/plain", 1)

    def _end_rights(self) -> None:
        self.pop_content("rights")

    def _start_item(self, attrs: Attrs) -> None:
        self.entries.append(_Entry())
        self.push("item", 0)
        self.inentry = 1
        self.guidislink = False
        self.title_depth = -1
        about = attrs.get(self._map_to_standard_prefix("rdf:about"))
        if about:
            self._get_context()["id"] = about
        self._cdf_common(attrs)

    def _map_to_standard_prefix(self, name: str) -> str:
        prefix, colon, suffix = name.partition(":")
        if colon:
            return self.namespacemap.get(prefix, prefix) + ":" + suffix
        return name

    def _end_item(self) -> None:
        self.pop("item")
        self.inentry = 0
        self.has_content = 0

    def _start_language(self, attrs: Attrs) -> None:
        self.push("language", 1)

    def _end_language(self) -> None:
        self.lang = self.pop("language")

    def _start_webmaster(self, attrs: Attrs) -> None:
        self.push("publisher", 1)

    def _end_webmaster(self) -> None:
        self.pop("publisher")
        self._sync_author_detail("publisher")

    def _start_published(self, attrs: Attrs) -> None:
        self.push("published", 1)

    def _end_published(self) -> None:
        value = self.pop("published")
        self._save("published_parsed", _parse_date(value), overwrite=True)

    def _start_updated(self, attrs: Attrs) -> None:
        self.push("updated", 1)

    def _end_updated(self) -> None:
        value = self.pop("updated")
        self._save("updated_parsed", _parse_date(value), overwrite=True)

    def _start_created(self, attrs: Attrs) -> None:
        self.push("created", 1)

    def _end_created(self) -> None:
        value = self.pop("created")
        self._save("created_parsed", _parse_date(value), overwrite=True)

    def _start_expirationdate(self, attrs: Attrs) -> None:
        self.push("expired", 1)

    def _end_expirationdate(self) -> None:
        self._save("expired_parsed", _parse_date(self.pop("expired")), overwrite=True)

    def _start_category(self, attrs: Attrs) -> None:
        term = attrs.get("term")
        scheme = attrs.get("scheme", attrs.get("domain"))
        label = attrs.get("label")
        self._add_tag(term, scheme, label)
        self.push("category", 1)

    def _end_category(self) -> None:
        value = self.pop("category")
        if not value:
            return
        context = self._get_context()
        tags = context["tags"]
        if value and len(tags) and not tags[-1]["term"]:
            tags[-1]["term"] = value
        else:
            self._add_tag(value, None, None)

    def _start_cloud(self, attrs: Attrs) -> None:
        self._get_context()["cloud"] = dict(attrs)

    def _start_link(self, attrs: Attrs) -> None:
        attrs.setdefault("rel", "alternate")
        if attrs["rel"] == "self":
            attrs.setdefault("type", "application/atom+xml")
        else:
            attrs.setdefault("type", "text/html")
        context = self._get_context()
        attrs = _enforce_href(attrs)
        if "href" in attrs:
            attrs["href"] = self.resolve_uri(attrs["href"])
        expecting_text = self.infeed or self.inentry or self.insource
        context.setdefault("links", [])
        if not (self.inentry and self.inimage):
            context["links"].append(dict(attrs))
        if "href" in attrs:
            if attrs.get("rel") == "alternate" and _map_content_type(attrs.get("type")) in _HTML_TYPES:
                context["link"] = attrs["href"]
        else:
            self.push("link", expecting_text)

    def _end_link(self) -> None:
        self.pop("link")

    def _start_guid(self, attrs: Attrs) -> None:
        self.guidislink = attrs.get("ispermalink", "true") == "true"
        self.push("id", 1)

    def _end_guid(self) -> None:
        value = self.pop("id")
        self._save("guidislink", self.guidislink and "link" not in self._get_context())
        if self.guidislink:
            self._save("link", value)

    def _start_title(self, attrs: Attrs) -> None:
        self.push_content("title", attrs, "text/plain", self.infeed or self.inentry or self.insource)

    def _end_title(self) -> None:
        value = self.pop_content("title")
        if not value:
            return
        self.title_depth = self.depth

    def _end_media_title(self) -> None:
        title_depth = self.title_depth
        self._end_title()
        self.title_depth = title_depth

    def _start_description(self, attrs: Attrs) -> None:
        context = self._get_context()
        if "summary" in context and not self.has_content:
            self.summary_key = "content"
            self._start_content(attrs)
        else:
            self.push_content("description", attrs, "text/html", self.infeed or self.inentry or self.insource)

    def _start_abstract(self, attrs: Attrs) -> None:
        self.push_content("description", attrs, "text/plain", self.infeed or self.inentry or self.insource)

    def _end_description(self) -> None:
        if self.summary_key == "content":
            self._end_content()
        else:
            self.pop_content("description")
        self.summary_key = None

    def _start_info(self, attrs: Attrs) -> None:
        self.push_content("info", attrs, "text/plain", 1)

    def _end_info(self) -> None:
        self.pop_content("info")

    def _start_generator(self, attrs: Attrs) -> None:
        if attrs:
            attrs = _enforce_href(attrs)
            if "href" in attrs:
                attrs["href"] = self.resolve_uri(attrs["href"])
        self._get_context()["generator_detail"] = dict(attrs)
        self.push("generator", 1)

    def _end_generator(self) -> None:
        value = self.pop("generator")
        context = self._get_context()
        if "generator_detail" in context:
            context["generator_detail"]["name"] = value

    def _start_summary(self, attrs: Attrs) -> None:
        context = self._get_context()
        if "summary" in context and not self.has_content:
            self.summary_key = "content"
            self._start_content(attrs)
        else:
            self.summary_key = "summary"
            self.push_content(self.summary_key, attrs, "text/plain", 1)

    def _end_summary(self) -> None:
        if self.summary_key == "content":
            self._end_content()
        else:
            self.pop_content(self.summary_key or "summary")
        self.summary_key = None

    def _start_enclosure(self, attrs: Attrs) -> None:
        attrs = _enforce_href(attrs)
        context = self._get_context()
        attrs["rel"] = "enclosure"
        context.setdefault("links", []).append(dict(attrs))

    def _start_source(self, attrs: Attrs) -> None:
        if "url" in attrs:
            self.sourcedata["href"] = attrs["url"]
        self.push("source", 1)
        self.insource = 1
        self.title_depth = -1

    def _end_source(self) -> None:
        self.insource = 0
        value = self.pop("source")
        if value:
            self.sourcedata["title"] = value
        self._get_context()["source"] = dict(self.sourcedata)
        self.sourcedata.clear()

    def _start_content(self, attrs: Attrs) -> None:
        self.has_content = 1
        self.push_content("content", attrs, "text/plain", 1)
        src = attrs.get("src")
        if src:
            self.contentparams["src"] = src
        self.push("content", 1)  # pushed twice, as feedparser does; the first stays on the stack

    def _start_content_encoded(self, attrs: Attrs) -> None:
        self.has_content = 1
        self.push_content("content", attrs, "text/html", 1)

    def _end_content(self) -> None:
        copy_to_summary = _map_content_type(self.contentparams.get("type")) in ({"text/plain"} | _HTML_TYPES)
        value = self.pop_content("content")
        if copy_to_summary:
            self._save("summary", value)

    # --- handlers (namespaces/mediarss.py, itunes.py) --------------------------------------------

    def _start_media_category(self, attrs: Attrs) -> None:
        attrs.setdefault("scheme", "http://search.yahoo.com/mrss/category_schema")
        self._start_category(attrs)

    def _end_media_keywords(self) -> None:
        self._end_keyword_list("media_keywords", None)

    def _end_itunes_keywords(self) -> None:
        self._end_keyword_list("itunes_keywords", "http://www.itunes.com/")

    def _end_keyword_list(self, element: str, scheme: str | None) -> None:
        value = self.pop(element)
        if value is None:
            raise _Decline(f"not replayed: <{element}> with attributes")
        for term in value.split(","):
            if term.strip():
                self._add_tag(term.strip(), scheme, None)

    def _start_tags(self, attrs: Attrs) -> None:
        self.push("tags", 1)

    def _end_tags(self) -> None:
        value = self.pop("tags")
        if value is None:
            raise _Decline("not replayed: <tags> out of place")
        for term in value.split(","):
            self._add_tag(term.strip(), None, None)

    def _start_media_group(self, attrs: Attrs) -> None:
        pass

    def _start_media_content(self, attrs: Attrs) -> None:
        context = self._get_context()
        context.setdefault("media_content", [])
        context["media_content"].append(attrs)

    def _start_media_thumbnail(self, attrs: Attrs) -> None:
        context = self._get_context()
        context.setdefault("media_thumbnail", [])
        self.push("url", 1)
        context["media_thumbnail"].append(attrs)

    def _end_media_thumbnail(self) -> None:
        url = self.pop("url")
        context = self._get_context()
        if url is not None and url.strip():
            if "url" not in context["media_thumbnail"][-1]:
                context["media_thumbnail"][-1]["url"] = url

    def _start_media_credit(self, attrs: Attrs) -> None:
        context = self._get_context()
        context.setdefault("media_credit", [])
        context["media_credit"].append(attrs)
        self.push("credit", 1)

    def _end_media_credit(self) -> None:
        credit = self.pop("credit")
        if credit is not None and credit.strip():
            context = self._get_context()
            context["media_credit"][-1]["content"] = credit

    def _start_media_rating(self, attrs: Attrs) -> None:
        context = self._get_context()
        context.setdefault("media_rating", attrs)
        self.push("rating", 1)

    def _end_media_rating(self) -> None:
        rating = self.pop("rating")
        if rating is not None and rating.strip():
            context = self._get_context()
            context["media_rating"]["content"] = rating

    def _start_itunes_image(self, attrs: Attrs) -> None:
        self.push("itunes_image", 0)
        if attrs.get("href"):
            self._get_context()["image"] = dict({"href": attrs.get("href")})
        elif attrs.get("url"):
            self._get_context()["image"] = dict({"href": attrs.get("url")})

    def _start_itunes_category(self, attrs: Attrs) -> None:
        self._add_tag(attrs.get("text"), "http://www.itunes.com/", None)
        self.push("category", 1)

    def _start_itunes_owner(self, attrs: Attrs) -> None:
        self.inpublisher = 1
        self.push("publisher", 0)

    def _end_itunes_owner(self) -> None:
        self.pop("publisher")
        self.inpublisher = 0
        self._sync_author_detail("publisher")

    def _end_itunes_block(self) -> None:
        value = self.pop("itunes_block", 0)
        self._get_context()["itunes_block"] = (value == "yes" or value == "Yes") and 1 or 0

    def _end_itunes_explicit(self) -> None:
        value = self.pop("itunes_explicit", 0)
        self._get_context()["itunes_explicit"] = (None, False, True)[(value == "yes" and 2) or value == "clean" or 0]

    def _start_cc_license(self, attrs: Attrs) -> None:
        context = self._get_context()
        value = attrs.get(self._map_to_standard_prefix("rdf:resource"))
        link = {}
        link["rel"] = "license"
        if value:
            link["href"] = value
        context.setdefault("links", []).append(link)


_START: dict[str, _Start] = {
    "rss": _Reader._start_rss, "channel": _Reader._start_channel, "feed": _Reader._start_feed,
    "image": _Reader._start_image, "textinput": _Reader._start_textinput,
    "author": _Reader._start_author, "managingeditor": _Reader._start_author, "dc_author": _Reader._start_author,
    "dc_creator": _Reader._start_author, "itunes_author": _Reader._start_author,
    "contributor": _Reader._start_contributor, "dc_contributor": _Reader._start_dc_contributor,
    "name": _Reader._start_name, "itunes_name": _Reader._start_name,
    "width": _Reader._start_width, "height": _Reader._start_height,
    "url": _Reader._start_url, "homepage": _Reader._start_url, "uri": _Reader._start_url,
    "email": _Reader._start_email, "itunes_email": _Reader._start_email,
    "subtitle": _Reader._start_subtitle, "tagline": _Reader._start_subtitle,
    "itunes_subtitle": _Reader._start_subtitle,
    "rights": _Reader._start_rights, "copyright": _Reader._start_rights, "dc_rights": _Reader._start_rights,
    "item": _Reader._start_item, "entry": _Reader._start_item,
    "language": _Reader._start_language, "dc_language": _Reader._start_language,
    "webmaster": _Reader._start_webmaster, "dc_publisher": _Reader._start_webmaster,
    "published": _Reader._start_published, "issued": _Reader._start_published,
    "pubdate": _Reader._start_published, "dcterms_issued": _Reader._start_published,
    "updated": _Reader._start_updated, "modified": _Reader._start_updated,
    "lastbuilddate": _Reader._start_updated, "dc_date": _Reader._start_updated,
    "dcterms_modified": _Reader._start_updated,
    "created": _Reader._start_created, "dcterms_created": _Reader._start_created,
    "expirationdate": _Reader._start_expirationdate,
    "category": _Reader._start_category, "keywords": _Reader._start_category,
    "dc_subject": _Reader._start_category, "media_category": _Reader._start_media_category,
    "itunes_category": _Reader._start_itunes_category, "tags": _Reader._start_tags,
    "cloud": _Reader._start_cloud, "link": _Reader._start_link,
    "guid": _Reader._start_guid, "id": _Reader._start_guid,
    "title": _Reader._start_title, "dc_title": _Reader._start_title, "media_title": _Reader._start_title,
    "description": _Reader._start_description, "dc_description": _Reader._start_description,
    "media_description": _Reader._start_description, "abstract": _Reader._start_abstract,
    "info": _Reader._start_info, "feedburner_browserfriendly": _Reader._start_info,
    "generator": _Reader._start_generator,
    "summary": _Reader._start_summary, "itunes_summary": _Reader._start_summary,
    "enclosure": _Reader._start_enclosure, "source": _Reader._start_source,
    "content": _Reader._start_content, "content_encoded": _Reader._start_content_encoded,
    "fullitem": _Reader._start_content_encoded,
    "media_group": _Reader._start_media_group, "media_content": _Reader._start_media_content,
    "media_thumbnail": _Reader._start_media_thumbnail, "media_credit": _Reader._start_media_credit,
    "media_rating": _Reader._start_media_rating,
    "itunes_image": _Reader._start_itunes_image, "itunes_link": _Reader._start_itunes_image,
    "itunes_owner": _Reader._start_itunes_owner, "cc_license": _Reader._start_cc_license,
}
_END: dict[str, _End] = {
    "channel": _Reader._end_channel, "feed": _Reader._end_channel,
    "image": _Reader._end_image, "textinput": _Reader._end_textinput,
    "author": _Reader._end_author, "managingeditor": _Reader._end_author, "dc_author": _Reader._end_author,
    "dc_creator": _Reader._end_author, "itunes_author": _Reader._end_author,
    "contributor": _Reader._end_contributor, "dc_contributor": _Reader._end_dc_contributor,
    "name": _Reader._end_name, "itunes_name": _Reader._end_name,
    "width": _Reader._end_width, "height": _Reader._end_height,
    "url": _Reader._end_url, "homepage": _Reader._end_url, "uri": _Reader._end_url,
    "email": _Reader._end_email, "itunes_email": _Reader._end_email,
    "subtitle": _Reader._end_subtitle, "tagline": _Reader._end_subtitle, "itunes_subtitle": _Reader._end_subtitle,
    "rights": _Reader._end_rights, "copyright": _Reader._end_rights, "dc_rights": _Reader._end_rights,
    "item": _Reader._end_item, "entry": _Reader._end_item,
    "language": _Reader._end_language, "dc_language": _Reader._end_language,
    "webmaster": _Reader._end_webmaster, "dc_publisher": _Reader._end_webmaster,
    "published": _Reader._end_published, "issued": _Reader._end_published,
    "pubdate": _Reader._end_published, "dcterms_issued": _Reader._end_published,
    "updated": _Reader._end_updated, "modified": _Reader._end_updated,
    "lastbuilddate": _Reader._end_updated, "dc_date": _Reader._end_updated,
    "dcterms_modified": _Reader._end_updated,
    "created": _Reader._end_created, "dcterms_created": _Reader._end_created,
    "expirationdate": _Reader._end_expirationdate,
    "category": _Reader._end_category, "keywords": _Reader._end_category, "dc_subject": _Reader._end_category,
    "media_category": _Reader._end_category, "itunes_category": _Reader._end_category,
    "media_keywords": _Reader._end_media_keywords, "itunes_keywords": _Reader._end_itunes_keywords,
    "tags": _Reader._end_tags, "link": _Reader._end_link,
    "guid": _Reader._end_guid, "id": _Reader._end_guid,
    "title": _Reader._end_title, "dc_title": _Reader._end_title, "media_title": _Reader._end_media_title,
    "description": _Reader._end_description, "dc_description": _Reader._end_description,
    "media_description": _Reader._end_description, "abstract": _Reader._end_description,
    "info": _Reader._end_info, "feedburner_browserfriendly": _Reader._end_info,
    "generator": _Reader._end_generator,
    "summary": _Reader._end_summary, "itunes_summary": _Reader._end_summary,
    "source": _Reader._end_source,
    "content": _Reader._end_content, "content_encoded": _Reader._end_content, "fullitem": _Reader._end_content,
    "media_thumbnail": _Reader._end_media_thumbnail, "media_credit": _Reader._end_media_credit,
    "media_rating": _Reader._end_media_rating,
    "itunes_owner": _Reader._end_itunes_owner, "itunes_block": _Reader._end_itunes_block,
    "itunes_explicit": _Reader._end_itunes_explicit,
}
