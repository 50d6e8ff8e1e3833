"""Pointer objects (``latest.json``): the record, how it is read and written, and a folder's versions.

Every versioned folder (a page, the story snapshot, the search index) names its live version with
one pointer; the publish side (:mod:`warehouse.snapshots`, :mod:`warehouse.search_versions`) and
the read side (serving) share these reads. See docs/snapshots.md for the JSON contract.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NotRequired, TypedDict

from warehouse import layout
from warehouse.errors import ObjectNotFoundError, SnapshotNotFoundError
from warehouse.store import ObjectStore


class PointerJson(TypedDict):
    """A pointer object as stored: the optional keys appear only when a move set them."""

    version: int
    key: str
    sha256: str
    published_at: str
    high_water: NotRequired[int]
    rolled_back_from: NotRequired[int]
    orphans: NotRequired[list[int]]


class SearchPointerJson(PointerJson):
    """The search index's pointer: a page's, plus what the index holds (issue 30)."""

    as_of: str
    digest: str
    documents: int


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

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> PagePointer:
        """The pointer a parsed ``latest.json`` holds.

        Raises:
            ValueError, KeyError, TypeError: A key is missing or of the wrong kind.
        """
        version = int(_number(raw["version"]))
        rolled_back_from = raw.get("rolled_back_from")
        orphans = raw.get("orphans") or ()
        if not isinstance(orphans, Iterable):
            raise TypeError("orphans is not a list")
        return cls(
            version, str(raw["key"]), str(raw["sha256"]), str(raw["published_at"]),
            high_water=max(version, int(_number(raw.get("high_water") or 0))),
            rolled_back_from=int(_number(rolled_back_from)) if rolled_back_from is not None else None,
            orphans=tuple(sorted(int(_number(v)) for v in orphans)),
        )

    def was_published(self, version: int) -> bool:
        """Whether a publish ever moved this pointer to ``version`` (rollbacks aside): a version past
        the high water is still in flight or orphaned, and an orphan never went live."""
        return version <= self.high_water and version not in self.orphans


def _number(value: object) -> int | float | str:
    """A JSON value ``int()`` may take (a number, or a string of digits as old pointers hold)."""
    if isinstance(value, int | float | str):
        return value
    raise TypeError(f"not a number: {type(value).__name__}")


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


def pointer_json(version: int, key: str, data: bytes, now: datetime, *, high_water: int | None = None,
                 rolled_back_from: int | None = None, orphans: Sequence[int] = ()) -> PointerJson:
    """The pointer a move writes: naming ``key`` (holding ``data``) as the live ``version`` at ``now``.

    ``high_water`` and ``rolled_back_from`` are written when given, ``orphans`` when there are any,
    as each kind of move always has (a publish leaves the high water to its version).
    """
    moved: PointerJson = {
        "version": version,
        "key": key,
        "sha256": hashlib.sha256(data).hexdigest(),
        "published_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if high_water is not None:
        moved["high_water"] = high_water
    if rolled_back_from is not None:
        moved["rolled_back_from"] = rolled_back_from
    if orphans:
        moved["orphans"] = list(orphans)
    return moved


def put_pointer(store: ObjectStore, pointer_key: str, data: bytes, etag: str | None) -> None:
    """Put a pointer's bytes conditionally: replacing the object read with ``etag``, or creating it
    when there was none (None), so a rival publisher that moved it meanwhile wins.

    Raises:
        PreconditionFailedError: The pointer moved (or appeared) since it was read.
    """
    if etag is None:
        store.put(pointer_key, data, if_none_match=True, content_type="application/json")
    else:
        store.put(pointer_key, data, if_match=etag, content_type="application/json")


def pointer_from_bytes(data: bytes, key: str) -> PagePointer:
    """The pointer stored at ``key``. It must name a version of its own folder (``v{version}.json``
    beside it): a pointer naming another page's version would pass that version's sha256 check and
    serve one page's stories under another's name.

    Raises:
        SnapshotNotFoundError: The bytes are not such a pointer.
    """
    try:
        raw = json.loads(data)
        pointer = PagePointer.from_json(raw)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise SnapshotNotFoundError("unreadable pointer", key=key) from e
    version = pointer.version
    if version < 1 or pointer.key != f"{key.rsplit('/', 1)[0]}/v{version}{version_suffix(key)}":
        raise SnapshotNotFoundError("unreadable pointer: it names no version of its own page", key=key)
    return pointer


def version_suffix(key: str) -> str:
    """How a folder's version keys end: ``.tar`` for the search index (issue 30), else ``.json``."""
    parts = key.split("/")
    return layout.SEARCH_VERSION_SUFFIX if len(parts) == 3 and parts[1] == layout.SEARCH_PAGE else ".json"


def folder_version_key(pointer_key: str) -> Callable[[int], str]:
    """How the versions beside the pointer at ``pointer_key`` are named: ``v{n}`` and the folder's suffix."""
    folder = pointer_key.rsplit("/", 1)[0]
    suffix = version_suffix(pointer_key)
    return lambda version: f"{folder}/v{version}{suffix}"


def version_of_name(name: str, suffix: str = ".json") -> int | None:
    """``v12.json`` -> 12; anything else -> None."""
    if name.startswith("v") and name.endswith(suffix) and name[1:-len(suffix)].isdigit():
        return int(name[1:-len(suffix)])
    return None


def read_pointer_at(store: ObjectStore, pointer_key: str) -> tuple[PagePointer, str] | None:
    """The pointer at ``pointer_key`` and its ETag; None when there is none.

    Raises:
        SnapshotNotFoundError: It is unreadable.
    """
    try:
        obj = store.get(pointer_key)
    except ObjectNotFoundError:
        return None
    return pointer_from_bytes(obj.data, pointer_key), obj.etag


def stored_versions(store: ObjectStore, version_key: Callable[[int], str]) -> list[int]:
    """The version numbers stored in ``version_key``'s folder (listed once, unordered)."""
    folder = version_key(1).rsplit("/", 1)[0] + "/"
    suffix = version_suffix(version_key(1))
    versions = []
    for key in store.list(folder):
        version = version_of_name(key[len(folder):], suffix)
        if version is not None:
            versions.append(version)
    return versions


@dataclass(frozen=True, slots=True)
class PointerRead:
    """A pointer as a reader found it: the pointer (None when missing or unreadable), the ETag of
    its object (None when there is none), and why it names no version to trust (None when it does)."""

    pointer: PagePointer | None
    etag: str | None
    problem: str | None


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

