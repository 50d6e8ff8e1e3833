"""The records the snapshot cache holds: pages, the story snapshot, what each pointer gave, and
what a replica serves from an older version (issues 16, 32).

Immutable, so a refresh builds a new :class:`CacheState` and swaps it in with one assignment,
and a request reads one consistent view without a lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from serving.coverage import FullCoverageJson
from serving.responses import CachedBody
from warehouse.pointers import PagePointer
from warehouse.servable import SkippedVersion
from warehouse.snapshot_json import StoryJson


@dataclass(frozen=True, slots=True)
class CachedPage:
    edition: str
    section: str
    pointer: PagePointer
    body: CachedBody
    stories: tuple[StoryJson, ...] = ()
    """The page's story objects, parsed once (the For-you pool is built from them)."""

    @property
    def version(self) -> int:
        return self.pointer.version


@dataclass(frozen=True, slots=True)
class ArticleRef:
    """Where a live article points: what ``POST /v1/click-token`` is allowed to sign."""

    article_id: str
    story_id: str
    url: str


@dataclass(frozen=True, slots=True)
class CachedStories:
    """One story snapshot version, parsed once: each story pre-serialised for lookups."""

    version: int
    pointer_etag: str
    stories: Mapping[str, CachedBody]
    aliases: Mapping[str, str]
    parsed: Mapping[str, FullCoverageJson] = field(default_factory=dict)
    articles: Mapping[str, ArticleRef] = field(default_factory=dict)
    problem: str | None = None
    """Why the live snapshot is not the one held (an older valid version stands in), or None."""
    sha256: str = ""
    """Of the version's bytes: a pointer moved to the same bytes is not parsed again."""
    borrowed: Mapping[str, int | None] = field(default_factory=dict)
    """Stories a live page lists that this version lacks: story id -> the older valid version that
    answers it, or None when the pages' cards do (``_answer_listed_stories``)."""


@dataclass(frozen=True, slots=True)
class Degraded:
    """Something this replica serves from an older version, or cannot serve (issues 16, 32).

    ``what`` is ``edition/section``, ``stories`` (the story snapshot), ``stories/{story_id}`` (a
    story a live page lists) or ``pages`` (the listing); ``problem`` a reason without object keys
    (the log names those); ``serving_version`` the version served instead, or None when none is.
    """

    what: str
    problem: str
    serving_version: int | None
    skipped: tuple[SkippedVersion, ...] = ()
    """Every version passed over on the way to the one served, with why."""


@dataclass(frozen=True, slots=True)
class HeldPage:
    """What one page's pointer gave at the last refresh that read it: the newest version passing
    the pointer's checks (None when none does), why it is not the live one (None when it is), and
    the versions passed over. Kept as is while the pointer object is unchanged."""

    pointer_etag: str | None
    page: CachedPage | None
    problem: str | None = None
    skipped: tuple[SkippedVersion, ...] = ()


@dataclass(frozen=True, slots=True)
class HeldStories:
    """What the story snapshot's pointer gave, as :class:`HeldPage` for a page."""

    pointer_etag: str | None
    stories: CachedStories | None
    problem: str | None = None
    skipped: tuple[SkippedVersion, ...] = ()


@dataclass(frozen=True, slots=True)
class LinkedStories:
    """The stories answered for one set of held page versions and one story snapshot (``key``):
    computed again only when one of them changes."""

    key: tuple[object, ...]
    stories: CachedStories | None
    degraded: tuple[Degraded, ...] = ()


@dataclass(frozen=True, slots=True)
class CacheState:
    """An immutable view of the cache; a refresh swaps in a new one in a single assignment."""

    pages: Mapping[tuple[str, str], CachedPage] = field(default_factory=dict)
    stories: CachedStories | None = None
    editions: CachedBody = field(default_factory=lambda: CachedBody.compressed(b"[]"))
    refreshed_at: float | None = None
    last_refresh_ok: bool = False
    degraded: tuple[Degraded, ...] = ()
    held_pages: Mapping[tuple[str, str], HeldPage] = field(default_factory=dict)
    """Per page folder, what its pointer gave (``pages`` holds the versions found)."""
    held_stories: HeldStories | None = None
    linked: LinkedStories | None = None
