"""Live updates: a Server-Sent Events stream per edition (issue 30).

What a connected reader page hears, without polling:

* ``pages``: a page of its edition has a new live version (the "New stories · Show them" offer).
  Every reader of the edition gets these, on the shared stream ``GET /v1/live/{edition}`` (no
  cookie, no session: nothing personal) and on the personal one.
* ``breaking``: a story turned Breaking in the edition; only on the personal stream
  ``GET /v1/me/live?edition=`` of a reader who opted in (``PUT /v1/me/alerts/breaking``).
* ``keyword``: a story matching a keyword the reader follows entered the search index; personal
  stream only.

**Several replicas.** Each replica builds the same events from the store on its own: page
versions from the pointers its snapshot cache already reads every few seconds; Breaking stories
from the live event keys rank writes by time (``log/events/live/date=D/HHMMSS-...``, listed a
minute prefix at a time around the pipeline's latest instant, so a poll costs what is new, not
every event ever written); keyword matches from the stories each new search index version adds
(the version before it against it). So a reader may reconnect to any replica.

**Reconnect.** Every event's id is a cursor over all three: the version of each page of the
edition the reader has heard of, the last Breaking event key, the last index version. A client
sends it back in ``Last-Event-ID`` (the reader page also sends one for the page it shows on its
first connection) and the replica sends only what comes after it: a newer page version, Breaking
keys after that key (from the last ``BACKLOG`` it read; the first event per story only, as every
replica keeps the same first one), stories of index versions after that one. Nothing is pushed
twice. What may be missed: a Breaking event written with an earlier key after a later one was
sent (two rank runs overlapping), and keyword matches of versions the replica did not load one
after the other (it was starting).

**Limits.** At most ``live_max_connections`` streams per replica (then 503 + Retry-After; another
replica may have room); a comment line every ``live_heartbeat_seconds`` keeps proxies from
closing an idle stream and lets the server notice a reader gone; a reader too slow to take its
events is dropped (it reconnects from its cursor); ``retry`` tells the browser when to reconnect.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal, cast

from newsroom.times import parse_iso_datetime
from serving.cache import SnapshotCache
from serving.errors import LiveStreamsFullError, ProfileStoreError
from serving.profile_cache import ProfileCache
from serving.profiles import Profile
from serving.search import SearchService
from warehouse import layout
from warehouse.errors import ObjectNotFoundError
from warehouse.search_index import SearchCardJson, SearchIndexError, SearchQueryError, parse_query
from warehouse.store import ObjectStore

logger = logging.getLogger(__name__)

EventKind = Literal["pages", "breaking", "keyword"]
RETRY_MS = 3000
BACKLOG = 1000
"""Breaking events a replica remembers for readers who reconnect."""
QUEUE_EVENTS = 256
"""Events waiting for one slow reader; past it the stream is closed and the reader reconnects."""
MINUTES_LISTED = 3
"""Breaking keys are listed for the pipeline's latest minute and the ones before it (rank writes a
cycle's events a little after its instant; a replica may look in between)."""
MAX_CURSOR_SECTIONS = 64
MAX_CURSOR_CHARS = 2048
CURSOR_VERSION = "v1"


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a reader's stream stands: page versions heard of, the last Breaking key, the last index version."""

    pages: Mapping[str, int] = field(default_factory=dict)
    breaking: str = ""
    keyword: int = 0

    def encode(self) -> str:
        pages = ",".join(f"{s}:{v}" for s, v in sorted(self.pages.items()))
        return f"{CURSOR_VERSION};p={pages};b={self.breaking};k={self.keyword}"

    @staticmethod
    def decode(text: str | None) -> Cursor | None:
        """The cursor in a ``Last-Event-ID``; None when there is none or it cannot be read (start afresh)."""
        if not text or len(text) > MAX_CURSOR_CHARS:
            return None
        parts = text.split(";")
        if parts[0] != CURSOR_VERSION:
            return None
        found: dict[str, str] = {}
        for part in parts[1:]:
            name, sep, value = part.partition("=")
            if sep and name in ("p", "b", "k"):
                found[name] = value
        pages: dict[str, int] = {}
        for item in (found.get("p") or "").split(",")[:MAX_CURSOR_SECTIONS]:
            section, sep, version = item.partition(":")
            if sep and version.isdigit() and len(version) < 12 and section:
                pages[section] = int(version)
        breaking = found.get("b") or ""
        keyword = found.get("k") or "0"
        return Cursor(pages, breaking if _is_event_name(breaking) else "",
                      int(keyword) if keyword.isdigit() and len(keyword) < 12 else 0)


def _is_event_name(name: str) -> bool:
    return len(name) < 200 and name.startswith("date=") and "/" in name and ".." not in name


@dataclass(frozen=True, slots=True)
class LiveEvent:
    kind: EventKind
    data: Mapping[str, Any]
    pages: Mapping[str, int] | None = None
    """Page versions this event tells of (merged into the cursor when sent)."""
    breaking: str | None = None
    keyword: int | None = None

    def told(self, cursor: Cursor) -> bool:
        """Whether a stream at ``cursor`` has heard of every page version this event tells of.

        A reader reconnecting to a replica that has not yet seen the version another replica told
        it of would otherwise hear of it again when this replica's poll finds it. Breaking and
        keyword events come from the hub's own backlog, compared with the cursor at connection
        under the poll lock, so they cannot be told twice (and several share one key or version).
        """
        return self.pages is not None and all(cursor.pages.get(s, -1) >= v for s, v in self.pages.items())

    def advance(self, cursor: Cursor) -> Cursor:
        if self.pages is not None:
            cursor = replace(cursor, pages={**cursor.pages, **self.pages})
        if self.breaking is not None and self.breaking > cursor.breaking:
            cursor = replace(cursor, breaking=self.breaking)
        if self.keyword is not None and self.keyword > cursor.keyword:
            cursor = replace(cursor, keyword=self.keyword)
        return cursor


def format_event(event: LiveEvent | None, cursor: Cursor) -> bytes:
    """One SSE message (``event``, ``id``, one ``data`` line of JSON); None: a heartbeat comment."""
    if event is None:
        return b": heartbeat\n\n"
    data = json.dumps(event.data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return f"event: {event.kind}\nid: {cursor.encode()}\ndata: {data}\n\n".encode()


class LiveConnection:
    """One reader page's stream: its edition, its reader (None on the shared stream), its queue."""

    def __init__(self, edition: str, reader_hash: str | None, loop: asyncio.AbstractEventLoop) -> None:
        self.edition = edition
        self.reader_hash = reader_hash
        self.loop = loop
        self.queue: asyncio.Queue[LiveEvent | None] = asyncio.Queue(maxsize=QUEUE_EVENTS)
        self.dropped = False

    def push(self, event: LiveEvent) -> None:
        """From the hub's thread: hand the event to the stream's loop."""
        self.loop.call_soon_threadsafe(self._put, event)

    def _put(self, event: LiveEvent | None) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped = True  # the stream ends; the reader reconnects from its cursor
            logger.info("live_stream_dropped edition=%s reason=slow_reader", self.edition)


@dataclass(frozen=True, slots=True)
class BreakingEvent:
    key: str
    """The live event's key below ``LIVE_EVENTS_PREFIX`` (``date=D/HHMMSS-kind-id.json``)."""
    story_id: str
    editions: tuple[str, ...]
    data: Mapping[str, Any]


class LiveHub:
    """Every live stream of this replica, and the thread that finds what is new (module docstring)."""

    def __init__(self, store: ObjectStore, cache: SnapshotCache, search: SearchService, profiles: ProfileCache, *,
                 max_connections: int, poll_seconds: float) -> None:
        self._store = store
        self._cache = cache
        self._search = search
        self._profiles = profiles
        self.max_connections = max_connections
        self.poll_seconds = poll_seconds
        self._lock = threading.Lock()
        self._connections: set[LiveConnection] = set()
        self._pages: dict[str, dict[str, int]] = {}
        self._backlog: deque[BreakingEvent] = deque(maxlen=BACKLOG)
        self._seen_keys: set[str] = set()
        self._seen_stories: set[str] = set()
        self._last_instant: datetime | None = None
        self._index_version: int | None = None
        self._matches: dict[tuple[int, str, str, int], list[SearchCardJson]] = {}
        self._poll_lock = threading.Lock()
        """Held by a poll and by a reader connecting: what a connecting reader is owed and what the
        next poll pushes to it never overlap."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- connections ------------------------------------------------------------------------

    @property
    def connections(self) -> int:
        return len(self._connections)

    def register(self, connection: LiveConnection) -> None:
        """Raises LiveStreamsFullError at the cap."""
        with self._lock:
            if len(self._connections) >= self.max_connections:
                raise LiveStreamsFullError(retry_after_seconds=10)
            self._connections.add(connection)

    def connect(self, connection: LiveConnection, cursor: Cursor | None) -> tuple[Cursor, list[LiveEvent]]:
        """Register a stream and return its starting cursor and what it is owed (runs on a worker
        thread: it may read the reader's profile). Raises LiveStreamsFullError at the cap.

        A cursor's missing parts (a first connection names only the page it shows) start at what
        is live now; its page versions are compared for the pages it names only.
        """
        with self._poll_lock:
            current = self.current(connection.edition)
            first = self.catch_up(connection.edition, connection.reader_hash, cursor) if cursor is not None else []
            self.register(connection)
        if cursor is None:
            return current, []
        start = Cursor({**current.pages, **cursor.pages}, cursor.breaking or current.breaking,
                       cursor.keyword or current.keyword)
        return start, first

    def unregister(self, connection: LiveConnection) -> None:
        with self._lock:
            self._connections.discard(connection)

    def _snapshot(self) -> list[LiveConnection]:
        with self._lock:
            return list(self._connections)

    # -- what a (re)connecting reader is owed -------------------------------------------------

    def current(self, edition: str) -> Cursor:
        """A cursor at what is live now: a fresh reader is owed nothing before it."""
        return Cursor(self.page_versions(edition), self._backlog[-1].key if self._backlog else "",
                      self._index_version or 0)

    def page_versions(self, edition: str) -> dict[str, int]:
        """The page versions the hub's last poll saw (not the cache's, which refreshes on its own
        clock): what a connecting reader is owed then ends where the next poll's news begins."""
        if edition in self._pages:
            return dict(self._pages[edition])
        return {section: page.version for (e, section), page in self._cache.state.pages.items() if e == edition}

    def catch_up(self, edition: str, reader_hash: str | None, cursor: Cursor) -> list[LiveEvent]:
        """What a reader with ``cursor`` has not heard of yet (runs on a worker thread: it may read a profile)."""
        events: list[LiveEvent] = []
        newer = {s: v for s, v in self.page_versions(edition).items() if s in cursor.pages and v > cursor.pages[s]}
        if newer:
            events.append(self._pages_event(edition, newer))
        if reader_hash is None:
            return events
        profile = self._profile(reader_hash)
        if profile is None:
            return events
        if profile.breaking_alerts and cursor.breaking:
            events += [self._breaking_event(b) for b in list(self._backlog)
                       if b.key > cursor.breaking and edition in b.editions]
        if profile.followed_keywords and cursor.keyword and self._index_version:
            events += self._keyword_events(edition, profile, cursor.keyword, self._index_version)
        return events

    # -- the poll ------------------------------------------------------------------------------

    def poll(self) -> None:
        """Look for new page versions, Breaking events and index versions; push them to the streams."""
        with self._poll_lock:
            connections = self._snapshot()
            self._poll_pages(connections)
            self._poll_breaking(connections)
            self._poll_keywords(connections)

    def _pages_event(self, edition: str, versions: Mapping[str, int]) -> LiveEvent:
        state = self._cache.state.pages
        pages = [{"section": s, "version": v,
                  "as_of": state[(edition, s)].pointer.published_at if (edition, s) in state else None}
                 for s, v in sorted(versions.items())]
        return LiveEvent("pages", {"edition": edition, "pages": pages}, pages=dict(versions))

    def _poll_pages(self, connections: Iterable[LiveConnection]) -> None:
        now: dict[str, dict[str, int]] = {}
        for (edition, section), page in self._cache.state.pages.items():
            now.setdefault(edition, {})[section] = page.version
        changed = {e: {s: v for s, v in versions.items() if v > self._pages.get(e, {}).get(s, 0)}
                   for e, versions in now.items() if e in self._pages}
        self._pages = now
        events = {e: self._pages_event(e, versions) for e, versions in changed.items() if versions}
        for connection in connections:
            event = events.get(connection.edition)
            if event is not None:
                connection.push(event)

    def _pipeline_instant(self) -> datetime | None:
        """The pipeline's latest instant: the newest ``published_at`` among the live pages' pointers
        (rank's own clock, which a replay or a demo runs ahead of the wall clock)."""
        latest = max((p.pointer.published_at for p in self._cache.state.pages.values()), default="")
        found = parse_iso_datetime(latest) if latest else None
        return found if isinstance(found, datetime) else None

    def _poll_breaking(self, connections: Iterable[LiveConnection]) -> None:
        instant = self._pipeline_instant()
        if instant is None:
            return
        minutes = {instant - timedelta(minutes=k) for k in range(MINUTES_LISTED)}
        if self._last_instant is not None and self._last_instant != instant:
            minutes |= {self._last_instant - timedelta(minutes=k) for k in range(MINUTES_LISTED)}
        self._last_instant = instant
        found: list[BreakingEvent] = []
        for minute in sorted(minutes):
            prefix = f"{layout.LIVE_EVENTS_PREFIX}date={minute:%Y-%m-%d}/{minute:%H%M}"
            try:
                keys = self._store.list(prefix)
            except Exception as e:  # the store failed: look again next poll
                logger.warning("live_list_failed prefix=%s error=%s: %s", prefix, type(e).__name__, e)
                return
            for key in keys:
                if key in self._seen_keys:
                    continue
                event = self._read_breaking(key)
                if event is None:
                    continue
                self._seen_keys.add(key)
                if event.story_id in self._seen_stories:
                    continue  # written again by a cycle that died before recording it: alerted once
                self._seen_stories.add(event.story_id)
                found.append(event)
        for event in sorted(found, key=lambda e: e.key):
            if len(self._backlog) == BACKLOG:
                old = self._backlog[0]
                self._seen_keys.discard(f"{layout.LIVE_EVENTS_PREFIX}{old.key}")
            self._backlog.append(event)
            self._push_breaking(event, connections)

    def _read_breaking(self, key: str) -> BreakingEvent | None:
        try:
            raw = json.loads(self._store.get(key).data)
        except ObjectNotFoundError:
            return None
        except (ValueError, RecursionError) as e:
            logger.warning("live_event_unreadable key=%s error=%s", key, e)
            self._seen_keys.add(key)
            return None
        except Exception as e:  # the store failed: try this key again next poll
            logger.warning("live_read_failed key=%s error=%s: %s", key, type(e).__name__, e)
            return None
        if not isinstance(raw, dict) or raw.get("kind") != "story.breaking" or not isinstance(raw.get("story_id"), str):
            self._seen_keys.add(key)
            return None
        editions = tuple(str(e) for e in raw.get("editions") or [] if isinstance(e, str))
        data = {k: raw.get(k) for k in ("story_id", "title", "language", "breaking_since", "detected_at")}
        data["editions"] = list(editions)
        return BreakingEvent(key[len(layout.LIVE_EVENTS_PREFIX):], raw["story_id"], editions, data)

    def _breaking_event(self, event: BreakingEvent) -> LiveEvent:
        return LiveEvent("breaking", event.data, breaking=event.key)

    def _push_breaking(self, event: BreakingEvent, connections: Iterable[LiveConnection]) -> None:
        for connection in connections:
            if connection.reader_hash is None or connection.edition not in event.editions:
                continue
            profile = self._profile(connection.reader_hash)
            if profile is not None and profile.breaking_alerts:
                connection.push(self._breaking_event(event))

    def _poll_keywords(self, connections: Iterable[LiveConnection]) -> None:
        loaded = self._search.loaded
        latest = loaded[-1].version if loaded else None
        if latest is None or latest == self._index_version:
            return
        before, self._index_version = self._index_version, latest
        if before is None:
            return  # the first version this replica loaded: nothing is new to it
        for connection in connections:
            if connection.reader_hash is None:
                continue
            profile = self._profile(connection.reader_hash)
            if profile is None or not profile.followed_keywords:
                continue
            for event in self._keyword_events(connection.edition, profile, before, latest):
                connection.push(event)

    def _keyword_events(self, edition: str, profile: Profile, after: int, upto: int) -> list[LiveEvent]:
        """One event per new story of index versions ``after + 1`` to ``upto`` matching a followed
        keyword (the reader's first keyword it matches), oldest version first."""
        events: list[LiveEvent] = []
        told: set[str] = set()
        for version in range(after + 1, upto + 1):
            new, exact = self._search.new_stories(version - 1, version)
            if not exact or not new:
                continue
            for text in sorted(profile.followed_keywords):
                for card in self._matches_of(version, text, edition, new):
                    sid = str(card.get("story_id"))
                    if sid not in told:
                        told.add(sid)
                        events.append(LiveEvent("keyword", {"keyword": text, "story": card}, keyword=version))
        return events

    def _matches_of(self, version: int, text: str, edition: str, new: frozenset[str]) -> list[SearchCardJson]:
        """Cards of the stories of ``new`` (new in ``version``) matching ``text``, from the version
        held now (a story new in an older version is looked up as the newest version has it)."""
        held = self._search.held
        if held is None:
            return []
        key = (version, text, edition, held.version)
        found = self._matches.get(key)
        if found is None:
            try:
                result = held.index.search(parse_query(text), edition=edition, only=new, limit=20, facets=False)
            except (SearchQueryError, SearchIndexError):
                return []
            found = [cast("SearchCardJson", dict(h.card)) for h in result.hits]
            if len(self._matches) > 4096:
                self._matches.clear()
            self._matches[key] = found
        return found

    def _profile(self, reader_hash: str) -> Profile | None:
        try:
            return self._profiles.load(reader_hash)
        except ProfileStoreError as e:
            logger.warning("live_profile_unavailable error=%s", e)
            return None

    # -- the thread -----------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._pages = {}
        for (edition, section), page in self._cache.state.pages.items():
            self._pages.setdefault(edition, {})[section] = page.version
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="live-hub", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            try:
                self.poll()
            except Exception:  # a bug, not a store failure: log it, keep polling
                logger.exception("live_poll_crashed")

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.close_streams()

    def close_streams(self) -> None:
        """End every stream now (each reader reconnects, to another replica when this one is going):
        the server's stop signal calls this, so its grace period is not spent waiting on streams."""
        for connection in self._snapshot():
            try:
                connection.loop.call_soon_threadsafe(connection._put, None)
            except RuntimeError:  # its loop is closed already
                continue


async def stream(hub: LiveHub, connection: LiveConnection, cursor: Cursor, first: list[LiveEvent],
                 heartbeat_seconds: float, is_disconnected: Callable[[], Any]) -> AsyncIterator[bytes]:
    """The SSE bytes of one stream: ``retry``, the catch-up, then events and heartbeats until the
    reader leaves, the replica stops, or the reader is too slow."""
    try:
        yield f"retry: {RETRY_MS}\n\n".encode()
        for event in first:
            cursor = event.advance(cursor)
            yield format_event(event, cursor)
        while not connection.dropped:
            try:
                event = await asyncio.wait_for(connection.queue.get(), timeout=heartbeat_seconds)
            except TimeoutError:
                if await is_disconnected():
                    return
                yield format_event(None, cursor)
                continue
            if event is None:  # the replica is stopping
                return
            if event.told(cursor):
                continue
            cursor = event.advance(cursor)
            yield format_event(event, cursor)
    finally:
        hub.unregister(connection)
