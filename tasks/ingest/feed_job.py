"""The record ingest's plan hands each shard: one due feed (kept apart from ``plan.py`` so an article
worker, which unpickles it, imports neither Prefect nor the store)."""

from __future__ import annotations

from dataclasses import dataclass

from transforms.records import FeedState


@dataclass(frozen=True, slots=True)
class FeedJob:
    """One due feed for a shard: where it is, whose it is, and its state as stored."""

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
