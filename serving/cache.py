"""Every live page and the live story snapshot, held in memory and refreshed from the pointers.

Shared responses are the published bytes themselves, so every reader (and every replica) gets
byte-identical answers with the same ETag; each page version is also brotli- and gzip-compressed
once, when it is loaded (#20). When the store fails, the last good versions stay live. The
records it holds are in :mod:`serving.cache_state`; Full Coverage is built by :mod:`serving.coverage`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Set
from types import MappingProxyType
from typing import Any

from serving.cache_state import (
    ArticleRef,
    CachedPage,
    CachedStories,
    CacheState,
    Degraded,
    HeldPage,
    HeldStories,
    LinkedStories,
)
from serving.coverage import TOP_SECTION, FullCoverageJson, full_coverage, story_from_cards
from serving.errors import PageNotFoundError, StoryMovedError, StoryNotFoundError
from serving.responses import CachedBody
from warehouse import layout
from warehouse.pointers import PagePointer, PointerRead, read_pointer_state
from warehouse.search_index import SearchMetaJson
from warehouse.servable import SkippedVersion, servable_versions
from warehouse.snapshot_json import SnapshotJson, StoryJson
from warehouse.snapshots import LivePage, dump_snapshot, list_page_folders
from warehouse.store import ObjectStore

logger = logging.getLogger(__name__)

_MAX_ALIAS_HOPS = 32


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


def _parse_stories(payload: SnapshotJson | SearchMetaJson, version: int, pointer_etag: str, problem: str | None = None,
                   sha256: str = "") -> CachedStories:
    stories = payload.get("stories")
    aliases = payload.get("aliases") or {}
    if not isinstance(stories, dict) or not isinstance(aliases, dict):
        raise ValueError("story snapshot: 'stories' and 'aliases' must be objects")
    parsed = {str(k): full_coverage(v) for k, v in stories.items()}
    return CachedStories(
        version=version,
        pointer_etag=pointer_etag,
        stories=MappingProxyType({k: CachedBody.of(dump_snapshot(v)) for k, v in parsed.items()}),
        aliases=MappingProxyType({str(k): str(v) for k, v in aliases.items()}),
        parsed=MappingProxyType(parsed),
        articles=MappingProxyType(_article_refs(parsed)),
        problem=problem,
        sha256=sha256,
    )


def _article_refs(parsed: Mapping[str, FullCoverageJson],
                  into: Mapping[str, ArticleRef] | None = None) -> dict[str, ArticleRef]:
    """Each article of ``parsed`` (Full Coverage stories by id) -> its story and URL, added to ``into``."""
    articles = dict(into or {})
    for story_id, story in sorted(parsed.items()):
        for source in story["sources"]:
            article_id, url = source.get("article_id"), source.get("url")
            if isinstance(article_id, str) and isinstance(url, str):
                articles.setdefault(article_id, ArticleRef(article_id, story_id, url))
    return articles


def _parse_page_stories(payload: SnapshotJson | SearchMetaJson) -> tuple[StoryJson, ...]:
    stories = payload.get("stories")
    if not isinstance(stories, list):
        raise ValueError("page: 'stories' must be a list")
    return tuple(s for s in stories if isinstance(s, dict) and "story_id" in s)


def _payload_of(version: LivePage) -> SnapshotJson | SearchMetaJson:
    if version.payload is not None:
        return version.payload
    raw: Any = json.loads(version.data)
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    return raw


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

    def parsed_stories(self) -> Mapping[str, FullCoverageJson]:
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

        Every page and the story snapshot is the newest version passing its pointer's checks
        (``servable_versions``), and every story a served page lists is answered
        (``_answer_listed_stories``). Any failure of the store keeps the last good version of
        whatever could not be read, and is logged as a warning.

        Returns:
            True when every pointer and changed version was read cleanly (a story answered from an
            older version, or by none, is still named in ``degraded``).
        """
        with self._refresh_lock:
            old = self._state
            degraded: list[Degraded] = []
            try:
                folders = list_page_folders(self._store)
            except Exception as e:  # any store failure: keep serving every page we have
                logger.warning("refresh_failed what=list_pages error=%s", _describe(e))
                held_pages, pages_ok = dict(old.held_pages), False
                degraded.append(Degraded("pages", "store unreachable", None))
            else:
                held_pages, pages_ok = self._refresh_pages(old.held_pages, folders, degraded)
            held_stories, stories_ok = self._refresh_stories(old.held_stories, degraded)
            linked = self._answer_listed_stories(old.linked, held_pages, held_stories)
            degraded = _merged([*degraded, *linked.degraded])
            pages = {k: h.page for k, h in held_pages.items() if h.page is not None}
            editions = old.editions if pages.keys() == old.pages.keys() else _editions_body(pages)
            ok = pages_ok and stories_ok
            self._state = CacheState(
                pages=MappingProxyType(pages),
                stories=linked.stories,
                editions=editions,
                refreshed_at=time.time(),
                last_refresh_ok=ok,
                degraded=tuple(degraded),
                held_pages=MappingProxyType(held_pages),
                held_stories=held_stories,
                linked=linked,
            )
            return ok

    # -- pages: the newest version passing the pointer's checks ---------------------------------

    def _refresh_pages(
        self, old: Mapping[tuple[str, str], HeldPage], folders: list[tuple[str, str]], degraded: list[Degraded]
    ) -> tuple[dict[tuple[str, str], HeldPage], bool]:
        held: dict[tuple[str, str], HeldPage] = {}
        ok = True
        for edition, section in folders:
            current = old.get((edition, section))
            try:
                entry = self._load_page(edition, section, current)
            except Exception as e:  # the store failed: keep this page's last good version
                ok = False
                logger.warning(
                    "refresh_failed what=page edition=%s section=%s error=%s", edition, section, _describe(e)
                )
                if current is not None:
                    held[(edition, section)] = current
                degraded.append(Degraded(f"{edition}/{section}", "store unreachable",
                                         current.page.version if current and current.page else None))
                continue
            held[(edition, section)] = entry
            if entry.problem is not None:
                ok = False
                degraded.append(Degraded(f"{edition}/{section}", entry.problem,
                                         entry.page.version if entry.page else None, entry.skipped))
        return held, ok

    def _load_page(self, edition: str, section: str, current: HeldPage | None) -> HeldPage:
        """The newest version of one page that passes its pointer's checks (issue 32).

        Unchanged pointer bytes keep what was found for them: a damaged page is looked at again
        when its pointer moves (a publish, a rollback, ``newsroom doctor --repair``).
        """
        found = read_pointer_state(self._store, layout.page_pointer_key(edition, section))
        if current is not None and current.pointer_etag == found.etag:
            return current
        skipped: list[SkippedVersion] = []
        page: CachedPage | None = None
        held = current.page if current else None
        for candidate in servable_versions(self._store, layout.page_pointer_key(edition, section), found):
            if isinstance(candidate, SkippedVersion):
                skipped.append(candidate)
                continue
            if held is not None and _is_newer_fallback(held, candidate, found):
                page = held  # checked when loaded; gone from the store since, or damaged there
                break
            page = self._cached_page(edition, section, candidate, held)
            if page is not None:
                break
            skipped.append(SkippedVersion(candidate.pointer.version, "unreadable page"))
        problem = _why_not_live(found, page.pointer if page else None, skipped)
        for s in skipped:
            logger.warning("version_skipped what=page edition=%s section=%s version=%d problem=%s key=%s",
                           edition, section, s.version, s.problem, layout.page_version_key(edition, section, s.version))
        if problem is not None:
            logger.warning("page_fallback edition=%s section=%s problem=%s version=%s", edition, section, problem,
                           page.version if page else None)
        elif page is not None:
            logger.info("page_loaded edition=%s section=%s version=%d", edition, section, page.version)
        return HeldPage(found.etag, page, problem, tuple(skipped))

    @staticmethod
    def _cached_page(edition: str, section: str, version: LivePage, held: CachedPage | None) -> CachedPage | None:
        """``version`` ready to serve (the held one when its bytes are the same), or None when its
        stories cannot be read."""
        if held is not None and held.pointer.sha256 == version.pointer.sha256:
            return dataclasses.replace(held, pointer=version.pointer)
        try:
            parsed = _parse_page_stories(_payload_of(version))
        except (ValueError, TypeError) as e:
            logger.warning("page_unreadable edition=%s section=%s version=%d error=%s", edition, section,
                           version.pointer.version, _describe(e))
            return None
        return CachedPage(edition, section, version.pointer, CachedBody.compressed(version.data), parsed)

    # -- the story snapshot ---------------------------------------------------------------------

    def _refresh_stories(self, current: HeldStories | None, degraded: list[Degraded]) -> tuple[HeldStories | None, bool]:
        try:
            entry = self._load_stories(current)
        except Exception as e:  # the store failed: keep the last good story snapshot
            logger.warning("refresh_failed what=stories error=%s", _describe(e))
            held = current.stories if current else None
            degraded.append(Degraded("stories", "store unreachable", held.version if held else None))
            return current, False
        if entry.problem is None:
            return entry, True
        if entry.stories is None and not entry.skipped and entry.pointer_etag is None:
            return entry, True  # nothing published yet
        degraded.append(Degraded("stories", entry.problem, entry.stories.version if entry.stories else None,
                                 entry.skipped))
        return entry, False

    def _load_stories(self, current: HeldStories | None) -> HeldStories:
        """The newest story snapshot that passes its pointer's checks, as :meth:`_load_page`."""
        pointer_key = layout.story_snapshot_pointer_key()
        found = read_pointer_state(self._store, pointer_key)
        if current is not None and current.pointer_etag == found.etag:
            return current
        held = current.stories if current else None
        skipped: list[SkippedVersion] = []
        stories: CachedStories | None = None
        problem = _why_not_live(found, None, skipped)
        for candidate in servable_versions(self._store, pointer_key, found):
            if isinstance(candidate, SkippedVersion):
                skipped.append(candidate)
                continue
            problem = _why_not_live(found, candidate.pointer, skipped)
            if held is not None and held.sha256 == candidate.pointer.sha256:
                stories = dataclasses.replace(held, version=candidate.pointer.version, pointer_etag=found.etag or "",
                                              problem=problem)
                break
            try:
                stories = _parse_stories(_payload_of(candidate), candidate.pointer.version, found.etag or "", problem,
                                         candidate.pointer.sha256)
                break
            except (ValueError, TypeError, AttributeError, KeyError) as e:
                logger.warning("stories_unreadable version=%d error=%s", candidate.pointer.version, _describe(e))
                skipped.append(SkippedVersion(candidate.pointer.version, "unreadable story snapshot"))
        if stories is None:
            problem = _why_not_live(found, None, skipped)
        for s in skipped:
            logger.warning("version_skipped what=stories version=%d problem=%s key=%s", s.version, s.problem,
                           layout.story_snapshot_key(s.version))
        if stories is not None and problem is None:
            logger.info("stories_loaded version=%d stories=%d", stories.version, len(stories.stories))
        elif stories is not None:
            logger.warning("stories_fallback version=%d problem=%s", stories.version, problem)
        return HeldStories(found.etag, stories, problem, tuple(skipped))

    # -- stories the served pages list ----------------------------------------------------------

    def _answer_listed_stories(self, previous: LinkedStories | None, held_pages: Mapping[tuple[str, str], HeldPage],
                               held_stories: HeldStories | None) -> LinkedStories:
        """The stories to answer so that every story a served page lists opens (issue 32;
        docs/store-faults.md), each from the first of:

        1. the story snapshot held (the live one, or the newest valid one standing in);
        2. the newest older valid story snapshot that has it (:func:`_find_in_older_snapshots`);
        3. the cards of the served pages that list it (:func:`_story_from_cards`): the articles
           they show, marked ``is_partial``.

        Pages are never swapped for older versions here: each stays the newest that passes its
        pointer's checks. Every story answered by 2 or 3 is a :class:`Degraded`. Computed again
        only when a held page version or the story snapshot changes.
        """
        pages = {k: h.page for k, h in held_pages.items() if h.page is not None}
        stories = held_stories.stories if held_stories else None
        key = (stories.version if stories else None, stories.sha256 if stories else None,
               tuple(sorted((k, p.pointer.sha256) for k, p in pages.items())))
        if previous is not None and previous.key == key:
            return previous
        wanted = {sid for p in pages.values() for sid in _unanswered(p.stories, stories)} if stories else set()
        if stories is None or not wanted:
            # With no valid story snapshot at all, its own entry in /healthz says so.
            return LinkedStories(key, stories)
        degraded: list[Degraded] = []
        try:
            older, skipped = _find_in_older_snapshots(self._store, stories.version, wanted)
        except Exception as e:  # the store failed while looking back: the cards answer; look again next time
            logger.warning("refresh_failed what=older_stories error=%s", _describe(e))
            older, skipped, key = {}, [], ()
            degraded.append(Degraded("stories", "store unreachable while looking for stories the pages list",
                                     stories.version))
        from_cards: dict[str, tuple[list[str], FullCoverageJson]] = {}
        cards = {k: p.stories for k, p in pages.items()}
        for sid in sorted(wanted - older.keys()):
            where, story = story_from_cards(sid, cards)
            try:
                full_coverage(story)
            except (ValueError, TypeError, AttributeError, KeyError) as e:  # a card we cannot read either
                logger.warning("story_unanswered story_id=%s pages=%s error=%s", sid, ",".join(where), _describe(e))
                degraded.append(Degraded(f"stories/{sid}", f"in no valid story snapshot; listed on {', '.join(where)}",
                                         None))
                continue
            from_cards[sid] = (where, story)
        for sid, (version, _) in sorted(older.items()):
            logger.warning("story_from_older_version story_id=%s version=%d", sid, version)
            degraded.append(Degraded(f"stories/{sid}", "not in the story snapshot served; answered from an older "
                                     "valid version", version))
        for sid, (where, _) in from_cards.items():
            logger.warning("story_from_cards story_id=%s pages=%s", sid, ",".join(where))
            degraded.append(Degraded(f"stories/{sid}", f"in no valid story snapshot; answered from the cards of "
                                     f"{', '.join(where)}", None))
        if skipped:
            degraded.append(Degraded("stories", "older versions passed over looking for stories the pages list",
                                     stories.version, tuple(skipped)))
        answered = _with_answered(stories, older, {sid: story for sid, (_, story) in from_cards.items()})
        return LinkedStories(key, answered, tuple(degraded))

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


# -- helpers of the page and story loading (issue 32) ------------------------------------------


def _why_not_live(found: PointerRead, served: PagePointer | None, skipped: list[SkippedVersion]) -> str | None:
    """None when ``served`` is the version the pointer names; else why it is not (the pointer's
    problem, or the live version's, or ``no valid version`` when nothing is served)."""
    live = found.pointer
    if served is not None and live is not None and (served.version, served.sha256) == (live.version, live.sha256):
        return None
    if found.problem is not None:
        return found.problem
    return skipped[0].problem if skipped else "no valid version"


def _is_newer_fallback(held: CachedPage, candidate: LivePage, found: PointerRead) -> bool:
    """Whether the version held, checked when it was loaded, is a better stand-in than the older
    ``candidate`` found in the store: newer, and one the pointer published below its live version."""
    live = found.pointer
    return (candidate.pointer is not live and held.version > candidate.pointer.version
            and (live is None or (held.version < live.version and live.was_published(held.version))))


def _merged(degraded: list[Degraded]) -> list[Degraded]:
    """One entry per ``what``: the first one's problem and version, every version passed over."""
    by_what: dict[str, Degraded] = {}
    for entry in degraded:
        first = by_what.get(entry.what)
        by_what[entry.what] = entry if first is None else dataclasses.replace(
            first, skipped=(*first.skipped, *entry.skipped))
    return list(by_what.values())


def _answers(stories: CachedStories, story_id: str) -> bool:
    """Whether ``stories`` answers ``story_id``: Full Coverage, or a 301 to its survivor."""
    return story_id in stories.stories or SnapshotCache._resolve_alias(stories, story_id) is not None


def _unanswered(listed: Iterable[StoryJson], stories: CachedStories) -> set[str]:
    """The ids of the ``listed`` story cards that ``stories`` does not answer."""
    return {str(c["story_id"]) for c in listed if not _answers(stories, str(c["story_id"]))}


def _with_answered(stories: CachedStories, older: Mapping[str, tuple[int, StoryJson]],
                   from_cards: Mapping[str, StoryJson]) -> CachedStories:
    """``stories`` plus the stories answered from older versions (``story id -> (version, story)``)
    and from page cards (``story id -> story``)."""
    if not older and not from_cards:
        return stories
    parsed = {**{sid: full_coverage(story) for sid, (_, story) in older.items()},
              **{sid: full_coverage(story) for sid, story in from_cards.items()}}
    return dataclasses.replace(
        stories,
        stories=MappingProxyType({**stories.stories, **{k: CachedBody.of(dump_snapshot(v)) for k, v in parsed.items()}}),
        parsed=MappingProxyType({**stories.parsed, **parsed}),
        articles=MappingProxyType(_article_refs(parsed, stories.articles)),
        borrowed=MappingProxyType({**{sid: version for sid, (version, _) in older.items()},
                                   **dict.fromkeys(from_cards, None)}),
    )


def _find_in_older_snapshots(store: ObjectStore, below: int, wanted: Set[str]
                             ) -> tuple[dict[str, tuple[int, StoryJson]], list[SkippedVersion]]:
    """Each story of ``wanted`` from the newest valid story snapshot below ``below`` holding it
    (``story id -> (version, story)``), and the versions passed over on the way.

    Reads the snapshot's versions only (``servable_versions``: one listing of its folder, then at
    most ``FALLBACK_SEARCH_VERSIONS`` versions, newest first), and stops as soon as every wanted
    story is found. A story whose Full Coverage cannot be built is looked for further back.
    """
    pointer_key = layout.story_snapshot_pointer_key()
    found: dict[str, tuple[int, StoryJson]] = {}
    skipped: list[SkippedVersion] = []
    remaining = set(wanted)
    for candidate in servable_versions(store, pointer_key, read_pointer_state(store, pointer_key), below=below):
        if isinstance(candidate, SkippedVersion):
            skipped.append(candidate)
            continue
        held = _payload_of(candidate).get("stories")
        held = held if isinstance(held, dict) else {}
        for sid in sorted(remaining & held.keys()):
            try:
                full_coverage(held[sid])
            except (ValueError, TypeError, AttributeError, KeyError) as e:
                logger.warning("story_unreadable story_id=%s version=%d error=%s", sid, candidate.pointer.version,
                               _describe(e))
                continue
            found[sid] = (candidate.pointer.version, held[sid])
            remaining.discard(sid)
        if not remaining:
            break
    return found, skipped
