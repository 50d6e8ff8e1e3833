"""lxml's tree replayed as the SAX events feedparser's strict parser would see.

``start_element``/``end_element`` are feedparser's ``unknown_starttag``/``unknown_endtag``: an
element's name as feedparser spells it (namespace prefixes mapped to its own), ``xml:base`` and
``xml:lang`` tracked, and the handler the reader has for it, or a decline when feedparser has one
the reader does not replay. What a tag means depends only on the namespaces declared before it,
so it is worked out once per namespace state (``_TAGS``).
"""

from __future__ import annotations

import xml.sax.saxutils
from collections.abc import Callable, Mapping
from typing import ClassVar, NamedTuple

import feedparser.api
import feedparser.encodings
from feedparser.mixin import _FeedParserMixin
from feedparser.urls import _urljoin, make_safe_absolute_uri
from lxml import etree

from transforms.errors import FeedDeclinedError
from transforms.feeds.xml_stack import Attrs, ElementStack, store_value

_ROOTS = frozenset({"rss", "feed", "rdf:rdf"})
_MATCH_NAMESPACES = {uri.lower(): prefix for uri, prefix in _FeedParserMixin.namespaces.items()}
# Elements feedparser has a start or an end handler for: one not replayed here is declined.
_FEEDPARSER_STARTS = frozenset(n[7:] for n in dir(feedparser.api.StrictFeedParser) if n.startswith("_start_"))
_FEEDPARSER_ENDS = frozenset(n[5:] for n in dir(feedparser.api.StrictFeedParser) if n.startswith("_end_"))
_XML_NS = "http://www.w3.org/XML/1998/namespace"
_MATHML_NS = "http://www.w3.org/1998/Math/MathML"
_SVG_NS = "http://www.w3.org/2000/svg"
_TAG_STATES_KEPT = 256
_TAGS: dict[tuple[tuple[tuple[str, str], ...], tuple[tuple[str | None, str], ...]], dict[str, TagInfo]] = {}
"""What each tag means, by the namespaces declared before it (most feeds declare the same few)."""
StartHandler = Callable[..., None]
"""A start handler: an unbound method of the reader, called with the reader and the attributes."""
EndHandler = Callable[..., None]
"""An end handler: an unbound method of the reader, called with the reader."""


class TagInfo(NamedTuple):
    name: str  # feedparser's element name: "title", "dc:creator", "media:content"
    key: str  # its handler suffix and storage key: "title", "dc_creator", "media_content"
    start: StartHandler | None
    end: EndHandler | None
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


class TreeWalk(ElementStack):
    """The walk over lxml's tree: namespaces, element names and attributes as feedparser reads them.

    ``starts`` and ``ends`` are the handlers by element key, set by the class that has them.
    """

    starts: ClassVar[Mapping[str, StartHandler]] = {}
    ends: ClassVar[Mapping[str, EndHandler]] = {}

    def __init__(self, baselang: str | None) -> None:
        super().__init__(baselang)
        self._tags: dict[str, TagInfo] = _TAGS.setdefault(((), ()), {})
        self._bases: dict[tuple[str, str], str] = {}

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

    def _tag(self, tag: str) -> TagInfo:
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
        info = TagInfo(
            name=name, key=key, start=self.starts.get(key), end=self.ends.get(key),
            unknown_start=key in _FEEDPARSER_STARTS and key not in self.starts,
            unknown_end=key in _FEEDPARSER_ENDS and key not in self.ends,
            has_end=key in self.ends or key in _FEEDPARSER_ENDS,
            keeps_textinput=bool(mapped) or name in ("title", "link", "description", "name"),
            keeps_image=bool(mapped) or name in ("title", "link", "description", "url", "href", "width", "height"),
            markup_name=name.split(":", 1)[1] if ":" in name else name,
            end_markup_name=name.split(":")[-1],
            adds_xmlns=(localname.lower() == "math" and namespace == _MATHML_NS)
            or (localname.lower() == "svg" and namespace == _SVG_NS),
        )
        self._tags[tag] = info
        return info

    def _attributes(self, node: etree._Element, items: list[tuple[str, str]], info: TagInfo) -> Attrs:
        attrs, self.decls = self.decls, {}
        if info.adds_xmlns:
            raise FeedDeclinedError("not replayed: MathML or SVG")
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
                    raise FeedDeclinedError("not replayed: an attribute prefix bound twice")
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
            raise FeedDeclinedError(f"root element: <{name}>")
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
                raise FeedDeclinedError(f"markup in a text field: <{name}>")
            if not self.contentparams.get("type", "xml").endswith("xml"):
                if name in ("xhtml:div", "div"):
                    raise FeedDeclinedError("markup in a text field: <div> in HTML text (feedparser loses track of its depth)")
                self.contentparams["type"] = "application/xhtml+xml"
            if self.contentparams.get("type") == "application/xhtml+xml":
                self.handle_data(f"<{info.markup_name}{_strattrs(attrs)}>", escape=False)
                return
            raise FeedDeclinedError(f"markup in a text field: <{name}> in XML text")
        if not info.keeps_textinput:
            self.intextinput = 0
        if not info.keeps_image:
            self.inimage = 0
        if info.start is not None:
            info.start(self, attrs)
        elif info.unknown_start:
            raise FeedDeclinedError(f"not replayed: <{name}>")
        elif not attrs:
            self.push(info.key, 1)
        else:
            store_value(self._get_context(), info.key, attrs)

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
            raise FeedDeclinedError(f"not replayed: <{info.name}>")
        else:
            self.pop(info.key)
        if self.incontent:
            if not self.contentparams.get("type", "xml").endswith("xml"):
                raise FeedDeclinedError(f"markup in a text field: <{info.name}> in HTML text")
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
