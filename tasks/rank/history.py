"""Published page versions as the store holds them: which version of each page was live when."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import cast

from transforms.page_json import PublishedPage, StoryEntry
from warehouse import layout
from warehouse.damage import record_damage
from warehouse.errors import SnapshotNotFoundError
from warehouse.pointers import PagePointer
from warehouse.snapshots import (
    published_story_snapshots,
    read_json_payload,
    read_pointer,
    read_stories_pointer,
)
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)

ROLLBACK_EVENT = "page.rollback"
# How many story snapshot versions, newest first, a cycle searches for a live page's story.
CARRY_SEARCH_VERSIONS = 5

class PageHistory:
    """Published page versions read from the store; versions are immutable, so they are cached.

    A version counts as published only if a pointer move made it live: its number is at most the
    pointer's high water and not among the pointer's orphans (written by a publisher that died, or
    lost a race, before moving the pointer). Rollbacks come from ``log/events/page.rollback/`` and
    from the pointer itself, so one whose event was never written still counts.
    """

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._payloads: dict[str, Mapping[str, object]] = {}
        self._versions: dict[tuple[str, str], list[tuple[int, str]]] = {}
        self._listed = False
        self._story_versions: list[tuple[int, str]] = []
        self._rollback_events: dict[tuple[str, str], list[tuple[str, int]]] | None = None
        self._pointers: dict[tuple[str, str] | None, PagePointer | None] = {}

    def pages(self) -> list[tuple[str, str]]:
        """Every page with a stored version; one listing of ``pages/`` serves every page."""
        if not self._listed:
            found: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
            for key in self._store.list(layout.PAGES_PREFIX):
                parts = key.split("/")
                name = parts[-1]
                if not (name.startswith("v") and name.endswith(".json") and name[1:-5].isdigit()):
                    continue
                if len(parts) == 4 and parts[1] != layout.STORIES_PAGE:
                    found[(parts[1], parts[2])].append((int(name[1:-5]), key))
                elif len(parts) == 3 and parts[1] == layout.STORIES_PAGE:
                    self._story_versions.append((int(name[1:-5]), key))
            self._versions = {page: sorted(v) for page, v in found.items()}
            self._story_versions.sort()
            self._listed = True
        return sorted(self._versions)

    def story_versions(self) -> list[tuple[int, str]]:
        """Every story snapshot version as (version, key), oldest first."""
        self.pages()
        return self._story_versions

    def versions(self, edition: str, section: str) -> list[tuple[int, str]]:
        self.pages()
        return self._versions.get((edition, section), [])

    def payload(self, key: str) -> Mapping[str, object] | None:
        """A stored version's (or event's) payload, JSON as stored; None, recorded, when it is
        unreadable or gone."""
        if key not in self._payloads:
            payload = read_json_payload(self._store, key)
            if payload is None:
                return None
            self._payloads[key] = payload
        return self._payloads[key]

    def pointer(self, page: tuple[str, str] | None) -> PagePointer | None:
        """A page's pointer (None: the story snapshot's), read once.

        An unreadable pointer is recorded and made up from the stored versions (every one counts
        as published): the page's history goes on from its newest valid version, and the publish
        replaces the pointer (issue 16).
        """
        if page not in self._pointers:
            try:
                pointer = read_pointer(self._store, *page) if page else read_stories_pointer(self._store)
            except SnapshotNotFoundError as e:
                record_damage(e.key or "", f"corrupt: {e.reason}", "history read from the stored versions")
                pointer = self._made_up_pointer(page)
            self._pointers[page] = pointer
        return self._pointers[page]

    def _made_up_pointer(self, page: tuple[str, str] | None) -> PagePointer | None:
        versions = self.versions(*page) if page else self.story_versions()
        if not versions:
            return None
        newest, key = versions[-1]
        return PagePointer(newest, key, "", "", high_water=newest)

    def _rollbacks(self) -> dict[tuple[str, str], list[tuple[str, int]]]:
        if self._rollback_events is None:
            found: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
            for key in self._store.list(f"{layout.EVENTS_PREFIX}{ROLLBACK_EVENT}/"):
                event = self.payload(key)
                try:
                    assert event is not None
                    found[(str(event["edition"]), str(event["section"]))].append((str(event["at"]), int(event["to"])))
                except (AssertionError, KeyError, TypeError, ValueError):
                    record_damage(key, "corrupt: not a rollback event", "skipped")
            self._rollback_events = {page: sorted(v) for page, v in found.items()}
        return self._rollback_events

    def live_version_at(self, edition: str, section: str, at: datetime, *, strict: bool) -> tuple[int, str] | None:
        """The version a page's pointer named at ``at`` (just before it, when ``strict``): the newest
        published version, unless a later rollback named another."""
        rollbacks = list(self._rollbacks().get((edition, section), []))
        return self._live_at((edition, section), self.versions(edition, section), rollbacks, at, strict=strict)

    def story_entries_before(self, story_ids: Iterable[str], at: datetime) -> dict[str, StoryEntry]:
        """Each story's entry in the newest story snapshot version published before ``at`` that
        holds it, among the ``CARRY_SEARCH_VERSIONS`` newest; a story that none holds is left out.

        Every cycle's snapshot carries the stories of the pages live before it, so the newest
        version normally holds them all; the bound keeps a story that no kept version holds (its
        versions pruned) from costing a read of every version on every cycle.
        """
        wanted = set(story_ids)
        pointer = self.pointer(None)
        found: dict[str, StoryEntry] = {}
        if not wanted or pointer is None:
            return found
        limit = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        searched = 0
        # Older versions are read once and not cached: a snapshot of every story is large.
        snapshots = published_story_snapshots(
            self._store, pointer, versions=[v for v, _ in self.story_versions()],
            read=lambda key: self._payloads.get(key) or read_json_payload(self._store, key))
        for _, payload in snapshots:
            if not wanted or searched == CARRY_SEARCH_VERSIONS:
                break
            if str(payload.get("as_of")) >= limit:
                continue
            searched += 1
            stories = cast(dict[str, StoryEntry], payload["stories"])  # a story snapshot as published
            for sid in sorted(wanted & stories.keys()):
                found[sid] = stories[sid]
                wanted.discard(sid)
        return found

    def live_story_version_at(self, at: datetime) -> tuple[int, str] | None:
        """The story snapshot version live at ``at`` (story snapshots are never rolled back)."""
        return self._live_at(None, self.story_versions(), [], at, strict=False)

    def _live_at(self, page: tuple[str, str] | None, versions: list[tuple[int, str]],
                 rollbacks: list[tuple[str, int]], at: datetime, *, strict: bool) -> tuple[int, str] | None:
        limit = at.strftime("%Y-%m-%dT%H:%M:%SZ")

        def before(ts: str) -> bool:
            return ts < limit or (not strict and ts == limit)

        pointer = self.pointer(page)
        if pointer is None:
            return None  # nothing was ever made live; any version is an orphan
        if pointer.rolled_back_from is not None:
            rollbacks.append((pointer.published_at, pointer.version))
        keys = dict(versions)
        best: tuple[str, int] | None = None
        for version, key in reversed(versions):
            if not pointer.was_published(version):
                continue
            payload = self.payload(key)
            if payload is None:
                continue  # unreadable: the newest valid version before it stands in
            as_of = str(payload.get("as_of"))
            if before(as_of):
                best = (as_of, version)
                break
        for when, version in sorted(rollbacks):
            if before(when) and (best is None or when >= best[0]) and version in keys:
                best = (when, version)
        return (best[1], keys[best[1]]) if best else None

    def live_at(self, edition: str, section: str, at: datetime, *, strict: bool) -> PublishedPage | None:
        """The payload of ``live_version_at``."""
        found = self.live_version_at(edition, section, at, strict=strict)
        return cast(PublishedPage | None, self.payload(found[1])) if found else None  # a page as published

