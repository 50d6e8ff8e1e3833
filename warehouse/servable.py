"""The versions a serving replica may answer from, checked, newest first (issue 32).

The live version when it is sound; else, version by version, an older one the pointer published
(or, with no readable pointer, any stored one), each checked as a publish would check it. A
replica answers from the first sound one and reports the ones it passed over
(docs/store-faults.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

from warehouse.errors import ObjectNotFoundError
from warehouse.pointers import PagePointer, PointerRead, folder_version_key
from warehouse.snapshots import (
    MISSING_VERSION,
    SHA256_MISMATCH,
    LivePage,
    checked_versions,
    version_payload,
)
from warehouse.store import ObjectStore


@dataclass(frozen=True, slots=True)
class SkippedVersion:
    """A version a reader passed over on its way to one it could use: its number and why."""

    version: int
    problem: str


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
    def wanted(version: int) -> bool:
        return (ceiling is None or version <= ceiling) and (pointer is None or pointer.was_published(version))

    for found in checked_versions(store, folder_version_key(pointer_key), wanted):
        if found.payload is None:
            yield SkippedVersion(found.version, found.problem or "unreadable")
            continue
        yield LivePage(PagePointer(found.version, found.key, hashlib.sha256(found.data).hexdigest(),
                                   str(found.payload.get("as_of") or ""), high_water=found.version),
                       found.data, found.payload)


def _checked_live(store: ObjectStore, pointer: PagePointer) -> LivePage | SkippedVersion:
    try:
        data = store.get(pointer.key).data
    except ObjectNotFoundError:
        return SkippedVersion(pointer.version, MISSING_VERSION)
    if hashlib.sha256(data).hexdigest() != pointer.sha256:
        return SkippedVersion(pointer.version, SHA256_MISMATCH)
    payload, problem = version_payload(pointer.key, data)
    return LivePage(pointer, data, payload) if payload is not None else SkippedVersion(pointer.version,
                                                                                     problem or "unreadable")
