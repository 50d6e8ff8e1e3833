"""Every live page and the live story snapshot, held in memory and refreshed from the pointers.

Shared responses are the published bytes themselves, so every reader (and every replica) gets
byte-identical answers with the same ETag; each page version is also brotli- and gzip-compressed
once, when it is loaded (#20). When the store fails, the last good versions stay live.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from serving.errors import PageNotFoundError, StoryMovedError, StoryNotFoundError
from serving.responses import CachedBody
from warehouse import layout
from warehouse.errors import SnapshotNotFoundError
from warehouse.snapshots import (
    LivePage,
    PagePointer,
    dump_snapshot,
    list_page_folders,
    read_fallback_page,
    read_fallback_stories,
    read_live_page,
    read_live_stories,
    read_pointer,
)
from warehouse.store import ObjectStore

logger = logging.getLogger(__name__)

TOP_SECTION = "top"
_MAX_ALIAS_HOPS = 32


@dataclass(frozen=True, slots=True)
class CachedPage:
    edition: str
    section: str
    pointer: PagePointer
    body: CachedBody
    stories: tuple[Mapping[str, Any], ...] = ()
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
    parsed: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    articles: Mapping[str, ArticleRef] = field(default_factory=dict)
    problem: str | None = None
    """Why the live snapshot is not the one held (an older valid version stands in), or None."""


@dataclass(frozen=True, slots=True)
class Degraded:
    """Something this replica serves from an older version, or cannot serve (issue 16).

    ``what`` is ``edition/section`` or ``stories``; ``problem`` a reason without object keys (the
    log names those); ``serving_version`` the version served instead, or None when none is.
    """

    what: str
    problem: str
    serving_version: int | None


@dataclass(frozen=True, slots=True)
class CacheState:
    """An immutable view of the cache; a refresh swaps in a new one in a single assignment."""

    pages: Mapping[tuple[str, str], CachedPage] = field(default_factory=dict)
    stories: CachedStories | None = None
    editions: CachedBody = field(default_factory=lambda: CachedBody.compressed(b"[]"))
    refreshed_at: float | None = None
    last_refresh_ok: bool = False
    degraded: tuple[Degraded, ...] = ()


def _order_sections(sections: list[str]) -> list[str]:
    """``top`` first (the front page), then the rest alphabetically."""
    return sorted(sections, key=lambda s: (s != TOP_SECTION, s))


def _editions_body(pages: Mapping[tuple[str, str], CachedPage]) -> CachedBody:
    by_edition: dict[str, list[str]] = {}
    for edition, section in pages:
        by_edition.setdefault(edition, []).append(section)
    listing = [
        {"edition": edition, "sections": _order_sections(sections)}
        for edition, sections in sorted(by_edition.items())
    ]
    return CachedBody.compressed(json.dumps(listing, separators=(",", ":"), ensure_ascii=False).encode())


def _region_of(edition: str) -> str:
    return edition.rpartition("-")[2].upper()


def full_coverage(story: Mapping[str, Any]) -> dict[str, Any]:
    """A story snapshot entry with the Full Coverage views derived from its sources.

    Adds ``timeline`` (every article, oldest first), ``publishers`` (who covered it, most articles
    first), ``local_sources`` (per edition, the articles from publishers in that edition's
    region), ``opinion_count``, and ``linked`` (the same story in other languages; empty when the
    snapshot has none). Each source gets ``is_opinion`` (false when the snapshot does not say).
    """
    out = dict(story)
    sources = [dict(s, is_opinion=bool(s.get("is_opinion", False))) for s in story.get("sources") or []]
    out["sources"] = sources
    out["timeline"] = sorted(sources, key=lambda s: (str(s.get("first_seen_at")), str(s.get("article_id"))))
    publishers: dict[str, dict[str, Any]] = {}
    for s in sources:
        entry = publishers.setdefault(
            str(s["publisher_id"]),
            {"publisher_id": s["publisher_id"], "publisher": s.get("publisher"), "region": s.get("region"),
             "article_count": 0},
        )
        entry["article_count"] += 1
    out["publishers"] = sorted(
        publishers.values(), key=lambda p: (-p["article_count"], str(p["publisher"]), p["publisher_id"])
    )
    editions = [str(e) for e in story.get("editions") or []]
    out["local_sources"] = {
        edition: [
            s["article_id"]
            for s in sources
            if isinstance(s.get("region"), str) and s["region"].upper() == _region_of(edition)
        ]
        for edition in editions
    }
    out["opinion_count"] = sum(1 for s in sources if s["is_opinion"])
    linked = story.get("linked")
    out["linked"] = list(linked) if isinstance(linked, list) else []
    return out


def _parse_stories(data: bytes, version: int, pointer_etag: str, problem: str | None = None) -> CachedStories:
    raw: Any = json.loads(data)
    stories = raw.get("stories") if isinstance(raw, dict) else None
    aliases = (raw.get("aliases") or {}) if isinstance(raw, dict) else None
    if not isinstance(stories, dict) or not isinstance(aliases, dict):
        raise ValueError("story snapshot: 'stories' and 'aliases' must be objects")
    parsed = {str(k): full_coverage(v) for k, v in stories.items()}
    articles: dict[str, ArticleRef] = {}
    for story_id, story in sorted(parsed.items()):
        for source in story["sources"]:
            article_id, url = source.get("article_id"), source.get("url")
            if isinstance(article_id, str) and isinstance(url, str):
                articles.setdefault(article_id, ArticleRef(article_id, story_id, url))
    return CachedStories(
        version=version,
        pointer_etag=pointer_etag,
        stories=MappingProxyType({k: CachedBody.of(dump_snapshot(v)) for k, v in parsed.items()}),
        aliases=MappingProxyType({str(k): str(v) for k, v in aliases.items()}),
        parsed=MappingProxyType(parsed),
        articles=MappingProxyType(articles),
        problem=problem,
    )


def _parse_page_stories(data: bytes) -> tuple[Mapping[str, Any], ...]:
    raw: Any = json.loads(data)
    stories = raw.get("stories") if isinstance(raw, dict) else None
    if not isinstance(stories, list):
        raise ValueError("page: 'stories' must be a list")
    return tuple(s for s in stories if isinstance(s, dict) and "story_id" in s)


class SnapshotCache:
    """Live pages and stories from ``store``, refreshed by ``refresh()`` or a background thread."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._state = CacheState()
        self._refresh_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def state(self) -> CacheState:
        return self._state

    # -- reads (never touch the store) ---------------------------------------------------------

    def page(self, edition: str, section: str) -> CachedPage:
        """The live page. Raises PageNotFoundError."""
        found = self._state.pages.get((edition, section))
        if found is None:
            raise PageNotFoundError(edition, section)
        return found

    def editions(self) -> CachedBody:
        """``[{"edition", "sections"}]`` as JSON bytes, for every live page."""
        return self._state.editions

    def story(self, story_id: str) -> CachedBody:
        """One story's Full Coverage. Raises StoryMovedError for a merged id, else StoryNotFoundError."""
        snapshot = self._state.stories
        if snapshot is None:
            raise StoryNotFoundError(story_id)
        found = snapshot.stories.get(story_id)
        if found is not None:
            return found
        survivor = self._resolve_alias(snapshot, story_id)
        if survivor is None:
            raise StoryNotFoundError(story_id)
        raise StoryMovedError(story_id, survivor)

    def article(self, article_id: str) -> ArticleRef | None:
        """The live article with this id (its story and publisher URL), or None."""
        snapshot = self._state.stories
        return snapshot.articles.get(article_id) if snapshot is not None else None

    def story_version(self) -> int | None:
        snapshot = self._state.stories
        return snapshot.version if snapshot is not None else None

    def parsed_stories(self) -> Mapping[str, Mapping[str, Any]]:
        snapshot = self._state.stories
        return snapshot.parsed if snapshot is not None else {}

    def edition_pages(self, edition: str) -> list[CachedPage]:
        """Every live page of ``edition``, ``top`` first. Raises PageNotFoundError when none."""
        pages = [p for (e, _), p in self._state.pages.items() if e == edition]
        if not pages:
            raise PageNotFoundError(edition, TOP_SECTION)
        return sorted(pages, key=lambda p: (p.section != TOP_SECTION, p.section))

    @staticmethod
    def _resolve_alias(snapshot: CachedStories, story_id: str) -> str | None:
        # Follow merge chains (a -> b -> c) so a reader gets one redirect, not several; a
        # cycle or a chain that ends nowhere is answered as unknown.
        current, seen = story_id, {story_id}
        for _ in range(_MAX_ALIAS_HOPS):
            nxt = snapshot.aliases.get(current)
            if nxt is None:
                return current if current != story_id and current in snapshot.stories else None
            if nxt in seen:
                return None
            seen.add(nxt)
            current = nxt
        return None

    # -- refresh ------------------------------------------------------------------------------

    def refresh(self) -> bool:
        """Re-read the pointers and download only the versions that changed.

        Any failure of the store (unreachable, a missing or corrupt object) keeps the last good
        version of whatever could not be read, and is logged as a warning.

        Returns:
            True when every pointer and changed version was read cleanly.
        """
        with self._refresh_lock:
            old = self._state
            degraded: list[Degraded] = []
            try:
                live = list_page_folders(self._store)
            except Exception as e:  # any store failure: keep serving every page we have
                logger.warning("refresh_failed what=list_pages error=%s", _describe(e))
                pages, pages_ok = dict(old.pages), False
                degraded.append(Degraded("pages", "store unreachable", None))
            else:
                pages, pages_ok = self._refresh_pages(old, live, degraded)
            stories, stories_ok = self._refresh_stories(old.stories, degraded)
            ok = pages_ok and stories_ok
            editions = old.editions if pages.keys() == old.pages.keys() else _editions_body(pages)
            self._state = CacheState(
                pages=MappingProxyType(pages),
                stories=stories,
                editions=editions,
                refreshed_at=time.time(),
                last_refresh_ok=ok,
                degraded=tuple(degraded),
            )
            return ok

    def _refresh_pages(
        self, old: CacheState, live: list[tuple[str, str]], degraded: list[Degraded]
    ) -> tuple[dict[tuple[str, str], CachedPage], bool]:
        pages: dict[tuple[str, str], CachedPage] = {}
        ok = True
        for edition, section in live:
            current = old.pages.get((edition, section))
            try:
                pointer = read_pointer(self._store, edition, section)
                if pointer is not None and current is not None and current.pointer == pointer:
                    pages[(edition, section)] = current
                    continue
                fetched = read_live_page(self._store, edition, section)
                parsed = _parse_page_stories(fetched.data)
            except (SnapshotNotFoundError, ValueError) as e:
                # A damaged pointer or version (issue 16): keep what we hold, or, on a fresh start,
                # serve the newest valid version instead of nothing.
                ok = False
                reason = e.reason if isinstance(e, SnapshotNotFoundError) else "unreadable version"
                logger.warning("refresh_failed what=page edition=%s section=%s error=%s", edition, section,
                               _describe(e))
                held = current or self._fallback_page(edition, section)
                if held is not None:
                    pages[(edition, section)] = held
                degraded.append(Degraded(f"{edition}/{section}", reason, held.version if held else None))
                continue
            except Exception as e:  # the store failed: keep this page's last good version
                ok = False
                logger.warning(
                    "refresh_failed what=page edition=%s section=%s error=%s", edition, section, _describe(e)
                )
                if current is not None:
                    pages[(edition, section)] = current
                degraded.append(Degraded(f"{edition}/{section}", "store unreachable",
                                         current.version if current else None))
                continue
            pages[(edition, section)] = CachedPage(
                edition, section, fetched.pointer, CachedBody.compressed(fetched.data), parsed
            )
            logger.info(
                "page_loaded edition=%s section=%s version=%d", edition, section, fetched.pointer.version
            )
        return pages, ok

    def _fallback_page(self, edition: str, section: str) -> CachedPage | None:
        """The newest valid version of a page whose live one cannot be read, or None."""
        try:
            fallback = read_fallback_page(self._store, edition, section)
            if fallback is None:
                return None
            parsed = _parse_page_stories(fallback.data)
        except Exception as e:  # nothing valid to stand in
            logger.warning("fallback_failed what=page edition=%s section=%s error=%s", edition, section, _describe(e))
            return None
        logger.warning("page_fallback edition=%s section=%s version=%d", edition, section, fallback.pointer.version)
        return CachedPage(edition, section, fallback.pointer, CachedBody.compressed(fallback.data), parsed)

    def _refresh_stories(
        self, current: CachedStories | None, degraded: list[Degraded]
    ) -> tuple[CachedStories | None, bool]:
        pointer_key = layout.story_snapshot_pointer_key()
        pointer_etag: str | None = None
        try:
            # The pointer object's ETag changes whenever the pointer moves, so a HEAD is enough to
            # skip an unchanged snapshot without downloading it.
            pointer_etag = self._store.head(pointer_key)
            if current is not None and current.pointer_etag == (pointer_etag or ""):
                if current.problem is not None:
                    degraded.append(Degraded("stories", current.problem, current.version))
                return current, current.problem is None
            if pointer_etag is None:
                live: LivePage | None = None
            else:
                live = read_live_stories(self._store)
                if current is not None and current.problem is None and current.version == live.pointer.version:
                    return (
                        CachedStories(
                            current.version, pointer_etag, current.stories, current.aliases, current.parsed,
                            current.articles,
                        ),
                        True,
                    )
                parsed = _parse_stories(live.data, live.pointer.version, pointer_etag)
        except (SnapshotNotFoundError, ValueError, TypeError, AttributeError, KeyError) as e:  # damaged (issue 16)
            reason = e.reason if isinstance(e, SnapshotNotFoundError) else "unreadable version"
            logger.warning("refresh_failed what=stories error=%s", _describe(e))
            held = current or self._fallback_stories(pointer_etag or "", reason)
            degraded.append(Degraded("stories", reason, held.version if held else None))
            return held, False
        except Exception as e:  # the store failed: keep the last good story snapshot
            logger.warning("refresh_failed what=stories error=%s", _describe(e))
            degraded.append(Degraded("stories", "store unreachable", current.version if current else None))
            return current, False
        if live is None:  # no pointer: before the first publish, or lost (then older versions stand in)
            held = current or self._fallback_stories("", "no live version")
            if held is None:
                return None, True
            degraded.append(Degraded("stories", "no live version", held.version))
            return held, False
        logger.info("stories_loaded version=%d stories=%d", parsed.version, len(parsed.stories))
        return parsed, True

    def _fallback_stories(self, pointer_etag: str, reason: str) -> CachedStories | None:
        """The newest valid story snapshot when the live one cannot be read, or None."""
        try:
            fallback = read_fallback_stories(self._store)
            if fallback is None:
                return None
            parsed = _parse_stories(fallback.data, fallback.pointer.version, pointer_etag, problem=reason)
        except Exception as e:  # nothing valid to stand in
            logger.warning("fallback_failed what=stories error=%s", _describe(e))
            return None
        logger.warning("stories_fallback version=%d", parsed.version)
        return parsed

    # -- background refresher -----------------------------------------------------------------

    def start(self, interval_seconds: float) -> None:
        """Refresh every ``interval_seconds`` on a daemon thread until ``stop()``."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, args=(interval_seconds,), name="snapshot-cache-refresh", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the background refresher and wait for it to finish its current refresh."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self, interval_seconds: float) -> None:
        while not self._stop.wait(interval_seconds):
            try:
                self.refresh()
            except Exception:  # a bug, not a store failure: log it, keep the thread alive
                logger.exception("refresh_crashed")


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"
