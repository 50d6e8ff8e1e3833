"""feedparser's element stack and where a value is stored: the state every handler of the lxml reader shares.

``push``/``pop`` and the content hand-over are feedparser 6.0's (``mixin.py``), kept line for line
where the line matters to a field parse_feed reads; ``pop`` stores the text an element closes in
the entry, the feed or the source being read.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, TypedDict

from feedparser.html import _cp1252
from feedparser.mixin import _FeedParserMixin
from feedparser.urls import _urljoin
from feedparser.util import FeedParserDict

_CAN_BE_RELATIVE_URI = frozenset(_FeedParserMixin.can_be_relative_uri)
_looks_like_html = _FeedParserMixin.looks_like_html
map_content_type = _FeedParserMixin.map_content_type
_LINK_ENTITY_RE = re.compile("&([A-Za-z0-9_]+);")
_CP1252_RE = re.compile("[\x80-\x9f]")  # the code points feedparser's _cp1252 table maps
# feedparser's own address pattern in ``_sync_author_detail`` (mixin.py), kept as it is.
_AUTHOR_EMAIL_RE = re.compile(
    r"""(([a-zA-Z0-9\_\-\.\+]+)@((\[[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.)|(([a-zA-Z0-9\-]+\.)+))"""
    r"""([a-zA-Z]{2,4}|[0-9]{1,3})(\]?))(\?subject=\S+)?"""
)
_KEYMAP: dict[str, str | list[str]] = FeedParserDict.keymap


class EntryDict(dict[str, Any]):
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


class ContentParams(TypedDict, total=False):
    """feedparser's ``contentparams``: what is known of the text field being read (``mixin.py``)."""

    type: str
    language: str | None
    base: str
    base64: int
    mode: str
    src: str


def store_value(context: dict[str, Any], key: str, value: Any) -> None:  # noqa: ANN401 - any feed value
    """``context[key] = value`` as FeedParserDict stores it: ``url`` as ``href``, ``guid`` as ``id``..."""
    mapped = _KEYMAP.get(key, key)
    context[mapped if isinstance(mapped, str) else mapped[0]] = value


class ElementStack:
    """feedparser's ``_FeedParserMixin`` state and element stack, for the handlers well-formed RSS 2.0 and Atom 1.0 use."""

    def __init__(self, baselang: str | None) -> None:
        self.feeddata = EntryDict()
        self.entries: list[EntryDict] = []
        self.version = ""
        self.namespaces_in_use: dict[str, str] = {}
        self.namespacemap: dict[str | None, str] = {}
        self.infeed = self.inentry = self.incontent = self.intextinput = self.inimage = 0
        self.inauthor = self.incontributor = self.inpublisher = self.insource = 0
        self.sourcedata = EntryDict()
        self.contentparams: ContentParams = {}
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

    def push(self, element: str, expecting_text: int) -> None:
        self.stack.append([element, expecting_text, []])

    def pop(self, element: str, strip_whitespace: int = 1) -> str | None:
        """feedparser's ``pop``: the text the element closes, decoded, and stored where it belongs."""
        if not self.stack or self.stack[-1][0] != element:
            return None
        element, expecting_text, pieces = self.stack.pop()
        if self.version == "atom10" and self.contentparams.get("type", "text") == "application/xhtml+xml":
            pieces = _without_wrapping_div(pieces)
        output = "".join(pieces)
        if strip_whitespace:
            output = output.strip()
        if not expecting_text:
            return output
        output = self._decode_text(element, output)
        if element in ("category", "tags", "itunes_keywords"):
            return output
        if element == "title" and -1 < self.title_depth <= self.depth:
            return output
        if self.inentry and not self.insource:
            output = self._store_in_entry(element, output)
        elif self.infeed or self.insource:
            output = self._store_in_feed(element, output)
        return output

    def _decode_text(self, element: str, output: str) -> str:
        """An element's text as feedparser keeps it: base64 decoded, URIs resolved, HTML sniffed in
        RSS plain text, UTF-8 read as ISO-8859-1 repaired, cp1252 code points mapped."""
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
        return output

    def _store_in_entry(self, element: str, output: str) -> str:
        """``pop``'s storage inside an entry: content as a list, the link on the last link, and any
        other value only where it is not nested deeper than one already stored. Returns the text
        as stored (a link's entities unescaped)."""
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
                store_value(entry, element, output)
            if self.incontent:
                contentparams = dict(self.contentparams)
                contentparams["value"] = output
                store_value(entry, element + "_detail", contentparams)
        return output

    def _store_in_feed(self, element: str, output: str) -> str:
        """``pop``'s storage in the feed (or the source being read): a description is its subtitle.
        Returns the text as stored (a link's entities unescaped)."""
        context = self._get_context()
        if element == "description":
            element = "subtitle"
        store_value(context, element, output)
        if element == "link":
            if "&" in output:
                output = _LINK_ENTITY_RE.sub(r"&\g<1>", output)
            context[element] = output
            context["links"][-1]["href"] = output
        elif self.incontent:
            contentparams = dict(self.contentparams)
            contentparams["value"] = output
            store_value(context, element + "_detail", contentparams)
        return output

    def push_content(self, tag: str, attrs: Attrs, default_content_type: str, expecting_text: int) -> None:
        self.incontent += 1
        if self.lang:
            self.lang = self.lang.replace("_", "-")
        self.contentparams = {
            "type": map_content_type(attrs.get("type", default_content_type)),
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


def _without_wrapping_div(pieces: list[str]) -> list[str]:
    """Atom XHTML: the pieces less blank ones at either end and the wrapping ``<div>``, when everything else is inside it."""
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
    return pieces
