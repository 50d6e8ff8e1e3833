"""Atom feeds out (RFC 4287): an edition page, a topic and a search, for feed readers (issue 30).

Each feed is cut from what the replica already serves (a live page version, the live story
snapshot, the live search index version) and memoised per version, so it is built once per
published version and every replica gives the same bytes for it; it is served like a page (shared
cache headers, a strong ETag, 304 on ``If-None-Match``), so a feed reader's conditional GET costs
nothing until the page changes.

Entry ids are stable: ``urn:newsroom:story:{story_id}``, the same in every version and every
feed, and an entry's ``updated`` is the story's, so a reader polling a feed sees a story once and
again only as an update, never as a duplicate. Its link is the story's representative article
(the publisher's URL, as on the page); a ``related`` link opens its Full Coverage on the reader
page. Feed and entry links are absolute, made from the address the feed was asked at.
"""

from __future__ import annotations

import re
import threading
import xml.etree.ElementTree as ET
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from serving.responses import CachedBody

ATOM_NS = "http://www.w3.org/2005/Atom"
ATOM_MEDIA_TYPE = "application/atom+xml"
GENERATOR = "newsroom"
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_MEMO_SIZE = 1024


def story_entry_id(story_id: str) -> str:
    """An entry's id: the same for a story in every feed and every version.

    >>> story_entry_id("0196f1c2a3b40001")
    'urn:newsroom:story:0196f1c2a3b40001'
    """
    return f"urn:newsroom:story:{story_id}"


def _text(value: object) -> str:
    """Text XML 1.0 can carry: characters it forbids (C0 controls, lone surrogates) are dropped."""
    return _NOT_XML.sub("", "" if value is None else str(value))


def _sub(parent: ET.Element, tag: str, text: object = None, **attrs: str) -> ET.Element:
    node = ET.SubElement(parent, f"{{{ATOM_NS}}}{tag}", {k: _text(v) for k, v in attrs.items()})
    if text is not None:
        node.text = _text(text)
    return node


def _is_http(url: object) -> bool:
    return isinstance(url, str) and url.startswith(("http://", "https://"))


def atom_feed(*, feed_id: str, title: str, updated: str, self_url: str, alternate_url: str,
              stories: Iterable[Mapping[str, Any]], base_url: str) -> bytes:
    """An Atom feed of story cards (a page's, a topic's or a search's), as UTF-8 bytes.

    Args:
        feed_id: A stable IRI for the feed (its own URL without volatile parameters).
        updated: The instant the feed's content was published (the page's ``as_of``).
        base_url: The reader page's address (``https://host/``), for the links to Full Coverage.
    """
    ET.register_namespace("", ATOM_NS)
    feed = ET.Element(f"{{{ATOM_NS}}}feed")
    _sub(feed, "id", feed_id)
    _sub(feed, "title", title)
    _sub(feed, "updated", updated)
    _sub(feed, "generator", GENERATOR)
    _sub(_sub(feed, "author"), "name", GENERATOR)  # RFC 4287 4.1.1: a feed with no entries needs one
    _sub(feed, "link", rel="self", type=ATOM_MEDIA_TYPE, href=self_url)
    _sub(feed, "link", rel="alternate", type="text/html", href=alternate_url)
    for story in stories:
        entry = _sub(feed, "entry")
        story_id = str(story.get("story_id"))
        _sub(entry, "id", story_entry_id(story_id))
        _sub(entry, "title", story.get("title") or "")
        _sub(entry, "updated", story.get("updated_at") or updated)
        if story.get("first_seen_at"):
            _sub(entry, "published", story["first_seen_at"])
        sources = [s for s in story.get("sources") or [] if isinstance(s, Mapping)]
        lead = sources[0] if sources else {}
        if _is_http(lead.get("url")):
            _sub(entry, "link", rel="alternate", type="text/html", href=lead["url"])
        if story.get("has_coverage", True):
            _sub(entry, "link", rel="related", type="text/html", href=f"{base_url}#/story/{quote(story_id, safe='')}")
        author = _sub(entry, "author")
        _sub(author, "name", lead.get("publisher") or lead.get("publisher_id") or GENERATOR)
        for section in story.get("sections") or []:
            _sub(entry, "category", term=str(section))
        if story.get("snippet"):
            _sub(entry, "summary", story["snippet"], type="text")
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(feed, encoding="utf-8", xml_declaration=False)


class AtomFeeds:
    """Feeds memoised per (what, version, address): built once per published version."""

    def __init__(self) -> None:
        self._memo: OrderedDict[tuple[object, ...], CachedBody] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[object, ...], build: Any) -> CachedBody:
        with self._lock:
            found = self._memo.get(key)
            if found is not None:
                self._memo.move_to_end(key)
                return found
        body = CachedBody.of(build())
        with self._lock:
            self._memo[key] = body
            while len(self._memo) > _MEMO_SIZE:
                self._memo.popitem(last=False)
        return body
