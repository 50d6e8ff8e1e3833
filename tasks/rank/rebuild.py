"""Pages as they were: ``newsroom rank --as-of`` and ``newsroom pages rollback``."""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import TypedDict

from newsroom.times import parse_iso
from tasks.aggregates.cycle import (
    aggregates_from_logs,
)
from tasks.progress import NO_PROGRESS, Progress, counted
from tasks.rank.compute import compute_pages
from tasks.rank.history import ROLLBACK_EVENT, PageHistory
from tasks.rank.publish import write_event
from tasks.settings import RankSettings
from transforms.pages import (
    iso,
)
from warehouse.pointers import PublishResult
from warehouse.snapshots import (
    dump_snapshot,
    rollback_page,
)
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)

class RebuiltVersion(TypedDict):
    """One page version live at the instant asked for, recomputed (a line of ``newsroom rank --as-of``)."""

    key: str
    as_of: str | None
    version: int
    identical: bool
    """Whether the recomputed bytes equal the published ones."""
    sha256: str


def rebuild_as_of(store: ObjectStore, at: datetime, settings: RankSettings,
                  output_dir: Path | None = None, progress: Progress = NO_PROGRESS) -> list[RebuiltVersion]:
    """Rebuild every page (and story snapshot) version that was live at ``at`` from the logs, and
    compare the bytes.

    For each page, the version live at ``at`` is the newest published one (never an orphan: see
    :class:`PageHistory`) with ``as_of <= at``, or a later rollback's target; it is recomputed
    at its own ``as_of`` with its own version number. Nothing in the store is written; with
    ``output_dir`` the rebuilt bytes go there under the same keys. ``progress`` counts the cycles
    recomputed (one per distinct ``as_of``).
    """
    history = PageHistory(store)
    targets: dict[datetime, list[tuple[tuple[str, str] | None, int, str]]] = defaultdict(list)
    # None stands for the story snapshot (pages/stories/), rebuilt like any page.
    candidates: list[tuple[str, str] | None] = [*history.pages(), None]
    for page in candidates:
        found = (history.live_version_at(*page, at, strict=False) if page is not None
                 else history.live_story_version_at(at))
        payload = history.payload(found[1]) if found is not None else None
        if found is not None and payload is not None:
            as_of = payload["as_of"]
            targets[parse_iso(as_of)].append((page, found[0], found[1]))
    report = []
    advance = progress.stage("recomputing cycles", len(targets))
    for when, pages in counted(sorted(targets.items()), advance):
        output = compute_pages(store, when, settings, history, view=aggregates_from_logs(store, when, settings))
        for page, version, key in pages:
            rebuilt = output.pages.get(page) if page is not None else None
            payload = dict(output.stories) if page is None else rebuilt.to_json() if rebuilt is not None else None
            data = dump_snapshot({**payload, "version": version}) if payload is not None else b""
            published = store.get(key).data
            if output_dir is not None and data:
                target = output_dir / key
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            report.append(RebuiltVersion(key=key, as_of=iso(when), version=version, identical=data == published,
                                         sha256=hashlib.sha256(data).hexdigest()))
    return report


def rollback_pointer(store: ObjectStore, edition: str, section: str, version: int, now: datetime) -> PublishResult:
    """Move a page's pointer back to an earlier version (``newsroom pages rollback``).

    The ``page.rollback`` event (so that stability and ``--as-of`` see the pointer as readers did,
    issue 5) is keyed by the time the pointer moved and written with If-None-Match after the move;
    a rerun that finds the version already live through a rollback writes it if a crash lost it.
    """
    result = rollback_page(store, edition, section, version, now=now)
    log.warning("page_rollback edition=%s section=%s version=%d reason=%s", edition, section, version, result.reason)
    if result.previous is not None and result.moved_at is not None:
        at = parse_iso(result.moved_at)
        if write_event(store, ROLLBACK_EVENT, f"{edition}.{section}.{at:%Y%m%dT%H%M%S}",
                        {"kind": ROLLBACK_EVENT, "edition": edition, "section": section, "at": result.moved_at,
                         "from": result.previous, "to": version}) and not result.published:
            log.warning("page_rollback_event_repaired edition=%s section=%s version=%d", edition, section, version)
    return result


