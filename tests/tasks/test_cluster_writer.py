"""The fenced language writer: one set of decisions, crash recovery, repairs through the same fence."""

from __future__ import annotations

import hashlib
import multiprocessing
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from repair_corpus import bern, mannheim

from serving.app import create_app
from tasks.cluster import WriterFencedError, cluster_language
from tasks.rank import compute_pages
from tasks.registry import import_publishers
from tasks.repair import repair_language
from tasks.settings import RankSettings
from transforms.clustering import ClusterParams
from transforms.features import features_from_text, features_to_row
from transforms.pages import resolve_aliases
from warehouse import layout
from warehouse.schemas import ARTICLES_SCHEMA, STORY_CHANGES_SCHEMA
from warehouse.snapshots import publish_stories
from warehouse.store import LocalStore, ObjectStore
from warehouse.tables import list_segments, read_segments, rows_to_table, write_segment

T0 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
PUBLISHERS = [f"pub{i}" for i in range(8)]


def _write_articles(store: ObjectStore, articles: list[tuple[str, str, int, str]]) -> None:
    """One article segment per (article_id, text, minute, publisher), as the ingest writes them."""
    for article_id, text, minute, publisher in articles:
        seen = T0 + timedelta(minutes=minute)
        features = features_from_text(article_id, text.split(". ")[0][:80], text, "en", seen, publisher)
        row = {**features_to_row(features), "version": 1,
               "content_hash": hashlib.sha1(text.encode()).hexdigest(), "url": f"http://{publisher}.test/{article_id}",
               "canonical_url": f"http://{publisher}.test/{article_id}", "feed_id": f"feed-{publisher}",
               "region": "US", "snippet": text[:120], "image_url": None, "author": None, "section": "sport",
               "categories": [], "is_opinion": False, "published_at": seen}
        write_segment(store, layout.article_segment_key(seen, article_id), rows_to_table([row], ARTICLES_SCHEMA),
                      ARTICLES_SCHEMA)


def _stream() -> list[tuple[str, str, int, str]]:
    out = []
    for i in range(6):
        out.append((f"m{i}", mannheim(i), 2 * i, PUBLISHERS[i]))
        out.append((f"b{i}", bern(i), 2 * i + 1, PUBLISHERS[(i + 3) % 8]))
    return out


def _changes(store: ObjectStore) -> list[dict[str, Any]]:
    keys = list_segments(store, layout.STORY_CHANGES_PREFIX)
    return read_segments(store, keys, STORY_CHANGES_SCHEMA).to_pylist() if keys else []


def _final_story(changes: list[dict[str, Any]]) -> dict[str, str]:
    latest: dict[str, dict[str, Any]] = {}
    for c in sorted(changes, key=lambda c: c["offset"]):
        if c["article_id"]:
            latest[c["article_id"]] = c
    return {a: c["story_id"] for a, c in latest.items()}


def _race(store: ObjectStore, now: datetime, n: int = 2) -> list[object]:
    barrier = threading.Barrier(n)
    results: list[object] = []

    def run() -> None:
        barrier.wait()
        try:
            results.append(cluster_language(store, "en", now))
        except WriterFencedError as e:
            results.append(e)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_two_writers_started_together_make_one_set_of_decisions(store: ObjectStore, tmp_path: Path) -> None:
    _write_articles(store, _stream())
    now = T0 + timedelta(minutes=30)
    results = _race(store, now)
    committed = [r for r in results if isinstance(r, dict) and r["committed"]]
    fenced = [r for r in results if isinstance(r, WriterFencedError)]
    # Both may compute the same decisions from the same checkpoint; exactly one moves the checkpoint.
    assert len(committed) + len(fenced) == 2 and len(committed) >= 1
    changes = _changes(store)
    assert sorted(c["article_id"] for c in changes) == sorted(a for a, _, _, _ in _stream())
    reference = LocalStore(tmp_path / "reference")
    _write_articles(reference, _stream())
    cluster_language(reference, "en", now)
    assert _final_story(changes) == _final_story(_changes(reference))
    assert cluster_language(store, "en", now)["committed"] is False  # nothing left to do


def test_repair_and_cluster_never_both_commit(store: ObjectStore) -> None:
    _write_articles(store, _stream()[:4])
    cluster_language(store, "en", T0 + timedelta(minutes=5))
    _write_articles(store, _stream()[4:])
    barrier = threading.Barrier(2)
    results: list[object] = []

    def run(fn: Any) -> None:
        barrier.wait()
        try:
            results.append(fn(store, "en", T0 + timedelta(minutes=30)))
        except WriterFencedError as e:
            results.append(e)

    threads = [threading.Thread(target=run, args=(f,)) for f in (cluster_language, repair_language)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    committed = [r for r in results if isinstance(r, dict) and r["committed"]]
    assert len(committed) <= 2
    offsets = sorted(c["offset"] for c in _changes(store))
    assert offsets == list(range(len(offsets)))  # one log, no gap, no offset written twice
    if len(committed) == 2:  # the second ran after the first had committed
        assert any(isinstance(r, dict) for r in results)


def _killed_writer(root: str, now: datetime) -> None:
    cluster_language(LocalStore(Path(root)), "en", now, kill_before_checkpoint=True)


def test_kill_9_mid_batch_loses_nothing_and_assigns_nothing_twice(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    stream = _stream()
    _write_articles(store, stream[:5])
    cluster_language(store, "en", T0 + timedelta(minutes=5))
    _write_articles(store, stream[5:])
    now = T0 + timedelta(minutes=30)
    proc = multiprocessing.get_context("spawn").Process(target=_killed_writer, args=(str(root), now))
    proc.start()
    proc.join(120)
    assert proc.exitcode == -9
    # The killed run's change segment is there, its checkpoint never moved; a restart rolls it forward.
    summary = cluster_language(store, "en", now)
    assert summary["committed"] is False
    changes = _changes(store)
    assert sorted(c["article_id"] for c in changes) == sorted(a for a, _, _, _ in stream)
    reference = LocalStore(tmp_path / "reference")
    _write_articles(reference, stream[:5])
    cluster_language(reference, "en", T0 + timedelta(minutes=5))
    _write_articles(reference, stream[5:])
    cluster_language(reference, "en", now)
    assert _final_story(changes) == _final_story(_changes(reference))


def test_repair_merges_and_splits_through_the_writer_and_serving_redirects(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    csv = tmp_path / "publishers.csv"
    csv.write_text("publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section\n"
                   + "".join(f"{p},{p.upper()},{p}.test,US,en,1,{0.9 - 0.1 * i:.1f},false,false,"
                             f"http://{p}.test/feed,sport\n" for i, p in enumerate(PUBLISHERS)), encoding="utf-8")
    import_publishers(store, csv)
    # Two stories born a minute apart about one event, kept apart by a strict online pass.
    _write_articles(store, [("m0", mannheim(0), 0, "pub0")])
    cluster_language(store, "en", T0 + timedelta(seconds=30), params=ClusterParams(join_threshold=0.95))
    _write_articles(store, [("m1", mannheim(1), 1, "pub1")])
    cluster_language(store, "en", T0 + timedelta(minutes=1, seconds=30))
    first = _final_story(_changes(store))
    assert first["m0"] != first["m1"]
    summary = repair_language(store, "en", T0 + timedelta(minutes=10))
    assert summary["merge"] == 1
    changes = _changes(store)
    merge = [c for c in changes if c["kind"] == "merge"]
    assert [(c["story_id"], c["other_story_id"]) for c in merge] == [(first["m0"], first["m1"])]
    assert merge[0]["change_id"] == f"en:{merge[0]['offset']}"
    pages, stories = compute_pages(store, T0 + timedelta(minutes=11), RankSettings())
    live = stories["stories"]
    assert first["m0"] in live and first["m1"] not in live
    assert live[first["m0"]]["article_count"] == 2
    stories["aliases"] = resolve_aliases({c["other_story_id"]: c["story_id"] for c in merge}, live)
    publish_stories(store, stories, now=T0 + timedelta(minutes=11), validate=lambda new, prev: None)
    with TestClient(create_app(store)) as client:
        response = client.get(f"/v1/stories/{first['m1']}", follow_redirects=False)
        assert response.status_code == 301
        assert response.headers["location"] == f"/v1/stories/{first['m0']}"
        assert client.get(f"/v1/stories/{first['m0']}").status_code == 200


def test_repair_splits_a_story_fed_two_events_through_the_writer(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    _write_articles(store, _stream())
    mixing = ClusterParams(join_threshold=0.0, date_conflict_penalty=0.0, year_conflict_penalty=0.0)
    cluster_language(store, "en", T0 + timedelta(minutes=15), params=mixing)
    before = _final_story(_changes(store))
    assert len(set(before.values())) == 1
    summary = repair_language(store, "en", T0 + timedelta(minutes=20))
    assert summary["split"] == 1
    after = _final_story(_changes(store))
    assert {after[f"m{i}"] for i in range(6)} == {before["m0"]}  # the representative's half keeps the id
    assert len({after[f"b{i}"] for i in range(6)}) == 1 and after["b0"] != before["m0"]
    splits = [c for c in _changes(store) if c["kind"] == "split"]
    assert {c["other_story_id"] for c in splits} == {before["m0"]}
    # A second repair within 30 minutes changes nothing; the counters come from the member rows.
    assert repair_language(store, "en", T0 + timedelta(minutes=25))["committed"] is False
    pages, stories = compute_pages(store, T0 + timedelta(minutes=21), RankSettings())
    counts = sorted(s["article_count"] for s in stories["stories"].values())
    assert counts == [6, 6]
