"""Search over the live window: this replica's copy of the live index version, and its answers (issue 30).

The rank & publish flow builds the index once per published version and publishes it beside the
pages (``pages/search/v{n}.tar`` and its pointer; ``tasks/search.py``). Each replica checks the
pointer every ``refresh_seconds``, as it does the pages', and loads a new version when the pointer
moves: the newest version that passes the pointer's checks (sha256, a version of its own folder)
and opens as an index, else an older one (``servable_versions``), else the one it holds. So every
replica answers from a published version and holds nothing of its own: a new replica loads the
live version and answers as the others do.

Answers are shared (the same bytes for every reader, memoised per index version), so they carry
the pages' cache headers and an ETag, and a CDN can keep them.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from serving.errors import SearchUnavailableError
from serving.responses import CachedBody
from warehouse import layout
from warehouse.pointers import read_pointer_state
from warehouse.search_index import (
    FacetValue,
    SearchCardJson,
    SearchIndex,
    SearchIndexError,
    SearchQuery,
    SearchResult,
)
from warehouse.servable import SkippedVersion, servable_versions
from warehouse.snapshots import dump_snapshot
from warehouse.store import ObjectStore

logger = logging.getLogger(__name__)

_MEMO_SIZE = 2048
KEPT_VERSIONS = 8
"""Story id sets of the last versions loaded, for the live stream's "new stories" (``serving/live.py``)."""


@dataclass(frozen=True, slots=True)
class HeldIndex:
    """The index version this replica answers from, and the pointer bytes (ETag) it came from."""

    version: int
    as_of: str
    index: SearchIndex
    pointer_etag: str | None
    problem: str | None = None
    """Why it is not the live version (an older one stands in), or None."""


@dataclass(frozen=True, slots=True)
class LoadedVersion:
    """A version this replica loaded, with every story it holds; ``previous`` the version loaded
    just before it when that was ``version - 1`` (so the new stories of ``version`` are exact)."""

    version: int
    stories: frozenset[str]
    previous: int | None


class SearchService:
    """The live search index of this replica (see the module docstring)."""

    def __init__(self, store: ObjectStore, folder: str | None = None) -> None:
        self._store = store
        self._folder = folder or tempfile.mkdtemp(prefix="replica-", dir=_process_folder())
        self._held: HeldIndex | None = None
        self._retired: list[SearchIndex] = []
        self._memo: OrderedDict[tuple[object, ...], CachedBody] = OrderedDict()
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.loaded: deque[LoadedVersion] = deque(maxlen=KEPT_VERSIONS)
        self.changed = threading.Condition()
        """Notified after each new version is loaded (the live stream waits on it)."""

    @property
    def held(self) -> HeldIndex | None:
        return self._held

    def index(self) -> HeldIndex:
        """The version answering now. Raises SearchUnavailableError before the first is loaded."""
        held = self._held
        if held is None:
            raise SearchUnavailableError()
        return held

    # -- refresh --------------------------------------------------------------------------------

    def refresh(self) -> bool:
        """Load the newest valid version when the pointer moved; keep the held one on any failure.

        Returns: True when the pointer was read and a version it allows is held (or none is published).
        """
        with self._refresh_lock:
            pointer_key = layout.search_index_pointer_key()
            try:
                found = read_pointer_state(self._store, pointer_key)
            except Exception as e:  # any store failure: keep answering from the held version
                logger.warning("search_refresh_failed error=%s: %s", type(e).__name__, e)
                return False
            held = self._held
            if held is not None and held.pointer_etag == found.etag:
                return held.problem is None
            if found.pointer is None and found.etag is None:
                return True  # nothing published yet
            skipped: list[SkippedVersion] = []
            try:
                for candidate in servable_versions(self._store, pointer_key, found):
                    if isinstance(candidate, SkippedVersion):
                        skipped.append(candidate)
                        continue
                    version = candidate.pointer.version
                    if held is not None and held.version == version:
                        self._held = HeldIndex(version, held.as_of, held.index, found.etag,
                                               None if candidate.pointer is found.pointer else "an older version")
                        return self._held.problem is None
                    try:
                        index = SearchIndex.from_bytes(candidate.data, self._folder)
                    except SearchIndexError as e:
                        skipped.append(SkippedVersion(version, str(e)))
                        continue
                    live = found.pointer is not None and candidate.pointer.version == found.pointer.version
                    self._swap(HeldIndex(version, str(index.meta.get("as_of") or ""), index, found.etag,
                                         None if live else (found.problem or "the live version is unreadable")))
                    return live
            except Exception as e:  # the store failed while reading versions
                logger.warning("search_refresh_failed error=%s: %s", type(e).__name__, e)
                return False
            finally:
                for s in skipped:
                    logger.warning("search_version_skipped version=%d problem=%s", s.version, s.problem)
            return False

    def _swap(self, new: HeldIndex) -> None:
        old = self._held
        stories = new.index.story_ids()
        previous = self.loaded[-1].version if self.loaded else None
        with self._lock:
            self._held = new
            self._memo.clear()
            # A search that began on the old version may still be running: its files go one swap later.
            retired, self._retired = self._retired, [old.index] if old is not None else []
        for index in retired:
            index.close()
        self.loaded.append(LoadedVersion(new.version, stories, previous if previous == new.version - 1 else None))
        with self.changed:
            self.changed.notify_all()
        logger.info("search_index_loaded version=%d documents=%d bytes=%d", new.version, new.index.documents,
                    new.index.size)

    def new_stories(self, after: int, upto: int) -> tuple[frozenset[str], bool]:
        """Stories that entered the index in versions ``after + 1`` to ``upto``, and whether that
        answer is exact (every version in between was loaded here, each right after the one before)."""
        by_version = {v.version: v for v in self.loaded}
        new: set[str] = set()
        exact = True
        for version in range(after + 1, upto + 1):
            loaded = by_version.get(version)
            before = by_version.get(version - 1)
            if loaded is None or before is None or loaded.previous != version - 1:
                exact = False
                continue
            new |= loaded.stories - before.stories
        return frozenset(new), exact

    # -- answers -----------------------------------------------------------------------------

    def answer(self, query: SearchQuery, *, edition: str | None, section: str | None, since: str | None,
               limit: int, offset: int, publisher: str | None = None, language: str | None = None) -> CachedBody:
        """The shared answer to one search, as JSON bytes (memoised per index version)."""
        held = self.index()
        key = (held.version, query.text, edition, section, publisher, language, since, limit, offset)
        with self._lock:
            found = self._memo.get(key)
            if found is not None:
                self._memo.move_to_end(key)
                return found
        result = held.index.search(query, edition=edition, section=section, publisher=publisher, language=language,
                                   since=since, limit=limit, offset=offset)
        filters: SearchFiltersJson = {"edition": edition, "section": section, "publisher": publisher,
                                      "language": language, "since": since}
        body = CachedBody.of(dump_snapshot(_payload(result, query, held, filters, limit, offset)))
        with self._lock:
            if self._held is held:
                self._memo[key] = body
                while len(self._memo) > _MEMO_SIZE:
                    self._memo.popitem(last=False)
        return body

    def search(self, query: SearchQuery, **options: Any) -> SearchResult:
        """The raw result (cards and facets) from the held version."""
        return self.index().index.search(query, **options)

    # -- background refresher ----------------------------------------------------------------

    def start(self, interval_seconds: float) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(interval_seconds,), name="search-refresh",
                                        daemon=True)
        self._thread.start()

    def _run(self, interval_seconds: float) -> None:
        while not self._stop.wait(interval_seconds):
            try:
                self.refresh()
            except Exception:  # a bug, not a store failure: log it, keep the thread alive
                logger.exception("search_refresh_crashed")

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def close(self) -> None:
        """Stop refreshing and delete every unpacked version."""
        self.stop()
        with self._lock:
            held, retired, self._held, self._retired = self._held, self._retired, None, []
        for index in [*retired, *([held.index] if held is not None else [])]:
            index.close()
        shutil.rmtree(self._folder, ignore_errors=True)


FOLDER_PREFIX = "newsroom-search-"


def _process_folder() -> str:
    """This process's folder for unpacked index versions, ``<tmp>/newsroom-search-<pid>`` (one
    subfolder per app in it); the folders of processes that are gone (killed before they could
    clean up) are deleted first."""
    base = Path(tempfile.gettempdir())
    for old in base.glob(f"{FOLDER_PREFIX}[0-9]*"):
        pid = old.name[len(FOLDER_PREFIX):]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)
    folder = base / f"{FOLDER_PREFIX}{os.getpid()}"
    folder.mkdir(exist_ok=True)
    return str(folder)


class SearchFiltersJson(TypedDict):
    """The filters of a search, echoed in its answer (None: not filtered on)."""

    edition: str | None
    section: str | None
    publisher: str | None
    language: str | None
    since: str | None


class FacetJson(TypedDict):
    """One value of a facet and how many results have it (``label``: a publisher's name)."""

    value: str
    count: int
    label: NotRequired[str]


class SearchAnswerJson(SearchFiltersJson):
    """``GET /v1/search``'s answer: one page of results over one index version, and the facets."""

    query: str
    version: int
    as_of: str
    total: int
    stories: list[SearchCardJson]
    facets: dict[str, list[FacetJson]]
    next_offset: int | None


def _payload(result: SearchResult, query: SearchQuery, held: HeldIndex, filters: SearchFiltersJson,
             limit: int, offset: int) -> SearchAnswerJson:
    more = offset + limit < result.total
    return {
        "query": query.text,
        **filters,
        "version": held.version,
        "as_of": held.as_of,
        "total": result.total,
        "stories": [cast("SearchCardJson", dict(hit.card)) for hit in result.hits],
        "facets": {name: [_facet(v) for v in values] for name, values in result.facets.items()},
        "next_offset": offset + limit if more else None,
    }


def _facet(value: FacetValue) -> FacetJson:
    out: FacetJson = {"value": value.value, "count": value.count}
    if value.label is not None:
        out["label"] = value.label
    return out
