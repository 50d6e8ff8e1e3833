"""The fenced language writer: one set of decisions, crash recovery, repairs through the same fence."""

from __future__ import annotations

import gzip
import hashlib
import json
import multiprocessing
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from repair_corpus import PUBLISHERS, T0, changes_of, final_story, mannheim, two_event_stream, write_articles

from serving.app import create_app
from tasks.cluster import (
    KEPT_STATES,
    WriterFencedError,
    cluster_language,
    keep_states_in_memory,
    load_writer_state,
    open_writer,
)
from tasks.registry import import_publishers
from tasks.repair import repair_language
from transforms.clustering import ClusterParams, LanguageClusterer
from transforms.features import features_from_text, features_to_row
from transforms.pages import build_story, resolve_aliases
from warehouse import layout
from warehouse.duck import connect, load_sql
from warehouse.schemas import ARTICLES_SCHEMA
from warehouse.snapshots import publish_stories
from warehouse.state_blobs import decode_state
from warehouse.store import LocalStore, ObjectStore
from warehouse.tables import rows_to_table, write_segment


def _register(store: ObjectStore, tmp_path: Path) -> None:
    csv = tmp_path / "publishers.csv"
    csv.write_text("publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section\n"
                   + "".join(f"{p},{p.upper()},{p}.test,US,en,1,{0.9 - 0.1 * i:.1f},false,false,"
                             f"http://{p}.test/feed,sport\n" for i, p in enumerate(PUBLISHERS)), encoding="utf-8")
    import_publishers(store, csv)


def _story_snapshot(store: ObjectStore, now: datetime, aliases: dict[str, str]) -> dict[str, Any]:
    """The story snapshot as the rank flow builds it: members from story_members.sql, one
    Full Coverage object per story, aliases of merged stories."""
    con = connect(store)
    try:
        rows = con.sql(load_sql("story_members"), params={"now": now}).to_arrow_table().to_pylist()
    finally:
        con.close()
    by_story: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_story.setdefault(row["story_id"], []).append(row)
    stories = {sid: {**build_story(sid, members, full=True), "editions": ["en-US"]}
               for sid, members in sorted(by_story.items())}
    return {"schema": "newsroom.stories/1", "as_of": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "stories": stories,
            "aliases": resolve_aliases(aliases, stories)}


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
    write_articles(store, two_event_stream())
    now = T0 + timedelta(minutes=30)
    results = _race(store, now)
    committed = [r for r in results if isinstance(r, dict) and r["committed"]]
    fenced = [r for r in results if isinstance(r, WriterFencedError)]
    # Both may compute the same decisions from the same checkpoint; exactly one moves the checkpoint.
    assert len(committed) + len(fenced) == 2 and len(committed) >= 1
    changes = changes_of(store)
    assert sorted(c["article_id"] for c in changes) == sorted(a for a, _, _, _ in two_event_stream())
    reference = LocalStore(tmp_path / "reference")
    write_articles(reference, two_event_stream())
    cluster_language(reference, "en", now)
    assert final_story(changes) == final_story(changes_of(reference))
    assert cluster_language(store, "en", now)["committed"] is False  # nothing left to do


def test_repair_and_cluster_never_both_commit(store: ObjectStore) -> None:
    write_articles(store, two_event_stream()[:4])
    cluster_language(store, "en", T0 + timedelta(minutes=5))
    write_articles(store, two_event_stream()[4:])
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
    offsets = sorted(c["offset"] for c in changes_of(store))
    assert offsets == list(range(len(offsets)))  # one log, no gap, no offset written twice
    if len(committed) == 2:  # the second ran after the first had committed
        assert any(isinstance(r, dict) for r in results)


def _killed_writer(root: str, now: datetime) -> None:
    cluster_language(LocalStore(Path(root)), "en", now, kill_before_checkpoint=True)


def _started_store(tmp_path: Path) -> tuple[Path, LocalStore, list[tuple[str, str, int, str]]]:
    """A store whose writer has committed the first five articles of the stream, and has the rest to do."""
    root = tmp_path / "store"
    store = LocalStore(root)
    stream = two_event_stream()
    write_articles(store, stream[:5])
    cluster_language(store, "en", T0 + timedelta(minutes=5))
    return root, store, stream


def _run_killed_mid_batch(root: Path, now: datetime) -> None:
    """A writer process that dies (SIGKILL) after its change segment, before its checkpoint."""
    proc = multiprocessing.get_context("spawn").Process(target=_killed_writer, args=(str(root), now))
    proc.start()
    proc.join(120)
    assert proc.exitcode == -9


def test_kill_9_mid_batch_loses_nothing_and_assigns_nothing_twice(tmp_path: Path) -> None:
    root, store, stream = _started_store(tmp_path)
    write_articles(store, stream[5:])
    now = T0 + timedelta(minutes=30)
    _run_killed_mid_batch(root, now)
    # The killed run's change segment is there, its checkpoint never moved; a restart rolls it forward.
    summary = cluster_language(store, "en", now)
    assert summary["committed"] is False
    changes = changes_of(store)
    assert sorted(c["article_id"] for c in changes) == sorted(a for a, _, _, _ in stream)
    reference = LocalStore(tmp_path / "reference")
    write_articles(reference, stream[:5])
    cluster_language(reference, "en", T0 + timedelta(minutes=5))
    write_articles(reference, stream[5:])
    cluster_language(reference, "en", now)
    assert final_story(changes) == final_story(changes_of(reference))


def test_repair_merges_and_splits_through_the_writer_and_serving_redirects(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    _register(store, tmp_path)
    # Two stories born a minute apart about one event, kept apart by a strict online pass.
    write_articles(store, [("m0", mannheim(0), 0, "pub0")])
    cluster_language(store, "en", T0 + timedelta(seconds=30), params=ClusterParams(join_threshold=0.95))
    write_articles(store, [("m1", mannheim(1), 1, "pub1")])
    cluster_language(store, "en", T0 + timedelta(minutes=1, seconds=30))
    first = final_story(changes_of(store))
    assert first["m0"] != first["m1"]
    summary = repair_language(store, "en", T0 + timedelta(minutes=10))
    assert summary["merge"] == 1
    changes = changes_of(store)
    merge = [c for c in changes if c["kind"] == "merge"]
    assert [(c["story_id"], c["other_story_id"]) for c in merge] == [(first["m0"], first["m1"])]
    assert merge[0]["change_id"] == f"en:{merge[0]['offset']}"
    stories = _story_snapshot(store, T0 + timedelta(minutes=11), {c["other_story_id"]: c["story_id"] for c in merge})
    live = stories["stories"]
    assert first["m0"] in live and first["m1"] not in live
    assert live[first["m0"]]["article_count"] == 2
    assert stories["aliases"] == {first["m1"]: first["m0"]}
    publish_stories(store, stories, now=T0 + timedelta(minutes=11), validate=lambda new, prev: None)
    with TestClient(create_app(store)) as client:
        response = client.get(f"/v1/stories/{first['m1']}", follow_redirects=False)
        assert response.status_code == 301
        assert response.headers["location"] == f"/v1/stories/{first['m0']}"
        assert client.get(f"/v1/stories/{first['m0']}").status_code == 200


def test_repair_splits_a_story_fed_two_events_through_the_writer(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    _register(store, tmp_path)
    write_articles(store, two_event_stream())
    mixing = ClusterParams(join_threshold=0.0, date_conflict_penalty=0.0, year_conflict_penalty=0.0)
    cluster_language(store, "en", T0 + timedelta(minutes=15), params=mixing)
    before = final_story(changes_of(store))
    assert len(set(before.values())) == 1
    summary = repair_language(store, "en", T0 + timedelta(minutes=20))
    assert summary["split"] == 1
    after = final_story(changes_of(store))
    assert {after[f"m{i}"] for i in range(6)} == {before["m0"]}  # the representative's half keeps the id
    assert len({after[f"b{i}"] for i in range(6)}) == 1 and after["b0"] != before["m0"]
    splits = [c for c in changes_of(store) if c["kind"] == "split"]
    assert {c["other_story_id"] for c in splits} == {before["m0"]}
    # A second repair within 30 minutes changes nothing; the counters come from the member rows.
    assert repair_language(store, "en", T0 + timedelta(minutes=25))["committed"] is False
    stories = _story_snapshot(store, T0 + timedelta(minutes=21), {})
    counts = sorted(s["article_count"] for s in stories["stories"].values())
    assert counts == [6, 6]


def _to_legacy_gzip(store: ObjectStore, key: str) -> str:
    """Rewrite a state blob as the writer wrote it before Zstandard (gzip JSON, ``.json.gz``)."""
    legacy_key = key.removesuffix(".json.zst") + ".json.gz"
    state = decode_state(store.get(key).data)
    store.put(legacy_key, gzip.compress(json.dumps(state, sort_keys=True).encode(), mtime=0))
    store.delete(key)
    return legacy_key


def test_states_written_as_gzip_before_still_load_and_roll_forward(tmp_path: Path) -> None:
    root, store, stream = _started_store(tmp_path)
    checkpoint_key = layout.story_checkpoint_key("en")
    checkpoint = json.loads(store.get(checkpoint_key).data)
    assert checkpoint["state_key"].endswith(".json.zst")
    checkpoint["state_key"] = _to_legacy_gzip(store, checkpoint["state_key"])
    store.put(checkpoint_key, json.dumps(checkpoint).encode())
    # A run that dies after writing its state and changes, whose state is then found as gzip.
    write_articles(store, stream[5:])
    now = T0 + timedelta(minutes=30)
    _run_killed_mid_batch(root, now)
    orphan = [k for k in store.list(layout.STORY_STATE_PREFIX) if k.endswith(".json.zst")]
    assert len(orphan) == 1
    _to_legacy_gzip(store, orphan[0])

    assert cluster_language(store, "en", now)["committed"] is False  # rolled forward from the gzip state
    assert json.loads(store.get(checkpoint_key).data)["state_key"].endswith(".json.gz")
    reference = LocalStore(tmp_path / "reference")
    write_articles(reference, stream)
    cluster_language(reference, "en", now)
    assert final_story(changes_of(store)) == final_story(changes_of(reference))
    # The next commit writes Zstandard again, from the state the gzip blob held.
    write_articles(store, [("late", mannheim(0) + " Police said more arrests may follow.", 40, "pub7")])
    assert cluster_language(store, "en", now + timedelta(minutes=20))["committed"] is True
    assert json.loads(store.get(checkpoint_key).data)["state_key"].endswith(".json.zst")


class _CountingStore(LocalStore):
    """A LocalStore that counts reads of writer state blobs."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.state_reads = 0

    def get(self, key: str):  # type: ignore[no-untyped-def]
        if "/state-" in key:
            self.state_reads += 1
        return super().get(key)


def _writer_sequence(store: ObjectStore, other: ObjectStore) -> list[dict[str, Any]]:
    """Cluster runs, a run with nothing new, a repair, and a commit by another process's writer."""
    stream = two_event_stream()
    out = []
    write_articles(store, stream[:4])
    out.append(cluster_language(store, "en", T0 + timedelta(minutes=5)))
    write_articles(store, stream[4:8])
    out.append(cluster_language(store, "en", T0 + timedelta(minutes=20)))
    out.append(cluster_language(store, "en", T0 + timedelta(minutes=21)))
    out.append(repair_language(store, "en", T0 + timedelta(minutes=30)))
    write_articles(store, stream[8:10])
    out.append(cluster_language(other, "en", T0 + timedelta(minutes=40)))  # another writer commits
    write_articles(store, stream[10:])
    out.append(cluster_language(store, "en", T0 + timedelta(minutes=50)))
    return out


def test_a_kept_state_is_reused_only_while_the_checkpoint_is_still_its_own(tmp_path: Path) -> None:
    store = _CountingStore(tmp_path / "kept")
    with keep_states_in_memory() as kept:
        summaries = _writer_sequence(store, LocalStore(tmp_path / "kept"))
        # Runs 2, 3 and the repair reuse the state the previous run left; the last run finds the
        # checkpoint moved by the other writer and loads the state that writer stored.
        assert kept.hits == 3
        assert store.state_reads == 1
    assert KEPT_STATES.hits == 3 and not KEPT_STATES.enabled
    reference = _CountingStore(tmp_path / "reference")
    assert _writer_sequence(reference, LocalStore(tmp_path / "reference")) == summaries
    assert reference.state_reads == 4  # without keeping: every run after the first loads
    assert changes_of(store) == changes_of(reference)
    assert final_story(changes_of(store)) == final_story(changes_of(reference))
    assert sorted(final_story(changes_of(store))) == sorted(a for a, _, _, _ in two_event_stream())


def test_a_fenced_run_does_not_keep_its_state(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store, other = _CountingStore(root), LocalStore(root)
    stream = two_event_stream()
    with keep_states_in_memory() as kept:
        write_articles(store, stream[:4])
        cluster_language(store, "en", T0 + timedelta(minutes=5))
        write_articles(store, stream[4:])
        checkpoint = store.get(layout.story_checkpoint_key("en"))
        # Another writer commits between this writer's read of the checkpoint and its commit.
        original_put = store.put

        def racing_put(key: str, data: bytes, **kwargs: Any) -> str:
            if key == layout.story_checkpoint_key("en") and kwargs.get("if_match") == checkpoint.etag:
                cluster_language(other, "en", T0 + timedelta(minutes=20))
            return original_put(key, data, **kwargs)

        store.put = racing_put  # type: ignore[method-assign]
        try:
            cluster_language(store, "en", T0 + timedelta(minutes=20))
        except WriterFencedError:
            pass
        else:
            raise AssertionError("the second commit must be fenced")
        store.put = original_put  # type: ignore[method-assign]
        reads = store.state_reads
        assert cluster_language(store, "en", T0 + timedelta(minutes=21))["committed"] is False
        assert store.state_reads == reads + 1 and kept.hits == 1  # loaded again, not the fenced state
    assert sorted(final_story(changes_of(store))) == sorted(a for a, _, _, _ in stream)


def _other_language_then_more(store: ObjectStore) -> list[dict[str, Any]]:
    """A run that consumes only another language's segment (a commit with no change), then more."""
    stream = two_event_stream()
    write_articles(store, stream[:6])
    out = [cluster_language(store, "en", T0 + timedelta(minutes=11))]
    write_articles(store, [("de0", "Der Streik der Lokführer ist beendet, die Züge fahren wieder.", 70, "pub1")],
                   language="de")
    out.append(cluster_language(store, "en", T0 + timedelta(minutes=75)))
    write_articles(store, [(a, t, m + 70, p) for a, t, m, p in stream[6:]])
    out.append(cluster_language(store, "en", T0 + timedelta(minutes=90)))
    return out


def test_a_commit_that_did_not_store_its_state_does_not_keep_it(tmp_path: Path) -> None:
    # The no-change commit moves the checkpoint but keeps the stored state at its offset (written
    # before this run expired old stories); the state in memory, expired, must not be reused.
    store = _CountingStore(tmp_path / "kept")
    with keep_states_in_memory() as kept:
        summaries = _other_language_then_more(store)
        assert summaries[1]["committed"] is True and summaries[1]["articles"] == 0
        assert kept.hits == 1 and store.state_reads == 1  # the third run loads the stored state
    reference = LocalStore(tmp_path / "reference")
    assert _other_language_then_more(reference) == summaries
    assert changes_of(store) == changes_of(reference)


def test_seen_articles_are_stored_oldest_first(tmp_path: Path) -> None:
    # Trimming keeps the newest; the stored order must be arrival order, not key order.
    store = LocalStore(tmp_path / "store")
    stream = two_event_stream()
    write_articles(store, list(reversed(stream)))  # ids arrive in minute order, not sorted order
    cluster_language(store, "en", T0 + timedelta(minutes=30))
    checkpoint = json.loads(store.get(layout.story_checkpoint_key("en")).data)
    seen = decode_state(store.get(checkpoint["state_key"]).data)["seen"]
    assert [aid for aid, _ in seen] == [a for a, _, _, _ in sorted(stream, key=lambda x: x[2])]
    assert [aid for aid, _ in seen] != sorted(aid for aid, _ in seen)


# --------------------------------------------------------------------------------------------------
# New versions of an article (same id, new content hash) through the cluster writer: the article
# stays the same member of its story, is never a copy of itself and leaves no ghost member.
# --------------------------------------------------------------------------------------------------

UNRELATED = ("The central bank raised interest rates by a quarter point on Wednesday, citing stubborn "
             "inflation in housing and services, and signalled that further increases were possible.")


def _write_version(store: ObjectStore, article_id: str, text: str, minute: float, publisher: str, version: int) -> None:
    """An article row as the ingest writes a version of an article (same id, its own content hash)."""
    seen = T0 + timedelta(minutes=minute)
    features = features_from_text(article_id, text.split(". ")[0][:80], text, "en", seen, publisher)
    row = {**features_to_row(features), "version": version,
           "content_hash": hashlib.sha1(text.encode()).hexdigest(), "url": f"http://{publisher}.test/{article_id}",
           "canonical_url": f"http://{publisher}.test/{article_id}", "feed_id": f"feed-{publisher}",
           "region": "US", "snippet": text[:120], "image_url": None, "author": None, "section": "sport",
           "categories": [], "is_opinion": False, "published_at": seen}
    write_segment(store, layout.article_segment_key(seen, f"{article_id}-v{version}"),
                  rows_to_table([row], ARTICLES_SCHEMA), ARTICLES_SCHEMA)


def _writer(store: ObjectStore) -> LanguageClusterer:
    checkpoint, _ = open_writer(store, "en")
    return load_writer_state(store, "en", checkpoint)[0]


def _stories_holding(clusterer: LanguageClusterer, article_id: str) -> list[str]:
    return [sid for sid in clusterer.story_ids() for m in clusterer.story_members(sid) if m.article_id == article_id]


def _assignments(store: ObjectStore) -> list[dict[str, Any]]:
    con = connect(store)
    try:
        query = 'select article_id, story_id, copy_of, "offset" from story_assignments order by article_id'
        return con.sql(query).to_arrow_table().to_pylist()
    finally:
        con.close()


def test_a_corrected_version_is_the_same_member_and_no_copy_of_itself(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    _write_version(store, "a", mannheim(0), 0, "pub0", 1)
    cluster_language(store, "en", T0 + timedelta(minutes=1))
    _write_version(store, "a", mannheim(0).replace("seventh round", "7th round"), 5, "pub0", 2)
    summary = cluster_language(store, "en", T0 + timedelta(minutes=6))
    assert summary["version"] == 1
    first, second = changes_of(store)
    assert (first["kind"], second["kind"]) == ("new_story", "version")
    assert second["story_id"] == first["story_id"] and second["copy_of"] is None
    assert _stories_holding(_writer(store), "a") == [first["story_id"]]
    # A version row is no assignment: the article's one assignment still names its story.
    assert _assignments(store) == [{"article_id": "a", "story_id": first["story_id"], "copy_of": None,
                                    "offset": first["offset"]}]


def test_a_rewritten_version_leaves_no_ghost_member_for_a_repair_to_move(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    _write_version(store, "m1", mannheim(1), 0, "pub1", 1)
    _write_version(store, "a", mannheim(0), 1, "pub0", 1)
    cluster_language(store, "en", T0 + timedelta(minutes=2), params=ClusterParams(join_threshold=0.95))
    _write_version(store, "a", UNRELATED, 3, "pub0", 2)  # the same article, rewritten
    cluster_language(store, "en", T0 + timedelta(minutes=4))
    story = final_story(changes_of(store))["a"]
    assert _stories_holding(_writer(store), "a") == [story]
    repair_language(store, "en", T0 + timedelta(minutes=10))
    assert final_story(changes_of(store))["a"] == story
    assert _stories_holding(_writer(store), "a") == [story]
