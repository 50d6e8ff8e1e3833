"""The fenced language writer: one set of decisions, crash recovery, repairs through the same fence."""

from __future__ import annotations

import gzip
import hashlib
import json
import multiprocessing
import threading
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from repair_corpus import PUBLISHERS, T0, changes_of, final_story, mannheim, two_event_stream, write_articles

from serving.app import create_app
from tasks.errors import WriterFencedError
from tasks.registry import import_publishers
from tasks.repair import repair_language
from tasks.writer.checkpoint import open_writer
from tasks.writer.kept import KeptStates, keep_states_in_memory
from tasks.writer.run import cluster_language
from tasks.writer.session import load_writer_state
from transforms.clustering import ClusterParams, LanguageClusterer
from transforms.features import features_from_text, features_to_row
from transforms.pages import build_story, resolve_aliases
from warehouse import layout
from warehouse.duck import connect, load_sql
from warehouse.schemas import ARTICLES_SCHEMA
from warehouse.snapshots import publish_stories
from warehouse.state_blobs import decode_state_object, encode_state
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


def _as_json_state(store: ObjectStore, gzipped: bool) -> str:
    """Replace the language's state with the JSON blob the writer stored before version 4 (the
    same state; Zstandard ``.json.zst``, or gzip ``.json.gz`` as before that), and point the
    checkpoint at it, as a store written by an older release holds it."""
    checkpoint_key = layout.story_checkpoint_key("en")
    checkpoint, _ = open_writer(store, "en")
    clusterer, seen = load_writer_state(store, "en", checkpoint)
    state = {"clusterer": clusterer.to_state(), "seen": list(seen.items()), "consumed": list(checkpoint.consumed),
             "updated_at": checkpoint.updated_at}
    key = layout.story_state_key("en", checkpoint.offset, "legacy")
    if gzipped:
        key = key.removesuffix(".json.zst") + ".json.gz"
        store.put(key, gzip.compress(json.dumps(state, sort_keys=True).encode(), mtime=0))
    else:
        store.put(key, encode_state(state))
    for old in store.list(layout.STORY_STATE_PREFIX):
        if old.endswith(".nrws"):
            store.delete(old)
    store.put(checkpoint_key, replace(checkpoint, state_key=key, deltas=()).to_json())
    return key


@pytest.mark.parametrize("gzipped", [False, True], ids=["zstd-json", "gzip-json"])
def test_json_states_written_before_still_load_roll_forward_and_migrate(tmp_path: Path, gzipped: bool) -> None:
    root, store, stream = _started_store(tmp_path)
    legacy = _as_json_state(store, gzipped)
    checkpoint_key = layout.story_checkpoint_key("en")
    # A run that loaded the JSON state dies after its state and changes: it wrote a base.
    write_articles(store, stream[5:])
    now = T0 + timedelta(minutes=30)
    _run_killed_mid_batch(root, now)
    assert json.loads(store.get(checkpoint_key).data)["state_key"] == legacy
    assert cluster_language(store, "en", now)["committed"] is False  # rolled forward to the base it wrote
    rolled = json.loads(store.get(checkpoint_key).data)
    assert "/base-" in rolled["state_key"] and rolled["deltas"] == []
    reference = LocalStore(tmp_path / "reference")
    write_articles(reference, stream)
    cluster_language(reference, "en", now)
    assert final_story(changes_of(store)) == final_story(changes_of(reference))
    # The next commit is a delta on that base, and decides as the reference does.
    late = [("late", mannheim(0) + " Police said more arrests may follow.", 40, "pub7")]
    for target in (store, reference):
        write_articles(target, late)
        assert cluster_language(target, "en", now + timedelta(minutes=20))["committed"] is True
    after = json.loads(store.get(checkpoint_key).data)
    assert after["state_key"] == rolled["state_key"] and len(after["deltas"]) == 1
    assert changes_of(store)[-1:] == changes_of(reference)[-1:]


def test_a_json_state_loads_and_the_first_commit_writes_a_base(tmp_path: Path) -> None:
    _, store, stream = _started_store(tmp_path)
    _as_json_state(store, gzipped=False)
    write_articles(store, stream[5:])
    summary = cluster_language(store, "en", T0 + timedelta(minutes=30))
    assert summary["committed"] is True and summary["state_kind"] == "base" and summary["chain"] == 1
    reference = LocalStore(tmp_path / "reference")
    write_articles(reference, stream)
    cluster_language(reference, "en", T0 + timedelta(minutes=30))
    assert final_story(changes_of(store)) == final_story(changes_of(reference))


class _CountingStore(LocalStore):
    """A LocalStore that counts loads of writer states."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.state_reads = 0

    def get(self, key: str):  # type: ignore[no-untyped-def]
        if "/state-" in key or "/base-" in key:  # one per load: a JSON blob, or the base of a chain
            self.state_reads += 1
        return super().get(key)


def _writer_sequence(store: ObjectStore, other: ObjectStore, kept: KeptStates | None = None) -> list[dict[str, Any]]:
    """Cluster runs, a run with nothing new, a repair, and a commit by another process's writer."""
    stream = two_event_stream()
    out = []
    write_articles(store, stream[:4])
    out.append(cluster_language(store, "en", T0 + timedelta(minutes=5), kept=kept))
    write_articles(store, stream[4:8])
    out.append(cluster_language(store, "en", T0 + timedelta(minutes=20), kept=kept))
    out.append(cluster_language(store, "en", T0 + timedelta(minutes=21), kept=kept))
    out.append(repair_language(store, "en", T0 + timedelta(minutes=30), kept=kept))
    write_articles(store, stream[8:10])
    out.append(cluster_language(other, "en", T0 + timedelta(minutes=40)))  # another writer commits
    write_articles(store, stream[10:])
    out.append(cluster_language(store, "en", T0 + timedelta(minutes=50), kept=kept))
    return out


def test_a_kept_state_is_reused_only_while_the_checkpoint_is_still_its_own(tmp_path: Path) -> None:
    store = _CountingStore(tmp_path / "kept")
    with keep_states_in_memory() as kept:
        summaries = _writer_sequence(store, LocalStore(tmp_path / "kept"), kept)
        # Runs 2, 3 and the repair reuse the state the previous run left; the last run finds the
        # checkpoint moved by the other writer and loads the state that writer stored.
        assert kept.hits == 3
        assert store.state_reads == 1
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
        cluster_language(store, "en", T0 + timedelta(minutes=5), kept=kept)
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
            cluster_language(store, "en", T0 + timedelta(minutes=20), kept=kept)
        except WriterFencedError:
            pass
        else:
            raise AssertionError("the second commit must be fenced")
        store.put = original_put  # type: ignore[method-assign]
        reads = store.state_reads
        assert cluster_language(store, "en", T0 + timedelta(minutes=21), kept=kept)["committed"] is False
        assert store.state_reads == reads + 1 and kept.hits == 1  # loaded again, not the fenced state
    assert sorted(final_story(changes_of(store))) == sorted(a for a, _, _, _ in stream)


def _other_language_then_more(store: ObjectStore, kept: KeptStates | None = None) -> list[dict[str, Any]]:
    """A run that consumes only another language's segment (a commit with no change), then more."""
    stream = two_event_stream()
    write_articles(store, stream[:6])
    out = [cluster_language(store, "en", T0 + timedelta(minutes=11), kept=kept)]
    write_articles(store, [("de0", "Der Streik der Lokführer ist beendet, die Züge fahren wieder.", 70, "pub1")],
                   language="de")
    out.append(cluster_language(store, "en", T0 + timedelta(minutes=75), kept=kept))
    write_articles(store, [(a, t, m + 70, p) for a, t, m, p in stream[6:]])
    out.append(cluster_language(store, "en", T0 + timedelta(minutes=90), kept=kept))
    return out


def test_a_commit_with_no_change_stores_what_its_expiry_changed_and_keeps_it(tmp_path: Path) -> None:
    # The no-change commit moves the checkpoint and stores a delta of what its expiry changed, so
    # the state in memory is the stored one and the next run reuses it.
    store = _CountingStore(tmp_path / "kept")
    with keep_states_in_memory() as kept:
        summaries = _other_language_then_more(store, kept)
        assert summaries[1]["committed"] is True and summaries[1]["articles"] == 0
        assert summaries[1]["state_kind"] == "delta"
        assert kept.hits == 2 and store.state_reads == 0
    reference = _CountingStore(tmp_path / "reference")
    assert _other_language_then_more(reference) == summaries
    assert reference.state_reads == 2  # the second and third runs load
    assert changes_of(store) == changes_of(reference)


def test_seen_articles_are_stored_oldest_first(tmp_path: Path) -> None:
    # Trimming keeps the newest; the stored order must be arrival order, not key order.
    store = LocalStore(tmp_path / "store")
    stream = two_event_stream()
    write_articles(store, list(reversed(stream)))  # ids arrive in minute order, not sorted order
    cluster_language(store, "en", T0 + timedelta(minutes=30))
    checkpoint = json.loads(store.get(layout.story_checkpoint_key("en")).data)
    table = decode_state_object(store.get(checkpoint["state_key"]).data).tables["seen"]
    seen = list(zip(table.column("article_id").to_pylist(), table.column("content_hash").to_pylist(), strict=True))
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
