"""Checks of stored objects by kind, for ``newsroom health`` and ``newsroom doctor`` (issue 16).

Each kind of object is decoded the way its readers decode it; a problem is reported as a
:class:`Finding` naming the key (``corrupt: ...`` or ``missing: ...``). ``newsroom health`` checks
what the site and the writers need now (every pointer and the version it names, every checkpoint
and the state it names, the story-change log's offsets), ``newsroom doctor`` every object.
What each reader does about a damaged object, and what the doctor repairs: docs/store-faults.md.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse import layout
from warehouse.catalog import TablePlan, filesystem_of
from warehouse.checkpoints import WriterCheckpoint
from warehouse.damage import describe_error, kind_of_key
from warehouse.errors import CorruptObjectError, ObjectNotFoundError, SnapshotNotFoundError
from warehouse.pointers import PagePointer, pointer_from_bytes
from warehouse.snapshots import version_problem
from warehouse.state_blobs import StateBlobError, verify_state
from warehouse.store import ObjectStore
from warehouse.tables import parquet_bytes_to_table

log = logging.getLogger(__name__)

PARQUET_KINDS = frozenset({"article_segment", "change_segment", "click_segment", "link_segment", "feed_state",
                           "registry", "identity_shard"})
POINTER_KINDS = frozenset({"page_pointer", "pool_pointer", "story_pointer"})
VERSION_KINDS = frozenset({"page_version", "pool_version", "story_snapshot"})
JSON_KINDS = frozenset({"event", "feed_boosts", "subscription", "push_marker"})


@dataclass(frozen=True, slots=True)
class Finding:
    """A corrupt or missing object: its key, kind, what is wrong (``corrupt: ...``/``missing: ...``),
    and the pointer or checkpoint that names it as live, if one does."""

    key: str
    kind: str
    problem: str
    named_by: str | None = None


def finding(key: str, problem: str, named_by: str | None = None) -> Finding:
    return Finding(key, kind_of_key(key), problem, named_by)


def parse_checkpoint(data: bytes) -> WriterCheckpoint | None:
    """A language writer's checkpoint, or None when the bytes are not one (garbage, truncated, wrong fields)."""
    return WriterCheckpoint.parse(data)


def _version_problem(data: bytes, key: str) -> str | None:
    problem = version_problem(key, data)  # the check every reader makes, a replica's included
    return f"corrupt: {problem}" if problem else None


def _robots_problem(data: bytes) -> str | None:
    try:
        doc = json.loads(gzip.decompress(data))
    except (OSError, EOFError, ValueError, RecursionError, zlib.error) as e:
        return f"corrupt: {describe_error(e)}"
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("entries"), dict):
        return "corrupt: not a robots.txt cache"
    return None


def object_problem(key: str, data: bytes) -> str | None:
    """What is wrong with these bytes as the object ``key`` holds (None: nothing, or a kind not checked).

    A pointer is checked as a pointer only; :func:`check_pointer` also checks the version it names.
    """
    kind = kind_of_key(key)
    if kind in PARQUET_KINDS:
        try:
            parquet_bytes_to_table(data, key)
        except CorruptObjectError as e:
            return f"corrupt: {e.reason}"
        return None
    if kind in POINTER_KINDS:
        try:
            pointer_from_bytes(data, key)
        except SnapshotNotFoundError as e:
            return f"corrupt: {e.reason}"
        return None
    if kind in VERSION_KINDS:
        return _version_problem(data, key)
    if kind == "checkpoint":
        return None if parse_checkpoint(data) is not None else "corrupt: not a checkpoint"
    if kind == "state_blob":
        try:
            verify_state(data)
        except StateBlobError as e:
            return f"corrupt: {e}"
        return None
    if kind == "robots_cache":
        return _robots_problem(data)
    if kind == "rank_aggregates":  # issue 15: a table, a manifest or the pointer of rank's aggregates
        if key.endswith(".parquet"):
            try:
                parquet_bytes_to_table(data, key)
            except CorruptObjectError as e:
                return f"corrupt: {e.reason}"
            return None
        try:
            value = json.loads(data)
        except (ValueError, RecursionError) as e:
            return f"corrupt: {describe_error(e)}"
        return None if isinstance(value, dict) else "corrupt: not a JSON object"
    if kind in JSON_KINDS:
        try:
            value = json.loads(data)
        except (ValueError, RecursionError) as e:
            return f"corrupt: {describe_error(e)}"
        return None if isinstance(value, dict) else "corrupt: not a JSON object"
    return None


def check_object(store: ObjectStore, key: str) -> Finding | None:
    """Read one object and check it as its kind (:func:`object_problem`); gone since listed is fine."""
    try:
        data = store.get(key).data
    except ObjectNotFoundError:
        return None
    problem = object_problem(key, data)
    return finding(key, problem) if problem else None


def check_pointer(store: ObjectStore, key: str) -> tuple[PagePointer | None, list[Finding]]:
    """A pointer, and what is wrong with it or with the version it names (missing, other bytes)."""
    try:
        data = store.get(key).data
    except ObjectNotFoundError:
        return None, []
    try:
        pointer = pointer_from_bytes(data, key)
    except SnapshotNotFoundError as e:
        return None, [finding(key, f"corrupt: {e.reason}")]
    try:
        version = store.get(pointer.key).data
    except ObjectNotFoundError:
        return pointer, [finding(pointer.key, f"missing: the live version {key} names", key)]
    if hashlib.sha256(version).hexdigest() != pointer.sha256:
        return pointer, [finding(pointer.key, f"corrupt: does not match the sha256 {key} holds", key)]
    problem = _version_problem(version, pointer.key)
    return pointer, [finding(pointer.key, problem, key)] if problem else []


def _folders(keys: Iterable[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        found[key.rsplit("/", 1)[0]].append(key.rsplit("/", 1)[1])
    return found


def check_pages(store: ObjectStore) -> list[Finding]:
    """Every pointer (pages, pools, the story snapshot) and the version it names, and every page
    folder whose versions no pointer names."""
    findings: list[Finding] = []
    for folder, names in sorted(_folders(store.list(layout.PAGES_PREFIX)).items()):
        pointer_key = f"{folder}/latest.json"
        if "latest.json" in names:
            findings.extend(check_pointer(store, pointer_key)[1])
        elif any(kind_of_key(f"{folder}/{n}") in VERSION_KINDS for n in names):
            findings.append(finding(pointer_key, "missing: versions are stored but no pointer names one"))
    return findings


def check_writers(store: ObjectStore, *, verify_states: bool = True) -> tuple[dict[str, int], list[Finding]]:
    """Each language writer's checkpoint and the state blob it names (decompressed when
    ``verify_states``); a language with state blobs and no checkpoint. Returns the readable
    checkpoints' offsets by language, and the findings."""
    offsets: dict[str, int] = {}
    findings: list[Finding] = []
    for folder, names in sorted(_folders(store.list(layout.STORY_STATE_PREFIX)).items()):
        language = folder[len(layout.STORY_STATE_PREFIX):]
        key = f"{folder}/checkpoint.json"
        if "checkpoint.json" not in names:
            if any(n.startswith(("state-", "base-", "delta-")) for n in names):
                findings.append(finding(key, "missing: the language has state blobs"))
            continue
        try:
            checkpoint = parse_checkpoint(store.get(key).data)
        except ObjectNotFoundError:
            continue
        if checkpoint is None:
            findings.append(finding(key, "corrupt: not a checkpoint"))
            continue
        offsets[language] = checkpoint.offset
        state_key = checkpoint.state_key
        if state_key is None:
            continue
        # A version 4 state is a base and its deltas (issue 15): every one of them must read.
        for link in checkpoint.chain:
            try:
                data = store.get(link).data
            except ObjectNotFoundError:
                findings.append(finding(link, f"missing: the state blob {key} names", key))
                continue
            if verify_states:
                problem = object_problem(link, data)
                if problem:
                    findings.append(finding(link, problem, key))
    return offsets, findings


def change_log_gaps(store: ObjectStore, plan: TablePlan, checkpoint_offsets: Mapping[str, int]) -> list[Finding]:
    """Runs of offsets missing from a language's story-change log (a deleted change segment), up to
    its writer's checkpoint, each named by the key its segment would have (segments are keyed by
    their first offset).

    Read from the segments' footers (their offsets' range and row count, ``plan``), not their rows:
    a segment whose offsets are not one unbroken run has its offset column read. Retention deletes
    the oldest changes first, so offsets before the lowest stored one are not reported.
    """
    runs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    fs, base = filesystem_of(store)
    for f in plan.files:
        language = f.folder.rsplit("language=", 1)[-1]
        if f.rows == 0:
            continue
        if f.offsets is not None and f.offsets[1] - f.offsets[0] + 1 == f.rows:
            runs[language].append(f.offsets)
            continue
        try:
            with fs.open_input_file(f"{base}/{f.key}") as handle:  # on this thread (warehouse.tables)
                offsets = pq.ParquetFile(handle, pre_buffer=False).read(columns=["offset"], use_threads=False).column("offset")
        except (pa.ArrowException, OSError) as e:
            log.warning("change_offsets_unreadable key=%s error=%s", f.key, describe_error(e))
            continue
        runs[language].extend(_runs(sorted(set(offsets.to_pylist()))))
    findings = []
    for language in sorted(runs):
        merged: list[tuple[int, int]] = []
        for low, high in sorted(runs[language]):
            if merged and low <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], high))
            else:
                merged.append((low, high))
        holes = [(a[1] + 1, b[0] - 1) for a, b in zip(merged, merged[1:], strict=False)]
        committed = checkpoint_offsets.get(language)
        if committed is not None and committed > merged[-1][1] + 1:
            holes.append((merged[-1][1] + 1, committed - 1))
        for first, last in holes:
            try:
                key = layout.story_changes_key(language, first)
            except ValueError:
                continue
            findings.append(finding(key, f"missing: story-change offsets {first}-{last} of {language}"))
    return findings


def _runs(values: list[int]) -> list[tuple[int, int]]:
    """Sorted distinct integers as unbroken runs.

    >>> _runs([1, 2, 3, 7, 9, 10])
    [(1, 3), (7, 7), (9, 10)]
    """
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def scan_objects(store: ObjectStore, prefixes: Iterable[str]) -> list[Finding]:
    """Read and check every object under ``prefixes`` (not quarantined ones)."""
    findings = []
    for prefix in prefixes:
        for key in store.list(prefix):
            found = check_object(store, key)
            if found is not None:
                findings.append(found)
    return findings


def unique(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per key (the first, or the first saying what names it live), in key order."""
    by_key: dict[str, Finding] = {}
    for f in findings:
        if f.key not in by_key or (f.named_by and not by_key[f.key].named_by):
            by_key[f.key] = f
    return [by_key[k] for k in sorted(by_key)]
