"""Page snapshots: immutable versions, validated, then a pointer moved last.

The write side is used by rank & publish; the read side (``read_live_*``, ``list_live_pages``)
is all that serving may use. See docs/snapshots.md for the JSON contract.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from newsroom.times import parse_iso_datetime
from warehouse import layout
from warehouse.damage import describe_error, record_damage
from warehouse.errors import (
    ObjectNotFoundError,
    PreconditionFailedError,
    SnapshotNotFoundError,
    WarehouseError,
)
from warehouse.search_index import SearchIndexError, index_meta
from warehouse.store import ObjectStore

PAGE_SCHEMA = "newsroom.page/1"
POOL_SCHEMA = "newsroom.pool/1"
STORIES_SCHEMA = "newsroom.stories/1"


@dataclass(frozen=True, slots=True)
class PagePointer:
    """A pointer object (``latest.json``): the live version, and what the publishers wrote beside it.

    ``high_water`` is the newest version number ever given out under this pointer, never below
    ``version`` (it passes ``version`` after a rollback); ``orphans`` are version numbers below it that were written but
    never made live (a publisher died, or lost a race, between its version put and its pointer move).
    """

    version: int
    key: str
    sha256: str
    published_at: str
    high_water: int = 0
    rolled_back_from: int | None = None
    orphans: tuple[int, ...] = ()

    def was_published(self, version: int) -> bool:
        """Whether a publish ever moved this pointer to ``version`` (rollbacks aside): a version past
        the high water is still in flight or orphaned, and an orphan never went live."""
        return version <= self.high_water and version not in self.orphans


@dataclass(frozen=True, slots=True)
class LivePage:
    """The bytes of a live page version, exactly as published (the ETag is their sha256), and, when
    the reader checked them (:func:`servable_versions`), the parsed payload."""

    pointer: PagePointer
    data: bytes
    payload: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class PublishResult:
    """What a publish or rollback did. ``previous`` is the version the pointer named before the move
    (for a rollback found already live: the version it was rolled back from), ``moved_at`` the
    pointer's ``published_at`` for that move."""

    key: str
    version: int
    published: bool
    reason: str
    previous: int | None = None
    moved_at: str | None = None


LOST_RACE = "pointer moved by another publisher"
"""The reason a publish gives when every attempt lost the pointer to another publisher."""
_PUBLISH_ATTEMPTS = 4
_PUT_ATTEMPTS = 5
_VERSION_ATTEMPTS = 64
_RETRY_PAUSE_SECONDS = 0.05
FALLBACK_SEARCH_VERSIONS = 20
"""Most older versions, newest first, read to find the newest valid one when the live one is
damaged (and, by a replica, to find a story its live pages list; docs/store-faults.md)."""


def dump_snapshot(payload: Mapping[str, Any]) -> bytes:
    """Serialise a snapshot deterministically: sorted keys, compact, UTF-8, strict JSON.

    Raises ``ValueError`` on a NaN or infinite number rather than writing bare ``NaN``, which no
    JSON reader accepts: an invalid page is never published.
    """
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()


def pointer_from_bytes(data: bytes, key: str) -> PagePointer:
    """The pointer stored at ``key``. It must name a version of its own folder (``v{version}.json``
    beside it): a pointer naming another page's version would pass that version's sha256 check and
    serve one page's stories under another's name.

    Raises:
        SnapshotNotFoundError: The bytes are not such a pointer.
    """
    try:
        raw = json.loads(data)
        version = int(raw["version"])
        rolled_back_from = raw.get("rolled_back_from")
        pointer = PagePointer(
            version, str(raw["key"]), str(raw["sha256"]), str(raw["published_at"]),
            high_water=max(version, int(raw.get("high_water") or 0)),
            rolled_back_from=int(rolled_back_from) if rolled_back_from is not None else None,
            orphans=tuple(sorted(int(v) for v in raw.get("orphans") or ())),
        )
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise SnapshotNotFoundError("unreadable pointer", key=key) from e
    if version < 1 or pointer.key != f"{key.rsplit('/', 1)[0]}/v{version}{_version_suffix(key)}":
        raise SnapshotNotFoundError("unreadable pointer: it names no version of its own page", key=key)
    return pointer


def _version_suffix(key: str) -> str:
    """How a folder's version keys end: ``.tar`` for the search index (issue 30), else ``.json``."""
    parts = key.split("/")
    return layout.SEARCH_VERSION_SUFFIX if len(parts) == 3 and parts[1] == layout.SEARCH_PAGE else ".json"


def _read_pointer_at(store: ObjectStore, pointer_key: str) -> tuple[PagePointer, str] | None:
    try:
        obj = store.get(pointer_key)
    except ObjectNotFoundError:
        return None
    return pointer_from_bytes(obj.data, pointer_key), obj.etag


MISSING_VERSION = "pointer names a missing version"
SHA256_MISMATCH = "version bytes do not match the pointer's sha256"


def _read_live_at(store: ObjectStore, pointer_key: str) -> LivePage:
    found = _read_pointer_at(store, pointer_key)
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
    found = _read_pointer_at(store, layout.page_pointer_key(edition, section))
    return found[0] if found else None


def read_stories_pointer(store: ObjectStore) -> PagePointer | None:
    """The story snapshot's pointer, or None before the first publish."""
    found = _read_pointer_at(store, layout.story_snapshot_pointer_key())
    return found[0] if found else None


def read_json_payload(store: ObjectStore, key: str) -> dict[str, Any] | None:
    """A JSON object stored at ``key``; None when it is gone, or unreadable (recorded, skipped)."""
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
                              read: Callable[[str], dict[str, Any] | None] | None = None
                              ) -> Iterator[tuple[int, dict[str, Any]]]:
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
        yield version, payload


def story_snapshot_at(store: ObjectStore, at: datetime, *, search: int) -> dict[str, Any] | None:
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
                and (parts[3] == "latest.json" or _version_of_name(parts[3]) is not None)):
            pages.add((parts[1], parts[2]))
    return sorted(pages)


def _version_of_name(name: str, suffix: str = ".json") -> int | None:
    """``v12.json`` -> 12; anything else -> None."""
    if name.startswith("v") and name.endswith(suffix) and name[1:-len(suffix)].isdigit():
        return int(name[1:-len(suffix)])
    return None


def _short(value: Any) -> str:
    """A value from a damaged object, cut short for a message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _version_payload(key: str, data: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """``(payload, None)`` when ``data`` is a valid snapshot to hold at the version key ``key``,
    else ``(None, why)``; see :func:`version_problem`."""
    parts = key.split("/")
    if len(parts) == 3 and parts[1] == layout.SEARCH_PAGE:
        return _search_version_payload(parts[-1], data)
    number = _version_of_name(parts[-1])
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


def _search_version_payload(name: str, data: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """A search index version (``v{n}.tar``): its meta when the bytes are an index of this release."""
    if _version_of_name(name, layout.SEARCH_VERSION_SUFFIX) is None:
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
    return _version_payload(key, data)[1]


def _newest_valid_version(store: ObjectStore, version_key: Callable[[int], str], *, at_most: int | None = None,
                          skip: Iterable[int] = ()) -> tuple[int, str, bytes, dict[str, Any]] | None:
    """The newest stored version (at most ``at_most``, not in ``skip``) that passes
    :func:`version_problem`: ``(version, key, bytes, payload)``, or None among the newest
    :data:`FALLBACK_SEARCH_VERSIONS` candidates. Unreadable ones on the way are recorded."""
    skipped = set(skip)
    candidates = sorted((v for v in _stored_versions(store, version_key)
                         if (at_most is None or v <= at_most) and v not in skipped), reverse=True)
    for version in candidates[:FALLBACK_SEARCH_VERSIONS]:
        key = version_key(version)
        try:
            data = store.get(key).data
        except ObjectNotFoundError:
            continue
        payload, problem = _version_payload(key, data)
        if payload is not None:
            return version, key, data, payload
        record_damage(key, f"corrupt: {problem}", "skipped")
    return None


def _payload_or_none(data: bytes) -> dict[str, Any] | None:
    try:
        payload = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None


@dataclass(frozen=True, slots=True)
class PointerRead:
    """A pointer as a reader found it: the pointer (None when missing or unreadable), the ETag of
    its object (None when there is none), and why it names no version to trust (None when it does)."""

    pointer: PagePointer | None
    etag: str | None
    problem: str | None


@dataclass(frozen=True, slots=True)
class SkippedVersion:
    """A version a reader passed over on its way to one it could use: its number and why."""

    version: int
    problem: str


def read_pointer_state(store: ObjectStore, pointer_key: str) -> PointerRead:
    """The pointer at ``pointer_key``; a missing or unreadable one is described, not raised.

    Raises:
        WarehouseError: The store failed (anything but a missing object).
    """
    try:
        obj = store.get(pointer_key)
    except ObjectNotFoundError:
        return PointerRead(None, None, "no live version")
    try:
        return PointerRead(pointer_from_bytes(obj.data, pointer_key), obj.etag, None)
    except SnapshotNotFoundError as e:
        return PointerRead(None, obj.etag, e.reason)


def servable_versions(store: ObjectStore, pointer_key: str, found: PointerRead, *,
                      below: int | None = None) -> Iterator[LivePage | SkippedVersion]:
    """The versions a reader may serve for a pointer, newest first, each checked: the first
    :class:`LivePage` yielded is the one to serve, each :class:`SkippedVersion` one passed over.

    First the live version, which must be stored, match the pointer's sha256 and pass
    :func:`version_problem`; then older ones, which must pass :func:`version_problem`: with a
    readable pointer, only versions below the live one that it published (never an orphan, never
    one a rollback left above it); without one, every stored version. It lists the page's own
    folder once and reads at most :data:`FALLBACK_SEARCH_VERSIONS` older versions (a version
    pruned since the listing is passed over unnamed). The pointer of an older version is made up
    from it (its own sha256, ``as_of`` as ``published_at``).

    Args:
        found: The pointer, as :func:`read_pointer_state` read it.
        below: Only versions below this one, not the live one (a reader looking further back).

    Raises:
        WarehouseError: The store failed.
    """
    pointer = found.pointer
    ceiling = below - 1 if below is not None else None
    if pointer is not None:
        if below is None:
            live = _checked_live(store, pointer)
            yield live
            if isinstance(live, LivePage):
                return
        ceiling = min(pointer.version - 1, ceiling if ceiling is not None else pointer.version)
    folder = pointer_key.rsplit("/", 1)[0]

    def version_key(version: int) -> str:
        return f"{folder}/v{version}{_version_suffix(pointer_key)}"

    candidates = sorted((v for v in _stored_versions(store, version_key)
                         if (ceiling is None or v <= ceiling) and (pointer is None or pointer.was_published(v))),
                        reverse=True)
    for version in candidates[:FALLBACK_SEARCH_VERSIONS]:
        key = version_key(version)
        try:
            data = store.get(key).data
        except ObjectNotFoundError:
            continue
        payload, problem = _version_payload(key, data)
        if payload is None:
            yield SkippedVersion(version, problem or "unreadable")
            continue
        yield LivePage(PagePointer(version, key, hashlib.sha256(data).hexdigest(), str(payload.get("as_of") or ""),
                                   high_water=version), data, payload)


def _checked_live(store: ObjectStore, pointer: PagePointer) -> LivePage | SkippedVersion:
    try:
        data = store.get(pointer.key).data
    except ObjectNotFoundError:
        return SkippedVersion(pointer.version, MISSING_VERSION)
    if hashlib.sha256(data).hexdigest() != pointer.sha256:
        return SkippedVersion(pointer.version, SHA256_MISMATCH)
    payload, problem = _version_payload(pointer.key, data)
    return LivePage(pointer, data, payload) if payload is not None else SkippedVersion(pointer.version,
                                                                                     problem or "unreadable")


def _stale_reason(payload: Mapping[str, Any], live: Mapping[str, Any]) -> str | None:
    """Why ``payload`` must not replace ``live``: it describes an earlier instant (a retried or
    overlapping run with an older ``now``). The same instant may publish again (a rerun)."""
    new, old = parse_iso_datetime(payload.get("as_of")), parse_iso_datetime(live.get("as_of"))
    if new is not None and old is not None and new < old:
        return f"stale: as_of {payload['as_of']} is older than the live version's {live['as_of']}"
    return None


def _stored_versions(store: ObjectStore, version_key: Callable[[int], str]) -> list[int]:
    folder = version_key(1).rsplit("/", 1)[0] + "/"
    suffix = _version_suffix(version_key(1))
    versions = []
    for key in store.list(folder):
        version = _version_of_name(key[len(folder):], suffix)
        if version is not None:
            versions.append(version)
    return versions


@dataclass(frozen=True, slots=True)
class _LiveState:
    """What a publish starts from: the pointer (as read, or made up from the stored versions when it
    is damaged), the ETag to replace it with (None: create it), and the live payload (or the newest
    valid one when the live one is damaged)."""

    pointer: PagePointer | None
    etag: str | None
    previous: dict[str, Any] | None
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
        if _stored_versions(store, version_key):
            record_damage(pointer_key, "missing: versions are stored but no pointer names one",
                          "a new version past every stored one is published")
        return _LiveState(None, None, None, False)
    stored = _stored_versions(store, version_key)
    newest = _newest_valid_version(store, version_key)
    high_water = max(stored, default=0)
    made_up = PagePointer(newest[0] if newest else 0, newest[1] if newest else "", "", "", high_water=high_water)
    return _LiveState(made_up, etag, newest[3] if newest else None, True)


def _put_version(store: ObjectStore, version_key: Callable[[int], str], payload: Mapping[str, Any],
                 version: int) -> tuple[int, str, bytes]:
    """Create version ``version`` of ``payload``, or the first free number after it.

    An existing object with the same bytes is adopted (a rerun at the same ``now`` after a crash
    before the pointer moved). One with other bytes is an orphan or another publisher's: the
    version goes past every stored one instead, so an orphan never wedges the page. A conditional
    put that failed while the key stays absent (S3 409 ConditionalRequestConflict: a concurrent
    conditional write was in flight, and may have failed) is tried again.
    """
    missing = 0
    for _ in range(_VERSION_ATTEMPTS):
        key = version_key(version)
        data = dump_snapshot(dict(payload, version=version))
        try:
            store.put(key, data, if_none_match=True, content_type="application/json")
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
        version = max([version, *_stored_versions(store, version_key)]) + 1
    raise WarehouseError("no free version number after repeated conflicts", key=version_key(version))


def _publish_at(
    store: ObjectStore,
    pointer_key: str,
    version_key: Callable[[int], str],
    payload: dict[str, Any],
    now: datetime,
    validate: Callable[[dict[str, Any], dict[str, Any] | None], str | None],
    before_pointer: Callable[[], None] | None = None,
) -> PublishResult:
    """Publish, starting over (from the pointer) when another publisher moved the pointer first."""
    lost = PublishResult(pointer_key, 0, False, LOST_RACE)
    for _ in range(_PUBLISH_ATTEMPTS):
        live = _live_state(store, pointer_key, version_key)
        current, previous = live.pointer, live.previous
        if previous is not None:
            comparable = dict(previous, version=None, as_of=None)
            if not live.damaged and current is not None and \
                    dump_snapshot(comparable) == dump_snapshot(dict(payload, version=None, as_of=None)):
                return PublishResult(current.key, current.version, False, "unchanged")
            stale = _stale_reason(payload, previous)
            if stale is not None:
                return PublishResult(current.key if current else "", current.version if current else 0, False,
                                     stale)
        # Never reuse a number: after a rollback the pointer remembers the newest one in high_water.
        high_water = current.high_water if current else 0
        problem = validate(dict(payload, version=high_water + 1), previous)
        if problem is not None:
            return PublishResult(version_key(high_water + 1), high_water + 1, False, f"invalid: {problem}")
        version, key, data = _put_version(store, version_key, payload, high_water + 1)
        if before_pointer is not None:
            before_pointer()
        pointer: dict[str, Any] = {
            "version": version,
            "key": key,
            "sha256": hashlib.sha256(data).hexdigest(),
            "published_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        # Numbers skipped on the way (an orphan's, a racing publisher's) can no longer go live by a
        # publish: whoever wrote them read the pointer this put replaces, so their If-Match fails.
        orphans = sorted({*(current.orphans if current else ()), *range(high_water + 1, version)})
        if orphans:
            pointer["orphans"] = orphans
        try:
            if live.etag is None:
                store.put(pointer_key, dump_snapshot(pointer), if_none_match=True, content_type="application/json")
            else:
                store.put(pointer_key, dump_snapshot(pointer), if_match=live.etag, content_type="application/json")
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
    payload: dict[str, Any],
    *,
    now: datetime,
    validate: Callable[[dict[str, Any], dict[str, Any] | None], str | None],
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
    payload: dict[str, Any],
    *,
    now: datetime,
    validate: Callable[[dict[str, Any], dict[str, Any] | None], str | None],
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
    found = _read_pointer_at(store, pointer_key)
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
    pointer: dict[str, Any] = {
        "version": version,
        "key": key,
        "sha256": hashlib.sha256(data).hexdigest(),
        "published_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "high_water": current.high_water,
        "rolled_back_from": current.version,
    }
    if current.orphans:
        pointer["orphans"] = list(current.orphans)
    try:
        store.put(pointer_key, dump_snapshot(pointer), if_match=etag, content_type="application/json")
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
    folder = pointer_key.rsplit("/", 1)[0]

    def version_key(version: int) -> str:
        return f"{folder}/v{version}{_version_suffix(pointer_key)}"

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
    high_water = max([version, *_stored_versions(store, version_key), pointer.high_water if pointer else 0])
    moved = {"version": version, "key": key, "sha256": hashlib.sha256(data).hexdigest(),
             "published_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "high_water": high_water}
    if pointer is not None and pointer.orphans:
        moved["orphans"] = list(pointer.orphans)
    try:
        if obj is None:
            store.put(pointer_key, dump_snapshot(moved), if_none_match=True, content_type="application/json")
        else:
            store.put(pointer_key, dump_snapshot(moved), if_match=obj.etag, content_type="application/json")
    except PreconditionFailedError:
        return PublishResult(key, version, False, LOST_RACE)
    return PublishResult(key, version, True, "repointed", previous=pointer.version if pointer else None,
                         moved_at=moved["published_at"])


# -- the search index: a versioned object that is not JSON (issue 30) --------------------------


def _put_blob(store: ObjectStore, version_key: Callable[[int], str], data: bytes, version: int) -> tuple[int, str]:
    """Create version ``version`` holding ``data``, or the first free number after it (as
    :func:`_put_version` does for a JSON payload)."""
    missing = 0
    for _ in range(_VERSION_ATTEMPTS):
        key = version_key(version)
        try:
            store.put(key, data, if_none_match=True, content_type="application/x-tar")
            return version, key
        except PreconditionFailedError:
            pass
        try:
            existing: bytes | None = store.get(key).data
        except ObjectNotFoundError:
            existing = None
        if existing == data:
            return version, key
        if existing is None and missing < _PUT_ATTEMPTS:
            missing += 1
            time.sleep(_RETRY_PAUSE_SECONDS * missing)
            continue
        missing = 0
        version = max([version, *_stored_versions(store, version_key)]) + 1
    raise WarehouseError("no free version number after repeated conflicts", key=version_key(version))


def read_search_pointer(store: ObjectStore) -> tuple[PagePointer, dict[str, Any]] | None:
    """The search index's pointer and its JSON (``digest``, ``as_of``, ``documents``, ...), or None
    before the first publish. Raises SnapshotNotFoundError when it is unreadable."""
    pointer_key = layout.search_index_pointer_key()
    found = _read_pointer_at(store, pointer_key)
    if found is None:
        return None
    raw = json.loads(store.get(pointer_key).data)
    return found[0], raw


def publish_search_index(store: ObjectStore, build: Callable[[], bytes], *, digest: str, as_of: str,
                         documents: int, now: datetime, validate: Callable[[bytes], str | None]) -> PublishResult:
    """Publish a search index version beside the pages: validated, put, then the pointer moved.

    Nothing is built or published when the live version indexes the same documents (``digest``),
    and a version whose ``as_of`` is older than the live one's is refused (``stale: ...``), as for
    a page. Otherwise ``build()`` makes the bytes (once), ``validate(data)`` opens them as a replica
    would and returns a reason to refuse, or None; only then is the version put and the pointer
    moved (If-Match on the pointer read, so a rival publisher is fenced and the loser starts
    over). A damaged pointer is recorded and replaced; numbers are never reused.
    """
    made: list[bytes] = []
    pointer_key = layout.search_index_pointer_key()
    lost = PublishResult(pointer_key, 0, False, LOST_RACE)
    for _ in range(_PUBLISH_ATTEMPTS):
        try:
            obj = store.get(pointer_key)
        except ObjectNotFoundError:
            obj = None
        pointer: PagePointer | None = None
        raw: dict[str, Any] = {}
        if obj is not None:
            try:
                pointer = pointer_from_bytes(obj.data, pointer_key)
                raw = json.loads(obj.data)
            except SnapshotNotFoundError as e:
                record_damage(pointer_key, f"corrupt: {e.reason}", "replaced by this publish")
        if pointer is not None and raw.get("digest") == digest and store.head(pointer.key) is not None:
            return PublishResult(pointer.key, pointer.version, False, "unchanged")
        if pointer is not None and str(raw.get("as_of") or "") > as_of:
            return PublishResult(pointer.key, pointer.version, False,
                                 f"stale: as_of {as_of} is older than the live version's {raw.get('as_of')}")
        high_water = pointer.high_water if pointer else 0
        if not made:
            made.append(build())
        data = made[0]
        problem = validate(data)
        if problem is not None:
            return PublishResult(layout.search_index_key(high_water + 1), high_water + 1, False, f"invalid: {problem}")
        version, key = _put_blob(store, layout.search_index_key, data, high_water + 1)
        moved: dict[str, Any] = {
            "version": version, "key": key, "sha256": hashlib.sha256(data).hexdigest(),
            "published_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "as_of": as_of, "digest": digest,
            "documents": documents,
        }
        # As for a page: numbers skipped on the way (a crashed publish's, a rival's) never go live.
        orphans = sorted({*(pointer.orphans if pointer else ()), *range(high_water + 1, version)})
        if orphans:
            moved["orphans"] = orphans
        try:
            if obj is None:
                store.put(pointer_key, dump_snapshot(moved), if_none_match=True, content_type="application/json")
            else:
                store.put(pointer_key, dump_snapshot(moved), if_match=obj.etag, content_type="application/json")
        except PreconditionFailedError:
            lost = PublishResult(key, version, False, LOST_RACE)
            continue
        return PublishResult(key, version, True, "published", previous=pointer.version if pointer else None,
                             moved_at=moved["published_at"])
    return lost


def prune_search_versions(store: ObjectStore, *, keep: int) -> list[str]:
    """Delete search index versions more than ``keep`` below the live one (none while the pointer
    is unreadable). Returns the keys deleted. Nothing rebuilds a past index (``rank --as-of``
    rebuilds pages), so the ``keep`` before the live one are only what a replica falls back to."""
    try:
        found = _read_pointer_at(store, layout.search_index_pointer_key())
    except SnapshotNotFoundError:
        return []
    if found is None:
        return []
    live = found[0].version
    deleted = []
    for version in sorted(_stored_versions(store, layout.search_index_key)):
        if version < live - keep:
            key = layout.search_index_key(version)
            store.delete(key)
            deleted.append(key)
    return deleted
