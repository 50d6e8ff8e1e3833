"""One bad object never stops the site (issue 16): each kind of object the pipeline writes, torn
(its first half) or deleted, on the local store and on S3 (SeaweedFS), and what the writers, rank,
ingest, ``health`` and a freshly started server then do. The rule per kind is docs/store-faults.md.

The store is built once per backend by the real pipeline code (``tests/store_faults.py``: two
cycles, then two article segments no writer has read yet); each test damages a copy of it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from store_faults import (
    AFTER,
    FAULTS,
    KINDS,
    LANGUAGE,
    PENDING,
    Built,
    Fault,
    World,
    cluster,
    ingest,
    rank,
)
from store_faults import damage as inject

from serving.app import create_app
from serving.settings import ServingSettings
from tasks.doctor import run_doctor
from tasks.health import check_health
from warehouse import layout
from warehouse.checkpoints import WriterCheckpoint
from warehouse.schemas import ARTICLES_SCHEMA, STORY_CHANGES_SCHEMA
from warehouse.snapshots import list_live_pages, read_live_page, read_live_stories, read_pointer
from warehouse.store import ObjectStore
from warehouse.tables import read_segment, read_segments

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVING = ServingSettings(refresh_seconds=3600, profiles_path=":memory:", hmac_key="k" * 32)  # type: ignore[call-arg]
PAGE_KINDS = {"pointer", "page_version"}
HEALED_BY_THE_PIPELINE = {"pointer", "page_version", "story_snapshot", "checkpoint", "feed_state", "robots_cache"}
"""Kinds the next run of the pipeline repairs by itself (a new version and pointer, a rebuilt
checkpoint, a replaced state table); the rest stay named until ``newsroom doctor --repair``."""
NOT_SEEN_BY_HEALTH = {("article_segment", "deleted"), ("feed_state", "deleted"), ("robots_cache", "deleted")}
"""A deleted article segment is indistinguishable from one compaction or retention removed, and a
missing feed state or robots.txt cache from a store that has none yet: nothing names them."""


def _flags(store: ObjectStore) -> dict[str, tuple[str, str]]:
    return {f.subject: (f.check, f.detail) for f in check_health(store, AFTER)
            if f.check in ("corrupt_object", "missing_object")}


def _checkpoint(store: ObjectStore) -> WriterCheckpoint:
    checkpoint = WriterCheckpoint.parse(store.get(layout.story_checkpoint_key(LANGUAGE)).data)
    assert checkpoint is not None
    return checkpoint


def _named(damaged: list[dict[str, Any]] | None, key: str) -> bool:
    return any(d["key"] == key for d in damaged or [])


def _serve(store: ObjectStore, built: Built) -> dict[str, Any]:
    with TestClient(create_app(store, SERVING)) as client:
        health = client.get("/healthz")
        return {"health_status": health.status_code, "health": health.json(),
                "page": client.get(f"/v1/editions/{built.edition}/top"),
                "story": client.get(f"/v1/stories/{built.story_id}")}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("kind", KINDS)
def test_one_damaged_object(pipeline_world: World, kind: str, fault: Fault) -> None:
    store, built = pipeline_world.copy(), pipeline_world.built
    key = built.keys[kind]
    live_version = read_live_page(store, built.edition, "top").pointer.version
    live_stories = read_live_stories(store).pointer.version
    offset = _checkpoint(store).offset
    inject(store, key, fault)

    # health names the object (or, for the few kinds it cannot tell from normal, says nothing of it)
    flags = _flags(store)
    if (kind, fault) in NOT_SEEN_BY_HEALTH:
        assert key not in flags, flags
    else:
        assert key in flags, flags
        assert flags[key][0] == ("missing_object" if fault == "deleted" else "corrupt_object"), flags[key]

    # the doctor lists it too, changing nothing (its repairs on S3: the test after this one)
    local = pipeline_world.backend == "local"
    if local:
        before = {k: store.head(k) for k in store.list("")}
        listed = {e.key: e for e in run_doctor(store, AFTER)}
        assert {k: store.head(k) for k in store.list("")} == before
        assert (key in listed) == ((kind, fault) not in NOT_SEEN_BY_HEALTH), listed
        assert all(not e.repaired for e in listed.values())

    # a freshly started server serves the newest valid version and says what is degraded
    served = _serve(store, built)
    assert served["health_status"] == 200, served["health"]
    assert served["page"].status_code == 200
    assert served["story"].status_code == 200
    degraded = {d["what"]: d for d in served["health"]["degraded"]}
    if kind in PAGE_KINDS:
        expected = live_version if kind == "pointer" else live_version - 1
        assert served["page"].json()["version"] == expected
        assert degraded[f"{built.edition}/top"]["serving_version"] == expected
        assert served["health"]["status"] == "degraded"
    elif kind == "story_snapshot":
        assert degraded["stories"]["serving_version"] == live_stories - 1
        assert served["health"]["stories_version"] == live_stories - 1
    else:
        assert served["health"]["status"] == "ok" and not degraded, served["health"]
        assert served["page"].json()["version"] == live_version

    # the pipeline goes on: ingest (state tables), every writer, rank
    if kind in ("feed_state", "robots_cache"):
        summary = ingest(store, pipeline_world.site, AFTER)
        assert summary["feeds_polled"] > 0
        assert _named(summary.get("damaged"), key) == (fault == "corrupt"), summary.get("damaged")
        assert store.head(key) is not None  # replaced (corrupt) or written anew (deleted)
    writers = cluster(store, AFTER)
    for language, summary in writers.items():
        if language != LANGUAGE or kind != "state_blob":
            assert "error" not in summary, summary
    if kind == "state_blob":
        assert key in writers[LANGUAGE]["error"]  # this language stops, named; the others went on
    else:
        checkpoint = _checkpoint(store)
        assert built.pending[1] in checkpoint.consumed
        assert checkpoint.offset >= offset  # never started over (story ids, change offsets kept)
        if kind == "article_segment" and fault == "corrupt":
            assert built.pending[0] not in checkpoint.consumed  # read again once repaired
            assert _named(writers[LANGUAGE].get("damaged"), key)
        if kind == "checkpoint":
            assert _named(writers[LANGUAGE].get("damaged"), key)  # rebuilt, and said so
    published = rank(store, AFTER)
    assert published["pages"] > 0
    if kind in PAGE_KINDS | {"story_snapshot"} or (kind in ("article_segment", "change_segment")
                                                    and fault == "corrupt"):
        assert _named(published["damaged"], key), published["damaged"]
    live = read_live_page(store, built.edition, "top")  # readable again, whatever was damaged
    assert live.pointer.version > live_version or kind not in PAGE_KINDS
    assert read_live_stories(store).pointer.version >= live_stories

    # what the pipeline repaired is no longer flagged; what it cannot repair still is
    after = _flags(store)
    if kind in HEALED_BY_THE_PIPELINE:
        assert key not in after, after
    elif (kind, fault) not in NOT_SEEN_BY_HEALTH:
        assert key in after, after

    # the doctor repairs the rest, except story changes that are gone (quarantined, or deleted)
    if not local:
        return
    repaired = run_doctor(store, AFTER, repair=True)
    assert all(e.repaired for e in repaired if e.kind != "change_segment"), repaired
    left = run_doctor(store, AFTER)
    if kind == "change_segment":
        assert [(e.kind, e.problem.split(":")[0]) for e in left] == [("change_segment", "missing")], left
    else:
        assert left == [], left
        assert not _flags(store)
    if kind == "state_blob":  # rewound to its newest readable state: the writer runs again
        assert "error" not in cluster(store, AFTER)[LANGUAGE]


def test_the_doctor_repairs_several_objects_at_once(pipeline_world: World) -> None:
    """On either backend: a torn pointer, page version, article segment and writer state, a lost
    checkpoint, all listed, then repaired; the writers, rank and a fresh server are whole again."""
    store, built = pipeline_world.copy(), pipeline_world.built
    torn = [built.keys[k] for k in ("pointer", "article_segment", "state_blob")]
    for key in torn:
        inject(store, key, "corrupt")
    inject(store, built.keys["checkpoint"], "deleted")
    listed = {e.key: e for e in run_doctor(store, AFTER)}
    assert set(torn) | {built.keys["checkpoint"]} <= set(listed), listed
    repaired = run_doctor(store, AFTER, repair=True)
    assert repaired and all(e.repaired for e in repaired), repaired
    assert run_doctor(store, AFTER) == []
    assert not _flags(store)
    for key in (built.keys["article_segment"], built.keys["state_blob"]):
        assert store.head(key) is None and store.head(f"quarantine/{key}") is not None
    writers = cluster(store, AFTER)
    assert not any("error" in s for s in writers.values()), writers
    assert rank(store, AFTER)["pages"] > 0
    served = _serve(store, built)
    assert served["health_status"] == 200 and served["health"]["status"] == "ok", served["health"]


def test_every_kind_of_object_is_covered(pipeline_world: World) -> None:
    """The matrix covers every kind the brief names, with a real object of each in the store."""
    assert set(pipeline_world.built.keys) == set(KINDS)
    assert pipeline_world.built.keys["article_segment"] == pipeline_world.built.pending[0] and len(PENDING) == 2
    assert all(pipeline_world.source.head(k) is not None for k in pipeline_world.built.keys.values())


def test_a_skipped_article_segment_is_clustered_once_repaired(pipeline_world: World) -> None:
    """Never marked consumed, a corrupt segment is read again by every writer run and clustered once
    it is restored (from a backup, or rewritten by a rerun of its ingest)."""
    store, built = pipeline_world.copy(), pipeline_world.built
    key = built.pending[0]
    whole = store.get(key).data
    inject(store, key, "corrupt")
    cluster(store, AFTER)
    assert key not in _checkpoint(store).consumed
    store.put(key, whole)
    writers = cluster(store, AFTER)
    assert not any("damaged" in s or "error" in s for s in writers.values()), writers
    assert key in _checkpoint(store).consumed
    articles = set(read_segment(store, key, ARTICLES_SCHEMA).column("article_id").to_pylist())
    changed = set(read_segments(store, store.list(layout.STORY_CHANGES_PREFIX), STORY_CHANGES_SCHEMA)
                  .column("article_id").to_pylist())
    assert articles and articles <= changed


# -- what a replica serves (issue 32) ---------------------------------------------------------------

REPLICA_FAULTS = ("page_bytes_edited", "live_page_deleted", "pointer_garbled", "story_snapshot_deleted")
MISSING = "pointer names a missing version"
SHA = "version bytes do not match the pointer's sha256"


def _damage_for_a_replica(store: ObjectStore, built: Built, fault: str) -> None:
    if fault == "page_bytes_edited":  # still a valid page of the right edition: only the sha256 tells
        page = json.loads(store.get(built.keys["page_version"]).data)
        page["stories"] = page["stories"][1:]
        store.put(built.keys["page_version"], json.dumps(page).encode())
    elif fault == "live_page_deleted":
        store.delete(built.keys["page_version"])
    elif fault == "pointer_garbled":
        store.put(built.keys["pointer"], b"\x00\x01 not a pointer")
    else:
        store.delete(built.keys["story_snapshot"])


def _live_versions(store: ObjectStore) -> dict[str, int]:
    """Per page, the version its pointer names."""
    return {f"{e}/{s}": pointer.version for e, s in list_live_pages(store)
            if (pointer := read_pointer(store, e, s)) is not None}


def _stories_held(store: ObjectStore) -> set[str]:
    """Every story id (or merged id) a readable story snapshot holds."""
    held: set[str] = set()
    for key in store.list(f"{layout.PAGES_PREFIX}{layout.STORIES_PAGE}/"):
        try:
            payload = json.loads(store.get(key).data)
        except ValueError:
            continue
        if not key.endswith("latest.json") and isinstance(payload.get("stories"), dict):
            held |= set(payload["stories"]) | set(payload.get("aliases") or {})
    return held


def _replica_answers(store: ObjectStore) -> tuple[dict[str, Any], dict[str, int], dict[str, bool]]:
    """A fresh replica's ``/healthz``, the version it serves of each page, and, for every story a
    served page lists, whether it is answered partially (from the cards); each must open (200, or
    301 to its survivor)."""
    with TestClient(create_app(store, SERVING)) as client:
        served, partial = {}, {}
        for entry in client.get("/v1/editions").json():
            for section in entry["sections"]:
                page = client.get(f"/v1/editions/{entry['edition']}/{section}")
                assert page.status_code == 200
                served[f"{entry['edition']}/{section}"] = page.json()["version"]
                for story in page.json()["stories"]:
                    answer = client.get(f"/v1/stories/{story['story_id']}", follow_redirects=False)
                    assert answer.status_code in (200, 301), (entry["edition"], section, story["story_id"])
                    partial[story["story_id"]] = answer.status_code == 200 and answer.json().get("is_partial", False)
        health = client.get("/healthz")
        assert health.status_code == 200
        return health.json(), served, partial


@pytest.mark.parametrize("fault", REPLICA_FAULTS)
def test_a_replica_serves_the_newest_valid_version_of_every_page_and_story(pipeline_world: World, fault: str) -> None:
    store, built = pipeline_world.copy(), pipeline_world.built
    page = f"{built.edition}/top"
    live = _live_versions(store)
    live_page = live[page]
    live_stories = read_live_stories(store).pointer.version
    _damage_for_a_replica(store, built, fault)

    health, served, partial = _replica_answers(store)
    newest_valid = dict(live, **{page: live_page - 1}) if fault in ("page_bytes_edited", "live_page_deleted") else live
    assert served == newest_valid
    assert health["status"] == "degraded"
    named = {d["what"]: d for d in health["degraded"]}
    if fault == "page_bytes_edited":
        assert served[page] == live_page - 1
        assert named[page]["skipped"] == [{"version": live_page, "problem": SHA}]
    elif fault == "live_page_deleted":
        assert served[page] == live_page - 1
        assert named[page]["skipped"] == [{"version": live_page, "problem": MISSING}]
    elif fault == "pointer_garbled":
        assert served[page] == live_page and named[page]["problem"] == "unreadable pointer"
    else:
        assert health["stories_version"] == live_stories - 1
        assert named["stories"]["skipped"] == [{"version": live_stories, "problem": MISSING}]
        lost = set(partial) - _stories_held(store)  # listed stories only the deleted snapshot held
        assert lost and {sid for sid, is_partial in partial.items() if is_partial} == lost
        assert {w.removeprefix("stories/") for w in named if w.startswith("stories/")} == lost
    if fault != "story_snapshot_deleted":
        assert not any(partial.values())


def test_after_the_doctor_rolls_back_the_story_snapshot_every_listed_story_opens(pipeline_world: World) -> None:
    """A torn live story snapshot, repaired by ``newsroom doctor --repair`` (the pointer goes back one
    version): a fresh replica serves the live pages, every story they list opens, and ``/healthz``
    names each one the rolled-back snapshot lacks."""
    store, built = pipeline_world.copy(), pipeline_world.built
    live_stories = read_live_stories(store).pointer.version
    inject(store, built.keys["story_snapshot"], "corrupt")
    assert all(e.repaired for e in run_doctor(store, AFTER, repair=True))
    assert read_live_stories(store).pointer.version == live_stories - 1

    health, served, partial = _replica_answers(store)
    assert served == _live_versions(store)
    lacking = {sid for sid in partial if sid not in json.loads(read_live_stories(store).data)["stories"]}
    assert lacking, "the rolled-back snapshot holds every live story: the case tests nothing"
    assert health["status"] == "degraded"
    assert {d["what"] for d in health["degraded"]} == {f"stories/{sid}" for sid in lacking}
