"""The records a feed becomes (``FeedItem``, ``ParsedFeed``) and what every format's items go through last.

Whichever reader parsed a document, its items end here: a stable ``guid`` (``item_guid``), one
item per (guid, link) pair, a guid shared by items with different links made distinct
(``_dedupe_items``), and a title for an item without one (``finish_items``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from transforms.feeds.fields import title_from_summary

FEED_MAX_BYTES = 10 * 1024 * 1024
FEED_MAX_ITEMS = 500
# A publication time before the web had news sites, or more than a day after we first saw the
# article, is a CMS default (1900, 1970), a placeholder (9999) or a wrong time zone gone far: it is
# not used for discovery lag, polling rates or ranking (#16); the claim is kept on its own.
EARLIEST_PUBLISHED_AT = datetime(1995, 1, 1, tzinfo=UTC)
PUBLISHED_FUTURE_SLACK = timedelta(days=1)


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
    ttl_minutes: int | None = None
    skip_hours: frozenset[int] = frozenset()
    skip_days: frozenset[str] = frozenset()
    hub_url: str | None = None
    self_url: str | None = None
    is_malformed: bool = False
    error: str | None = None


def empty_feed(*, is_malformed: bool, error: str | None) -> ParsedFeed:
    return ParsedFeed(title=None, link=None, language=None, items=(), is_malformed=is_malformed, error=error)


def finish_items(items: Iterable[FeedItem], max_items: int) -> tuple[FeedItem, ...]:
    """What every format's items go through last, whichever reader parsed them: duplicates dropped
    (:func:`_dedupe_items`), then a title for each item that has none (:func:`title_from_summary`)."""
    return tuple(item if item.title else dataclasses.replace(item, title=title_from_summary(item.summary))
                 for item in _dedupe_items(items, max_items))


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


def item_guid(raw_id: object, link: str | None, title: str, published: str, summary: object) -> str:
    """The entry's own id, else its link, else a hash of title and date (summary if both empty)."""
    if isinstance(raw_id, str) and raw_id.strip():
        return raw_id.strip()
    if link:
        return link
    key = f"{title}\n{published}" if title or published else f"\n\n{summary or ''}"
    return "sha1:" + hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()


def is_plausible_published_at(value: datetime, seen_at: datetime) -> bool:
    """Whether a stated publication time can be true of an article first seen at ``seen_at``.

    >>> seen = datetime(2026, 5, 1, tzinfo=UTC)
    >>> [is_plausible_published_at(datetime(y, 1, 1, tzinfo=UTC), seen) for y in (1900, 1970, 2026, 9999)]
    [False, False, True, False]
    >>> is_plausible_published_at(seen + timedelta(hours=23), seen), is_plausible_published_at(seen + timedelta(days=2), seen)
    (True, False)
    """
    return EARLIEST_PUBLISHED_AT <= value <= seen_at + PUBLISHED_FUTURE_SLACK
