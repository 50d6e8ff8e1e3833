"""``newsroom doctor``: list every corrupt or missing object in the store, and repair what is safe.

The listing reads every object the way its readers do (docs/store-faults.md has the rule for each
kind). ``--repair`` then, in this order:

1. points each damaged pointer (unreadable, missing beside versions, naming a missing or corrupt
   version) at its newest valid version, fenced by If-Match like a publish;
2. rebuilds a corrupt or missing writer checkpoint from the change log and the state blob at its
   end (:func:`tasks.writer.checkpoint.rebuild_checkpoint`), and rewinds a writer whose state blob is lost
   to its newest readable one (:func:`tasks.writer.checkpoint.rewind_writer`);
3. moves every other corrupt object under ``quarantine/`` (readers treat it as absent: a segment's
   rows are left out, a state table reads as empty), where nothing is lost;
4. deletes what puts killed mid-write left (temp files, unfinished S3 uploads) once older than any
   put in flight.

Offsets missing from a story-change log (a deleted segment) cannot be rebuilt: they are listed, and
rank goes on without those assignments. Exit codes (``newsroom doctor``): 0 nothing wrong (or,
with ``--repair``, everything repaired), 1 something wrong is left, 2 the store could not be read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TypedDict, cast

from tasks.errors import WriterFencedError
from tasks.writer.checkpoint import put_checkpoint, rebuild_checkpoint, rewind_writer
from warehouse import layout
from warehouse.aggregates import request_rebuild
from warehouse.catalog import LOG_TABLES, plan_table
from warehouse.checkpoints import WriterCheckpoint
from warehouse.damage import collect_damage, quarantine_object
from warehouse.errors import PreconditionFailedError
from warehouse.integrity import (
    POINTER_KINDS,
    VERSION_KINDS,
    Finding,
    change_log_gaps,
    check_pages,
    check_writers,
    finding,
    scan_objects,
    unique,
)
from warehouse.schemas import FEEDS_SCHEMA, PUBLISHERS_SCHEMA
from warehouse.snapshots import repoint_to_newest_valid
from warehouse.store import TEMPORARY_MAX_AGE_SECONDS, ObjectStore, delete_temporary, list_temporaries
from warehouse.tables import read_table

SCANNED_PREFIXES = (layout.PAGES_PREFIX, "state/", layout.EVENTS_PREFIX)
"""Prefixes whose every object the doctor reads and checks. Log segments are checked by their
footers, as every query's plan checks them (:func:`warehouse.catalog.plan_table`): one that cannot
be read, or holds a column of another type, is damaged; one with columns this release does not
know was written by a newer one, and is fine (issue 32)."""
_REGISTRY_TABLES = ((layout.PUBLISHERS_KEY, PUBLISHERS_SCHEMA), (layout.FEEDS_KEY, FEEDS_SCHEMA))
QUARANTINED_KINDS = frozenset({
    "article_segment", "change_segment", "click_segment", "link_segment", "page_version", "pool_version",
    "story_snapshot", "state_blob", "feed_state", "registry", "identity_shard", "robots_cache", "feed_boosts",
    "subscription", "push_marker", "event", "rank_aggregates",
})


@dataclass(frozen=True, slots=True)
class DoctorEntry:
    """One thing wrong: the object, its kind, the problem, and what ``--repair`` did (or would do)."""

    key: str
    kind: str
    problem: str
    action: str
    repaired: bool = False


def diagnose(store: ObjectStore, *, temporaries_older_than: float = TEMPORARY_MAX_AGE_SECONDS) -> list[Finding]:
    """Every corrupt or missing object, one finding per key, in key order; then stale temporaries.

    Raises:
        WarehouseError: The store could not be read.
    """
    with collect_damage() as damaged:
        plans = {name: plan_table(store, table) for name, table in LOG_TABLES.items()}
        for key, schema in _REGISTRY_TABLES:
            read_table(store, key, schema)  # records a corrupt one
    offsets, writers = check_writers(store)
    findings = [*(finding(d.key, d.problem) for d in damaged), *check_pages(store), *writers,
                *change_log_gaps(store, plans["story_changes"], offsets), *scan_objects(store, SCANNED_PREFIXES)]
    temporaries = [Finding(t.name, "temporary", f"left by a put killed mid-write {t.age_seconds:.0f}s ago")
                   for t in list_temporaries(store) if t.age_seconds >= temporaries_older_than]
    return [*unique(findings), *temporaries]


def _planned(f: Finding) -> str:
    if f.kind == "temporary":
        return "delete"
    if f.kind in POINTER_KINDS or (f.kind in VERSION_KINDS and f.named_by):
        return "point the page at its newest valid version"
    if f.kind == "checkpoint":
        return "rebuild from the change log and state blobs"
    if f.kind == "state_blob" and f.named_by:
        return "rewind the writer to its newest readable state"
    if f.kind == "change_segment" and f.problem.startswith("missing"):
        return "none: restore the segment from a backup (rank goes on without these assignments)"
    if f.kind in QUARANTINED_KINDS:
        return "quarantine"
    return "none"


def run_doctor(store: ObjectStore, now: datetime, *, repair: bool = False,
               temporaries_older_than: float = TEMPORARY_MAX_AGE_SECONDS) -> list[DoctorEntry]:
    """List what is wrong (:func:`diagnose`) and, with ``repair``, repair it (see the module doc).

    Returns:
        One entry per finding; with ``repair``, each says what was done and whether it is fixed.
    """
    findings = diagnose(store, temporaries_older_than=temporaries_older_than)
    if not repair:
        return [DoctorEntry(f.key, f.kind, f.problem, f"--repair would: {_planned(f)}") for f in findings]
    done: dict[str, tuple[str, bool]] = {}
    _repoint(store, findings, now, done)
    _repair_writers(store, findings, now, done)
    temporaries = {t.name: t for t in list_temporaries(store)}
    for f in findings:
        if f.key in done:
            continue
        plan = _planned(f)
        if f.kind == "temporary" and f.key in temporaries:
            delete_temporary(store, temporaries[f.key])
            done[f.key] = ("deleted", True)
        elif plan == "quarantine" or (f.kind in VERSION_KINDS and f.problem.startswith("corrupt")):
            moved = quarantine_object(store, f.key)
            done[f.key] = (f"moved to {moved}" if moved else "gone already", True)
        else:
            done[f.key] = (f"not repaired: {plan}", False)
    return [DoctorEntry(f.key, f.kind, f.problem, *done[f.key]) for f in findings]


def _repoint(store: ObjectStore, findings: Iterable[Finding], now: datetime, done: dict[str, tuple[str, bool]]) -> None:
    """Point each damaged pointer at its newest valid version (the damaged version is quarantined
    afterwards if it exists)."""
    pointers: dict[str, list[Finding]] = {}
    for f in findings:
        if f.kind in POINTER_KINDS:
            pointers.setdefault(f.key, []).append(f)
        elif f.kind in VERSION_KINDS and f.named_by:
            pointers.setdefault(f.named_by, []).append(f)
    for pointer_key, found in sorted(pointers.items()):
        result = repoint_to_newest_valid(store, pointer_key, now=now)
        if result is None:
            action, fixed = "not repaired: no valid version to point at", False
        elif result.published:
            action, fixed = f"pointer moved to v{result.version}", True
        else:
            action, fixed = f"not repaired: {result.reason}", False
        for f in found:
            if f.kind in VERSION_KINDS and f.problem.startswith("corrupt") and fixed:
                moved = quarantine_object(store, f.key)
                done[f.key] = (f"{action}; moved to {moved}", True)
            else:
                done[f.key] = (action, fixed)


def _repair_writers(store: ObjectStore, findings: Iterable[Finding], now: datetime,
                    done: dict[str, tuple[str, bool]]) -> None:
    for f in findings:
        language = f.key[len(layout.STORY_STATE_PREFIX):].split("/", 1)[0]
        try:
            if f.kind == "checkpoint":
                rebuilt = rebuild_checkpoint(store, language)
                if rebuilt is not None:
                    _put_rebuilt(store, language, rebuilt)
                    done[f.key] = (f"rebuilt at offset {rebuilt.offset} from {rebuilt.state_key}", True)
                else:
                    rewound = rewind_writer(store, language, now)
                    done[f.key] = (f"no state at the log's end: writer rewound to {rewound.state_key} "
                                   f"at offset {rewound.offset}{_rebuild_rank(store, language)}", True)
            elif f.kind == "state_blob" and f.named_by:
                rewound = rewind_writer(store, language, now)
                action = (f"writer rewound to {rewound.state_key} at offset {rewound.offset}"
                          f"{_rebuild_rank(store, language)}")
                if f.problem.startswith("corrupt"):
                    action += f"; moved to {quarantine_object(store, f.key)}"
                done[f.key] = (action, True)
        except WriterFencedError as e:
            done[f.key] = (f"not repaired: {e} (run it again)", False)


def _rebuild_rank(store: ObjectStore, language: str) -> str:
    """A rewound writer decides its articles again; rank's story aggregates are rebuilt from the
    logs by the next rank cycle, so they follow (issue 15)."""
    for _ in range(3):
        try:
            return "; rank's story aggregates rebuild next cycle" if request_rebuild(
                store, f"writer of {language} rewound") else ""
        except PreconditionFailedError:
            continue
    return "; run doctor again to have rank's story aggregates rebuilt"


def _put_rebuilt(store: ObjectStore, language: str, checkpoint: WriterCheckpoint) -> None:
    """Replace the damaged (or absent) checkpoint with ``checkpoint``, fenced."""
    key = layout.story_checkpoint_key(language)
    put_checkpoint(store, language, checkpoint, store.head(key))


class DoctorEntryJson(TypedDict):
    """A :class:`DoctorEntry` in the report."""

    key: str
    kind: str
    problem: str
    action: str
    repaired: bool


class DoctorReportJson(TypedDict):
    """What ``newsroom doctor`` reports: whether everything found was repaired, and each entry."""

    clean: bool
    entries: list[DoctorEntryJson]


def doctor_report(entries: list[DoctorEntry]) -> DoctorReportJson:
    """The report of ``entries`` (``clean`` when each was repaired, or there were none)."""
    return {"clean": all(e.repaired for e in entries),
            "entries": [cast("DoctorEntryJson", asdict(e)) for e in entries]}
