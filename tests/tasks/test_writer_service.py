"""The long-running writer (tasks/writer/service.py, issue 15): segments consumed as they land,
the same decisions as per-minute runs, the state kept between batches, compaction adopted, and a
second writer fenced."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from repair_corpus import T0, changes_of, final_story, two_event_stream, write_articles

from tasks.writer.run import cluster_language
from tasks.writer.service import serve_language_writers
from warehouse import layout
from warehouse.store import LocalStore


def _serve(store: LocalStore, chunks: list[list[tuple[str, str, int, str]]], compact_every: int,
           other: LocalStore | None = None) -> dict[str, object]:
    """Serve while the chunks land one per poll; ``other`` commits between two batches."""
    landing = iter(enumerate(chunks))
    clock = {"now": T0}
    done = {"flag": False}

    def land(_: float) -> None:
        step = next(landing, None)
        if step is None:
            done["flag"] = True
            return
        i, chunk = step
        write_articles(store, chunk)
        clock["now"] = T0 + timedelta(minutes=max(m for _, _, m, _ in chunk) + 1)
        if other is not None and i == 2:
            cluster_language(other, "en", clock["now"])  # another writer commits: this one must reload

    report = serve_language_writers(store, ["en"], clock=lambda: clock["now"], until=lambda: done["flag"],
                                    poll_seconds=0.0, compact_every=compact_every, repair_every_minutes=None,
                                    sleep=land)
    return report.totals()


def test_a_long_running_writer_decides_as_per_minute_runs_and_keeps_its_state(tmp_path: Path) -> None:
    stream = two_event_stream()
    chunks = [stream[i:i + 2] for i in range(0, len(stream), 2)]
    store = LocalStore(tmp_path / "service")
    totals = _serve(store, chunks, compact_every=2)
    assert totals["articles"] == len(stream) and totals["segments"] == len(stream)  # a segment per article
    assert totals["batches"] == len(chunks) and totals["failed"] == 0
    assert totals["states_reused"] == len(chunks) - 1  # only the first batch loads
    assert totals["compactions"] >= 1
    checkpoint = store.get(layout.story_checkpoint_key("en")).data
    assert b"deltas" in checkpoint
    reference = LocalStore(tmp_path / "reference")
    for chunk in chunks:
        write_articles(reference, chunk)
        cluster_language(reference, "en", T0 + timedelta(minutes=max(m for _, _, m, _ in chunk) + 1))
    assert [(c["article_id"], c["story_id"], c["kind"]) for c in changes_of(store)] == [
        (c["article_id"], c["story_id"], c["kind"]) for c in changes_of(reference)]
    assert sorted(final_story(changes_of(store))) == sorted(a for a, _, _, _ in stream)


def test_a_long_running_writer_reloads_after_another_writer_commits(tmp_path: Path) -> None:
    stream = two_event_stream()
    chunks = [stream[i:i + 2] for i in range(0, len(stream), 2)]
    root = tmp_path / "store"
    store = LocalStore(root)
    totals = _serve(store, chunks, compact_every=100, other=LocalStore(root))
    # The other writer took one batch; this one's batch after it found the checkpoint moved and loaded.
    assert totals["states_reused"] < len(chunks) - 1 and totals["failed"] == 0
    ids = [c["article_id"] for c in changes_of(store) if c["kind"] in ("assign", "new_story", "copy")]
    assert sorted(ids) == sorted(a for a, _, _, _ in stream) and len(ids) == len(set(ids))


def test_maintenance_folds_a_chain_and_the_next_commit_adopts_it(tmp_path: Path) -> None:
    import json

    from tasks.maintenance import run_maintenance

    stream = two_event_stream()
    store = LocalStore(tmp_path / "store")
    for i in range(0, 8, 2):
        write_articles(store, stream[i:i + 2])
        cluster_language(store, "en", T0 + timedelta(minutes=stream[i + 1][2] + 1), compact_every=100)
    before = json.loads(store.get(layout.story_checkpoint_key("en")).data)
    assert len(before["deltas"]) == 3
    report = run_maintenance(store, T0 + timedelta(hours=1))
    assert any("folded" in note for note in report["notes"])
    assert report["pruned_writer_states"] == 0  # the chain is still the checkpoint's
    write_articles(store, stream[8:])
    cluster_language(store, "en", T0 + timedelta(minutes=30), compact_every=100)
    after = json.loads(store.get(layout.story_checkpoint_key("en")).data)
    assert after["state_key"] not in [before["state_key"], *before["deltas"]] and len(after["deltas"]) == 1
    assert run_maintenance(store, T0 + timedelta(hours=2))["pruned_writer_states"] == 4  # the old chain
    reference = LocalStore(tmp_path / "reference")
    write_articles(reference, stream)
    cluster_language(reference, "en", T0 + timedelta(minutes=30))
    assert final_story(changes_of(store)) == final_story(changes_of(reference))


def test_a_repair_commits_a_delta_on_the_writer_chain(tmp_path: Path) -> None:
    import json

    from tasks.repair import repair_language
    from transforms.clustering import ClusterParams

    store = LocalStore(tmp_path / "store")
    stream = two_event_stream()
    mixing = ClusterParams(join_threshold=0.0, date_conflict_penalty=0.0, year_conflict_penalty=0.0)
    write_articles(store, stream[:6])
    cluster_language(store, "en", T0 + timedelta(minutes=6), params=mixing)  # a writer that mixes events
    write_articles(store, stream[6:])
    cluster_language(store, "en", T0 + timedelta(minutes=15))
    before = json.loads(store.get(layout.story_checkpoint_key("en")).data)
    summary = repair_language(store, "en", T0 + timedelta(minutes=20))
    after = json.loads(store.get(layout.story_checkpoint_key("en")).data)
    assert summary["committed"] is True
    assert after["state_key"] == before["state_key"] and after["deltas"][:-1] == before["deltas"]
    assert "/delta-" in after["deltas"][-1]


def test_a_long_running_writer_for_every_language_finds_a_new_one_as_it_lands(tmp_path: Path) -> None:
    from tasks.writer.service import serve_language_writers

    store = LocalStore(tmp_path / "store")
    stream = two_event_stream()
    landing = iter([lambda: write_articles(store, stream[:2]),
                    lambda: write_articles(store, [("de0", "Der Streik der Lokführer ist beendet.", 3, "pub1")],
                                           language="de")])
    done = {"flag": False}

    def land(_: float) -> None:
        step = next(landing, None)
        if step is None:
            done["flag"] = True
        else:
            step()

    report = serve_language_writers(store, None, clock=lambda: T0 + timedelta(minutes=10), until=lambda: done["flag"],
                                    poll_seconds=0.0, repair_every_minutes=None, sleep=land)
    assert {b["language"] for b in report.batches} == {"de", "en"}  # English marks the German segment read too
    assert {c["article_id"] for c in changes_of(store)} == {"m0", "b0", "de0"}
