"""Page snapshots: immutable versions, validated, then a pointer moved last.

The write side is used by rank & publish; the read side (``read_live_*``, ``list_live_pages``)
is all that serving may use. See docs/snapshots.md for the JSON contract. Beside it: the pointer
record and its reads and writes (:mod:`warehouse.pointers`), the versions a replica may serve
(:mod:`warehouse.servable`), the search index's versions (:mod:`warehouse.search_versions`) and
the JSON a version holds (:mod:`warehouse.snapshot_json`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from newsroom.times import parse_iso_datetime
from warehouse import layout
from warehouse.damage import describe_error, record_damage
from warehouse.errors import (
    ObjectNotFoundError,
    PreconditionFailedError,
    SnapshotNotFoundError,
    WarehouseError,
)
from warehouse.pointers import (
    LOST_RACE,
    PagePointer,
    PublishResult,
    folder_version_key,
    pointer_from_bytes,
    pointer_json,
    put_pointer,
    read_pointer_at,
    stored_versions,
    version_of_name,
)
from warehouse.search_index import SearchIndexError, SearchMetaJson, index_meta
from warehouse.snapshot_json import SnapshotJson, StorySnapshotJson
from warehouse.store import ObjectStore

PAGE_SCHEMA = "newsroom.page/1"
POOL_SCHEMA = "newsroom.pool/1"
STORIES_SCHEMA = "newsroom.stories/1"


@dataclass(frozen=True, slots=True)
class LivePage:
    """The bytes of a live page version, exactly as published (the ETag is their sha256), and, when
    the reader checked them (:func:`servable_versions`), the parsed payload."""

    pointer: PagePointer
    data: bytes
    payload: SnapshotJson | SearchMetaJson | None = field(default=None, compare=False, repr=False)


Validate = Callable[[SnapshotJson, SnapshotJson | None], str | None]
"""``validate(new, previous)`` of a publish: a reason to refuse ``new``, or None."""
PUBLISH_ATTEMPTS = 4
_PUT_ATTEMPTS = 5
_VERSION_ATTEMPTS = 64
_RETRY_PAUSE_SECONDS = 0.05
FALLBACK_SEARCH_VERSIONS = 20
"""Most older versions, newest first, read to find the newest valid one when the live one is
damaged (and, by a replica, to find a story its live pages list; docs/store-faults.md)."""


def dump_snapshot(payload: Mapping[str, object]) -> bytes:
    """Serialise a snapshot deterministically: sorted keys, compact, UTF-8, strict JSON.

    Raises ``ValueError`` on a NaN or infinite number rather than writing bare ``NaN``, which no
    JSON reader accepts: an invalid page is never published.
    """
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()


MISSING_VERSION = "pointer names a missing version"
SHA256_MISMATCH = "version bytes do not match the pointer's sha256"


def _read_live_at(store: ObjectStore, pointer_key: str) -> LivePage:
    found = read_pointer_at(store, pointer_key)
    if found is None:
        raise SnapshotNotFoundError("no live version", key=pointer_key)
    pointer, _ = found
    try:
        data = store.get(pointer.key).data
    except ObjectNotFoundError as e:
        raise SnapshotNotFoundError(MISSING_VERSION, key=pointer.key) from e
    if hashlib.sha256(data).hexdigest() != pointer.sha256:
        raise SnapshotNotFoundError(SHA256_MISMATCH, key=pointer.key)
    return LivePage(pointer, data)


def read_pointer(store: ObjectStore, edition: str, section: str) -> PagePointer | None:
    found = read_pointer_at(store, layout.page_pointer_key(edition, section))
    return found[0] if found else None


def read_stories_pointer(store: ObjectStore) -> PagePointer | None:
    """The story snapshot's pointer, or None before the first publish."""
    found = read_pointer_at(store, layout.story_snapshot_pointer_key())
    return found[0] if found else None


def read_json_payload(store: ObjectStore, key: str) -> dict[str, object] | None:
    """A JSON object stored at ``key``, parsed, its shape not yet checked; None when it is gone, or
    unreadable (recorded, skipped)."""
    try:
        data = store.get(key).data
    except ObjectNotFoundError:
        return None
    try:
        payload = json.loads(data)
    except (ValueError, RecursionError) as e:
        record_damage(key, f"corrupt: {describe_error(e)}", "skipped")
        return None
    if not isinstance(payload, dict):
        record_damage(key, "corrupt: not a JSON object", "skipped")
        return None
    return payload


def published_story_snapshots(store: ObjectStore, pointer: PagePointer, *, versions: Iterable[int] | None = None,
                              read: Callable[[str], Mapping[str, object] | None] | None = None
                              ) -> Iterator[tuple[int, StorySnapshotJson]]:
    """Story snapshot versions a pointer move made live, newest first, as ``(version, payload)``.

    One reader for every job that looks back at what Full Coverage held (rank's carried stories,
    repair's representatives, issue 15). A version pruned since is skipped; an unreadable one is
    recorded and skipped, so an older one stands in.

    Args:
        pointer: The story snapshot's pointer (which versions were published).
        versions: The stored version numbers, when the caller listed them; else every number up to
            the pointer's high water is tried.
        read: How to read a payload (a caller's cache); :func:`read_json_payload` by default.
    """
    candidates = sorted(versions, reverse=True) if versions is not None else range(pointer.high_water, 0, -1)
    for version in candidates:
        if not pointer.was_published(version):
            continue
        key = layout.story_snapshot_key(version)
        payload = (read or (lambda k: read_json_payload(store, k)))(key)
        if payload is None:
            continue
        if not isinstance(payload.get("stories"), dict):
            record_damage(key, "corrupt: not a story snapshot", "skipped; an older version stands in")
            continue
        yield version, cast("StorySnapshotJson", payload)


def story_snapshot_at(store: ObjectStore, at: datetime, *, search: int) -> StorySnapshotJson | None:
    """The story snapshot that was live at ``at``: the newest published version whose ``as_of`` is
    not after it, among the ``search`` newest readable ones (None before the first publish, or when
    none of those is old enough)."""
    pointer = read_stories_pointer(store)
    if pointer is None:
        return None
    limit = at.strftime("%Y-%m-%dT%H:%M:%SZ")  # as snapshots write ``as_of``
    for searched, (_, payload) in enumerate(published_story_snapshots(store, pointer), start=1):
        if str(payload.get("as_of") or "") <= limit:
            return payload
        if searched == search:
            break
    return None


def read_live_page(store: ObjectStore, edition: str, section: str) -> LivePage:
    """The live version of one page. Raises SnapshotNotFoundError."""
    return _read_live_at(store, layout.page_pointer_key(edition, section))


def read_live_stories(store: ObjectStore) -> LivePage:
    """The live story snapshot (Full Coverage). Raises SnapshotNotFoundError."""
    return _read_live_at(store, layout.story_snapshot_pointer_key())


def list_live_pages(store: ObjectStore) -> list[tuple[str, str]]:
    """Every (edition, section) that has a pointer, sorted."""
    pages = []
    for key in store.list(layout.PAGES_PREFIX):
        parts = key.split("/")
        if (len(parts) == 4 and parts[3] == "latest.json" and parts[1] != layout.STORIES_PAGE
                and parts[2] != layout.POOL_SECTION):
            pages.append((parts[1], parts[2]))
    return sorted(pages)


def list_page_folders(store: ObjectStore) -> list[tuple[str, str]]:
    """Every (edition, section) with a pointer or a stored version, sorted: the pages a reader may
    ask for, including one whose pointer was lost (served from its newest valid version)."""
    pages = set()
    for key in store.list(layout.PAGES_PREFIX):
        parts = key.split("/")
        if (len(parts) == 4 and parts[1] != layout.STORIES_PAGE and parts[2] != layout.POOL_SECTION
                and (parts[3] == "latest.json" or version_of_name(parts[3]) is not None)):
            pages.add((parts[1], parts[2]))
    return sorted(pages)


def _short(value: object) -> str:
    """A value from a damaged object, cut short for a message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def version_payload(key: str, data: bytes) -> tuple[SnapshotJson | SearchMetaJson | None, str | None]:
    """A version's parsed payload: ``(payload, None)`` when ``data`` is a valid snapshot to hold at
    the version key ``key``, else ``(None, why)``; see :func:`version_problem`."""
    parts = key.split("/")
    if len(parts) == 3 and parts[1] == layout.SEARCH_PAGE:
        return _search_version_payload(parts[-1], data)
    number = version_of_name(parts[-1])
    try:
        payload = json.loads(data)
    except (ValueError, RecursionError) as e:
        return None, f"not JSON ({describe_error(e, 120)})"
    if not isinstance(payload, dict):
        return None, "not a JSON object"
    if number is None or payload.get("version") != number:
        return None, f"names version {_short(payload.get('version'))}, not {number}"
    if len(parts) == 3 and parts[1] == layout.STORIES_PAGE:
        if payload.get("schema") != STORIES_SCHEMA:
            return None, f"not a story snapshot (schema {_short(payload.get('schema'))})"
        stories, aliases = payload.get("stories"), payload.get("aliases", {})
        if not isinstance(stories, dict) or not all(isinstance(v, dict) for v in stories.values()):
            return None, "its 'stories' are not an object of stories"
        if not isinstance(aliases, dict):
            return None, "its 'aliases' are not an object"
        return payload, None
    if len(parts) != 4:
        return None, "not a page version"
    edition, section = parts[1], parts[2]
    schema = POOL_SCHEMA if section == layout.POOL_SECTION else PAGE_SCHEMA
    if payload.get("schema") != schema:
        return None, f"not a {'pool' if schema == POOL_SCHEMA else 'page'} (schema {_short(payload.get('schema'))})"
    if payload.get("edition") != edition or payload.get("section") != section:
        return None, (f"a version of {_short(payload.get('edition'))}/{_short(payload.get('section'))}, "
                      f"not of {edition}/{section}")
    stories = payload.get("stories")
    if not isinstance(stories, list) or not all(isinstance(s, dict) and isinstance(s.get("story_id"), str)
                                                for s in stories):
        return None, "its 'stories' are not a list of stories"
    return payload, None


def _search_version_payload(name: str, data: bytes) -> tuple[SearchMetaJson | None, str | None]:
    """A search index version (``v{n}.tar``): its meta when the bytes are an index of this release."""
    if version_of_name(name, layout.SEARCH_VERSION_SUFFIX) is None:
        return None, "not a search index version"
    try:
        return index_meta(data), None
    except SearchIndexError as e:
        return None, str(e)


def version_problem(key: str, data: bytes) -> str | None:
    """Why ``data`` is not a valid snapshot to hold at the version key ``key``; None when it is.

    Valid: a JSON object naming its own version number, with its folder's schema (a page, a pool,
    the story snapshot), a page's (or pool's) edition and section those of its folder, and its
    stories in its kind's shape (a list of story objects with a ``story_id``; the story
    snapshot's: an object of story objects, beside an ``aliases`` object). Every reader checks a
    version this way; the live one must also match its pointer's sha256, which an older version
    has no record of.
    """
    return version_payload(key, data)[1]


def _newest_valid_version(store: ObjectStore, version_key: Callable[[int], str], *, at_most: int | None = None,
                          skip: Iterable[int] = ()) -> tuple[int, str, bytes, SnapshotJson | SearchMetaJson] | None:
    """The newest stored version (at most ``at_most``, not in ``skip``) that passes
    :func:`version_problem`: ``(version, key, bytes, payload)``, or None among the newest
    :data:`FALLBACK_SEARCH_VERSIONS` candidates. Unreadable ones on the way are recorded."""
    skipped = set(skip)
    for found in checked_versions(store, version_key, lambda v: (at_most is None or v <= at_most) and v not in skipped):
        if found.payload is not None:
            return found.version, found.key, found.data, found.payload
        record_damage(found.key, f"corrupt: {found.problem}", "skipped")
    return None


@dataclass(frozen=True, slots=True)
class CheckedVersion:
    """A stored version as read: its bytes, and its payload when :func:`version_problem` passes it
    (else why not)."""

    version: int
    key: str
    data: bytes
    payload: SnapshotJson | SearchMetaJson | None
    problem: str | None


def checked_versions(store: ObjectStore, version_key: Callable[[int], str],
                     wanted: Callable[[int], bool]) -> Iterator[CheckedVersion]:
    """The stored versions of ``version_key``'s folder that ``wanted`` accepts, newest first, each
    read and checked as it is asked for: one listing of the folder, then at most
    :data:`FALLBACK_SEARCH_VERSIONS` reads (a version pruned since the listing is passed over)."""
    candidates = sorted((v for v in stored_versions(store, version_key) if wanted(v)), reverse=True)
    for version in candidates[:FALLBACK_SEARCH_VERSIONS]:
        key = version_key(version)
        try:
            data = store.get(key).data
        except ObjectNotFoundError:
            continue
        payload, problem = version_payload(key, data)
        yield CheckedVersion(version, key, data, payload, problem)


def _payload_or_none(data: bytes) -> SnapshotJson | None:
    try:
        payload = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None


def _stale_reason(payload: SnapshotJson, live: SnapshotJson | SearchMetaJson) -> str | None:
    """Why ``payload`` must not replace ``live``: it describes an earlier instant (a retried or
    overlapping run with an older ``now``). The same instant may publish again (a rerun)."""
    new, old = parse_iso_datetime(payload.get("as_of")), parse_iso_datetime(live.get("as_of"))
    if new is not None and old is not None and new < old:
        return f"stale: as_of {payload['as_of']} is older than the live version's {live['as_of']}"
    return None


@dataclass(frozen=True, slots=True)
class _LiveState:
    """What a publish starts from: the pointer (as read, or made up from the stored versions when it
    is damaged), the ETag to replace it with (None: create it), and the live payload (or the newest
    valid one when the live one is damaged)."""

    pointer: PagePointer | None
    etag: str | None
    previous: SnapshotJson | None
    damaged: bool


def _live_state(store: ObjectStore, pointer_key: str, version_key: Callable[[int], str]) -> _LiveState:
    """Read the pointer and its live version; a damaged one is recorded and worked around (issue 16).

    An unreadable pointer is made up from the stored versions (high water past every one of them,
    the newest valid one as ``previous``); a live version that is missing or does not match the
    pointer gives way to the newest valid one as ``previous``. Either way the publish replaces what
    is damaged: the next version goes past every stored one and the pointer is put with If-Match on
    the bytes read, so a rival publisher is still fenced. A missing pointer is a first publish (a
    publish that died before its first pointer leaves versions too), recorded when versions exist.
    """
    try:
        obj = store.get(pointer_key)
    except ObjectNotFoundError:
        obj = None
    pointer: PagePointer | None = None
    if obj is not None:
        try:
            pointer = pointer_from_bytes(obj.data, pointer_key)
        except SnapshotNotFoundError as e:
            record_damage(pointer_key, f"corrupt: {e.reason}", "replaced by this publish")
    etag = obj.etag if obj is not None else None
    if pointer is not None:
        try:
            data: bytes | None = store.get(pointer.key).data
        except ObjectNotFoundError:
            data = None
        previous = _payload_or_none(data) if data is not None else None
        if data is not None and previous is not None and hashlib.sha256(data).hexdigest() == pointer.sha256:
            return _LiveState(pointer, etag, previous, False)
        problem = "missing: the live version" if data is None else "corrupt: does not match the pointer"
        record_damage(pointer.key, problem, "a new version replaces it")
        newest = _newest_valid_version(store, version_key, at_most=pointer.version,
                                       skip=(*pointer.orphans, pointer.version))
        return _LiveState(pointer, etag, newest[3] if newest else None, True)
    if obj is None:
        # As for a first publish: the version goes past every stored one (``_put_version``), which
        # become orphans, so one left by a publish that died before its pointer never counts as live.
        if stored_versions(store, version_key):
            record_damage(pointer_key, "missing: versions are stored but no pointer names one",
                          "a new version past every stored one is published")
        return _LiveState(None, None, None, False)
    stored = stored_versions(store, version_key)
    newest = _newest_valid_version(store, version_key)
    high_water = max(stored, default=0)
    made_up = PagePointer(newest[0] if newest else 0, newest[1] if newest else "", "", "", high_water=high_water)
    return _LiveState(made_up, etag, newest[3] if newest else None, True)


def put_new_version(store: ObjectStore, version_key: Callable[[int], str], version: int,
                    encode: Callable[[int], bytes], content_type: str) -> tuple[int, str, bytes]:
    """Create version ``version`` holding ``encode(version)``, or the first free number after it.

    An existing object with the same bytes is adopted (a rerun at the same ``now`` after a crash
    before the pointer moved). One with other bytes is an orphan or another publisher's: the
    version goes past every stored one instead, so an orphan never wedges the page. A conditional
    put that failed while the key stays absent (S3 409 ConditionalRequestConflict: a concurrent
    conditional write was in flight, and may have failed) is tried again.
    """
    missing = 0
    for _ in range(_VERSION_ATTEMPTS):
        key = version_key(version)
        data = encode(version)
        try:
            store.put(key, data, if_none_match=True, content_type=content_type)
            return version, key, data
        except PreconditionFailedError:
            pass
        try:
            existing: bytes | None = store.get(key).data
        except ObjectNotFoundError:
            existing = None
        if existing == data:
            return version, key, data
        if existing is None and missing < _PUT_ATTEMPTS:
            missing += 1
            time.sleep(_RETRY_PAUSE_SECONDS * missing)
            continue
        missing = 0
        version = max([version, *stored_versions(store, version_key)]) + 1
    raise WarehouseError("no free version number after repeated conflicts", key=version_key(version))


def skipped_orphans(current: PagePointer | None, high_water: int, version: int) -> list[int]:
    """The orphans a pointer moved to ``version`` records: those it knew, and the numbers skipped on
    the way (an orphan's, a racing publisher's), which can no longer go live by a publish: whoever
    wrote them read the pointer this move replaces, so their If-Match fails."""
    return sorted({*(current.orphans if current else ()), *range(high_water + 1, version)})


def _publish_at(
    store: ObjectStore,
    pointer_key: str,
    version_key: Callable[[int], str],
    payload: SnapshotJson,
    now: datetime,
    validate: Validate,
    before_pointer: Callable[[], None] | None = None,
) -> PublishResult:
    """Publish, starting over (from the pointer) when another publisher moved the pointer first."""
    lost = PublishResult(pointer_key, 0, False, LOST_RACE)
    for _ in range(PUBLISH_ATTEMPTS):
        live = _live_state(store, pointer_key, version_key)
        current, previous = live.pointer, live.previous
        if previous is not None:
            comparable: SnapshotJson = {**previous, "version": None, "as_of": None}
            if not live.damaged and current is not None and \
                    dump_snapshot(comparable) == dump_snapshot({**payload, "version": None, "as_of": None}):
                return PublishResult(current.key, current.version, False, "unchanged")
            stale = _stale_reason(payload, previous)
            if stale is not None:
                return PublishResult(current.key if current else "", current.version if current else 0, False,
                                     stale)
        # Never reuse a number: after a rollback the pointer remembers the newest one in high_water.
        high_water = current.high_water if current else 0
        problem = validate({**payload, "version": high_water + 1}, previous)
        if problem is not None:
            return PublishResult(version_key(high_water + 1), high_water + 1, False, f"invalid: {problem}")
        version, key, data = put_new_version(store, version_key, high_water + 1,
                                             lambda v: dump_snapshot({**payload, "version": v}), "application/json")
        if before_pointer is not None:
            before_pointer()
        pointer = pointer_json(version, key, data, now, orphans=skipped_orphans(current, high_water, version))
        try:
            put_pointer(store, pointer_key, dump_snapshot(pointer), live.etag)
        except PreconditionFailedError:
            lost = PublishResult(key, version, False, LOST_RACE)
            continue
        was_live = current.version if current is not None and current.version > 0 else None
        return PublishResult(key, version, True, "published", previous=was_live, moved_at=pointer["published_at"])
    return lost


def publish_page(
    store: ObjectStore,
    edition: str,
    section: str,
    payload: SnapshotJson,
    *,
    now: datetime,
    validate: Validate,
    before_pointer: Callable[[], None] | None = None,
) -> PublishResult:
    """Write the next immutable version, validate it against the live one, then move the pointer.

    A payload equal to the live version (ignoring ``version`` and ``as_of``) publishes nothing, so
    rerunning a cycle changes nothing; one whose ``as_of`` is older than the live version's is
    refused (reason ``stale: ...``), so an overlapping or retried run never moves a page back in
    time. ``validate(new, previous)`` returns a reason to refuse, or None. ``before_pointer`` runs
    between the version put and the pointer move (crash tests). Losing the pointer to another
    publisher starts over from the new pointer, a few times.
    """
    return _publish_at(
        store,
        layout.page_pointer_key(edition, section),
        lambda v: layout.page_version_key(edition, section, v),
        payload,
        now,
        validate,
        before_pointer,
    )


def publish_stories(
    store: ObjectStore,
    payload: SnapshotJson,
    *,
    now: datetime,
    validate: Validate,
    before_pointer: Callable[[], None] | None = None,
) -> PublishResult:
    """Publish the story snapshot the same way as a page."""
    return _publish_at(
        store, layout.story_snapshot_pointer_key(), layout.story_snapshot_key, payload, now, validate,
        before_pointer,
    )


def rollback_page(store: ObjectStore, edition: str, section: str, version: int, *, now: datetime) -> PublishResult:
    """Point a page back at an earlier published version, with a conditional put on the pointer.

    The version must exist and differ from the live one (a newer one undoes a rollback); readers
    check its bytes against the pointer's sha256 as usual. The result's ``previous`` and ``moved_at``
    describe the pointer move, also when the version is found already live through an earlier
    rollback (so a caller that died before recording that rollback can record it now).
    Raises SnapshotNotFoundError when there is no live pointer or no such version.
    """
    pointer_key = layout.page_pointer_key(edition, section)
    found = read_pointer_at(store, pointer_key)
    if found is None:
        raise SnapshotNotFoundError("no live version", key=pointer_key)
    current, etag = found
    key = layout.page_version_key(edition, section, version)
    try:
        data = store.get(key).data
    except ObjectNotFoundError as e:
        raise SnapshotNotFoundError("no such version", key=key) from e
    if version == current.version:
        return PublishResult(key, version, False, "already the live version", previous=current.rolled_back_from,
                             moved_at=current.published_at if current.rolled_back_from is not None else None)
    pointer = pointer_json(version, key, data, now, high_water=current.high_water,
                           rolled_back_from=current.version, orphans=current.orphans)
    try:
        put_pointer(store, pointer_key, dump_snapshot(pointer), etag)
    except PreconditionFailedError:
        return PublishResult(key, version, False, LOST_RACE)
    return PublishResult(key, version, True, "rolled back", previous=current.version, moved_at=pointer["published_at"])


def repoint_to_newest_valid(store: ObjectStore, pointer_key: str, *, now: datetime) -> PublishResult | None:
    """Point a damaged pointer at its folder's newest valid version (``newsroom doctor --repair``).

    With a readable pointer, the newest valid version at or below the one it names (not an orphan,
    not the damaged one); else the newest valid version stored. The new pointer keeps the high
    water past every stored version (numbers are never reused) and the orphans it knew, and is put
    with If-Match on what was read (If-None-Match when there was none), so a publisher that moved
    it meanwhile wins. None when no version is valid.
    """
    version_key = folder_version_key(pointer_key)
    try:
        obj = store.get(pointer_key)
    except ObjectNotFoundError:
        obj = None
    try:
        pointer = pointer_from_bytes(obj.data, pointer_key) if obj is not None else None
    except SnapshotNotFoundError:
        pointer = None
    skip = (*pointer.orphans, pointer.version) if pointer is not None else ()
    newest = _newest_valid_version(store, version_key, at_most=pointer.version if pointer else None, skip=skip)
    if newest is None:
        return None
    version, key, data, _ = newest
    high_water = max([version, *stored_versions(store, version_key), pointer.high_water if pointer else 0])
    moved = pointer_json(version, key, data, now, high_water=high_water,
                         orphans=pointer.orphans if pointer is not None else ())
    try:
        put_pointer(store, pointer_key, dump_snapshot(moved), obj.etag if obj is not None else None)
    except PreconditionFailedError:
        return PublishResult(key, version, False, LOST_RACE)
    return PublishResult(key, version, True, "repointed", previous=pointer.version if pointer else None,
                         moved_at=moved["published_at"])
