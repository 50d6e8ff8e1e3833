"""The JSON shapes of pages, as rank writes and reads them back: the member rows page assembly
reads, the story cards and the story snapshot (Full Coverage), and what rank reads of a published
page. Typed dicts, because they are JSON objects on both sides: ``dump_snapshot`` writes them as they
are, and what a store holds comes back as the same keys."""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from transforms.story_aggregates import MemberRow


class PageMember(MemberRow, total=False):
    """A member article as pages read it: a member row (``story_members.sql``; its embedding
    dequantized into ``embedding``, without ``embedding_q``, ``embedding_scale`` and
    ``assigned_offset``) joined to its publisher's registry entry."""

    is_copy: bool
    publisher: str | None
    region: str | None
    authority: float | None
    is_paywalled: bool | None
    embedding: np.ndarray | None


class LinkedStory(TypedDict):
    """A story of the same link group in another language (``linked`` in the story snapshot)."""

    story_id: str
    language: str
    title: str


class StoryCard(TypedDict):
    """One story object (:func:`build_story`): the representative first, then its sources."""

    story_id: str
    title: str
    snippet: str
    image_url: str | None
    language: str
    sections: list[str]
    first_seen_at: str | None
    updated_at: str | None
    source_count: int
    article_count: int
    representative_id: str
    sources: list[dict[str, object]]


class StoryEntry(StoryCard, total=False):
    """A story of the story snapshot (Full Coverage): its card over every member, the editions
    listing it and its links in other languages."""

    editions: list[str]
    linked: list[LinkedStory]


class StorySnapshot(TypedDict):
    """The story snapshot (``pages/stories/v{n}.json``, schema ``newsroom.stories/1``)."""

    schema: str
    as_of: str | None
    stories: dict[str, StoryEntry]
    aliases: dict[str, str]


class PublishedStory(TypedDict, total=False):
    """What rank reads back of a story on a published page."""

    story_id: str


class PoolImpressions(TypedDict):
    day: str
    counts: dict[str, float]


class PublishedPage(TypedDict, total=False):
    """What rank reads back of a published page or pool version (JSON read from the store)."""

    schema: str
    edition: str
    section: str
    as_of: str
    version: int
    stories: list[PublishedStory]
    impressions: PoolImpressions
    representatives: list[str]
