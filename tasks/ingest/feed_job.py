"""The record ingest's plan hands each shard: one due source (kept apart from ``plan.py`` so an article
worker, which unpickles it, imports neither Prefect nor the store)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from transforms.records import FeedState

SourceKind = Literal["feed"]
"""What a source is, and so which reader polls it (``tasks.ingest.readers.SOURCE_READERS``).

``feed``: a document fetched by URL and parsed by ``transforms.feeds.parse_feed``: RSS, Atom,
JSON Feed, and Google News sitemaps, which it tells apart by their content."""


def source_kind_of(feed: Mapping[str, object]) -> SourceKind:
    """The kind of a registered feed (a row of ``Registry.read_feeds``).

    The kind is not stored: the registry's feeds are all ``feed`` today, news sitemaps included. A
    kind that must be told apart is derived here from what the registry already stores, so no
    stored table changes shape.
    """
    return "feed"


@dataclass(frozen=True, slots=True)
class FeedJob:
    """One due source for a shard: where it is, whose it is, its state as stored, and its kind."""

    feed_id: str
    url: str
    publisher_id: str
    language: str
    region: str
    section_hint: str
    state: FeedState
    tier: int = 2
    push_keys: tuple[str, ...] = ()
    """Push markers (WebSub delivery, publisher ping) that put this feed in the priority lane."""
    site_languages: tuple[str, ...] = ()
    """The languages the registry's publishers declare: a page declaring none is guessed among these only."""
    kind: SourceKind = "feed"
    """Which source reader polls it (:func:`source_kind_of`)."""
