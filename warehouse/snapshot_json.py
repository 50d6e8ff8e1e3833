"""The JSON objects a snapshot version holds (docs/snapshots.md), as types.

Pages, pools and the story snapshot are written by rank & publish and served as stored, byte for
byte; these ``TypedDict`` s name their keys for the code that reads them (serving's cache, the
repair and explain jobs) without copying them into other records. Every key beyond a version's
header is optional here: a version is checked for its header and story list
(:func:`warehouse.snapshots.version_problem`), not for each story's fields.
"""

from __future__ import annotations

from typing import TypedDict


class SourceJson(TypedDict, total=False):
    """One article listed under a story (``sources``; a pool card's ``representative``)."""

    article_id: str
    publisher_id: str
    publisher: str
    region: str | None
    title: str
    url: str
    first_seen_at: str
    is_copy: bool
    is_opinion: bool
    is_paywalled: bool


class RepresentativeChoiceJson(TypedDict):
    """How a page's ``sources[0]`` was chosen (issue 18)."""

    candidates: int
    near_ties: list[str]
    stepped_aside: list[str]


class LinkedStoryJson(TypedDict):
    """A story in another language that a story snapshot's story links to."""

    story_id: str
    language: str
    title: str


class StoryJson(TypedDict, total=False):
    """A story as a page lists it, a pool card, or a story snapshot's Full Coverage entry."""

    story_id: str
    rank: int
    score: float
    score_parts: dict[str, float]
    is_breaking: bool
    breaking_since: str | None
    title: str
    snippet: str
    image_url: str | None
    sections: list[str]
    language: str
    first_seen_at: str
    updated_at: str
    source_count: int
    article_count: int
    sources: list[SourceJson]
    representative: SourceJson
    representative_id: str
    representative_choice: RepresentativeChoiceJson
    editions: list[str]
    linked: list[LinkedStoryJson]


class ImpressionsJson(TypedDict):
    """A pool's representative impressions for the day (story-slot minutes per publisher)."""

    day: str
    counts: dict[str, float]


class SnapshotJson(TypedDict, total=False):
    """A snapshot version: a page (``newsroom.page/1``), a pool (``newsroom.pool/1``) or the story
    snapshot (``newsroom.stories/1``, whose ``stories`` map story ids to stories, beside ``aliases``).

    ``version`` and ``as_of`` are None only in the copy a publish compares with the live one.
    """

    schema: str
    version: int | None
    as_of: str | None
    edition: str
    section: str
    stories: list[StoryJson] | dict[str, StoryJson]
    ranking: dict[str, float]
    impressions: ImpressionsJson
    representatives: list[str]
    aliases: dict[str, str]


class StorySnapshotJson(TypedDict, total=False):
    """The story snapshot (``pages/stories/v{n}.json``): Full Coverage of every live story."""

    schema: str
    version: int
    as_of: str
    stories: dict[str, StoryJson]
    aliases: dict[str, str]
