"""The language writer after a crash: a leftover state blob never blocks the next run, a change
segment names the state its roll-forward loads, and the checkpoint still fences two writers."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from repair_corpus import T0, changes_of, final_story, mannheim, two_event_stream, write_articles

from tasks.errors import WriterFencedError
from tasks.writer.checkpoint import STATE_KEY_METADATA, open_writer
from tasks.writer.run import cluster_language, languages_in_log
from tasks.writer.session import commit, load
from tasks.writer.state import compact_writer_state, load_chain
from transforms.records import StoryChange
from warehouse import layout
from warehouse.maintenance import prune_writer_states
from warehouse.schemas import STORY_CHANGES_SCHEMA
from warehouse.state_blobs import encode_state
from warehouse.store import LocalStore, ObjectStore
from warehouse.tables import parquet_bytes_to_table, write_segment

UNRELATED_TEXT = ("The central bank raised interest rates by a quarter point on Wednesday, citing stubborn "
                  "inflation in housing and services, and signalled that further increases were possible.")


def _crash_at(root: str, now: datetime, point: str) -> None:
    os.environ["NEWSROOM_DEBUG_CRASH_POINT"] = point
    cluster_language(LocalStore(Path(root)), "en", now)


def _run_killed(root: Path, now: datetime, point: str) -> None:
    """A writer process that kills itself (SIGKILL) at crash point ``point``."""
    proc = multiprocessing.get_context("spawn").Process(target=_crash_at, args=(str(root), now, point))
    proc.start()
    proc.join(120)
    assert proc.exitcode == -9


def _states(store: ObjectStore) -> list[str]:
    """The language's state objects (bases and deltas) and JSON state blobs."""
    return [k for k in store.list(layout.STORY_STATE_PREFIX) if "/state-" in k or k.endswith(".nrws")]


def _checkpoint(store: ObjectStore) -> dict[str, object]:
    return json.loads(store.get(layout.story_checkpoint_key("en")).data)


def _reference(tmp_path: Path, articles: list[tuple[str, str, int, str]], now: datetime) -> dict[str, str]:
    reference = LocalStore(tmp_path / "reference")
    write_articles(reference, articles)
    cluster_language(reference, "en", now)
    return final_story(changes_of(reference))


def test_a_rerun_after_a_crash_between_state_and_changes_commits(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    articles = two_event_stream()[:4]
    write_articles(store, articles)
    now = T0 + timedelta(minutes=10)
    _run_killed(root, now, "cluster.after_state")
    leftover = _states(store)
    assert len(leftover) == 1 and not store.list(layout.STORY_CHANGES_PREFIX)

    # The same decisions a minute later: another state blob (the clock is in it), not fenced.
    summary = cluster_language(store, "en", now + timedelta(minutes=1))
    assert summary["committed"] is True
    assert _checkpoint(store)["state_key"] not in leftover
    assert sorted(c["article_id"] for c in changes_of(store)) == sorted(a for a, *_ in articles)
    assert final_story(changes_of(store)) == _reference(tmp_path, articles, now)


def test_a_rerun_at_the_same_clock_reuses_the_identical_blob(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    write_articles(store, two_event_stream()[:4])
    now = T0 + timedelta(minutes=10)
    _run_killed(root, now, "cluster.after_state")
    leftover = _states(store)
    assert cluster_language(store, "en", now)["committed"] is True
    assert _states(store) == leftover == [_checkpoint(store)["state_key"]]  # named by its bytes


def _stream_in_store(tmp_path: Path) -> tuple[Path, LocalStore, list[tuple[str, str, int, str]], datetime]:
    """A store holding the two-event stream's articles, and a clock after all of them."""
    root = tmp_path / "store"
    store = LocalStore(root)
    articles = two_event_stream()
    write_articles(store, articles)
    return root, store, articles, T0 + timedelta(minutes=30)


def test_the_roll_forward_loads_the_state_its_change_segment_names(tmp_path: Path) -> None:
    root, store, articles, now = _stream_in_store(tmp_path)
    _run_killed(root, now - timedelta(minutes=1), "cluster.after_state")  # a blob of the same offset
    _run_killed(root, now, "cluster.after_changes")
    changes = store.get(layout.story_changes_key("en", 0)).data
    named = parquet_bytes_to_table(changes).schema.metadata[STATE_KEY_METADATA].decode()
    assert len(_states(store)) == 2 and named in _states(store)

    assert cluster_language(store, "en", now)["committed"] is False  # rolled forward, nothing left to do
    assert _checkpoint(store)["state_key"] == named
    assert final_story(changes_of(store)) == _reference(tmp_path, articles, now)


def test_a_change_segment_written_before_segments_named_their_state_still_rolls_forward(tmp_path: Path) -> None:
    root, store, articles, now = _stream_in_store(tmp_path)
    _run_killed(root, now, "cluster.after_changes")
    # As the writer left it before: the segment names nothing, the state sits at its offset's one key.
    key = layout.story_changes_key("en", 0)
    table = parquet_bytes_to_table(store.get(key).data)
    store.delete(key)
    write_segment(store, key, table.replace_schema_metadata(None), STORY_CHANGES_SCHEMA)
    (base,) = _states(store)  # the base the run wrote, rewritten as the JSON blob the writer wrote before
    clusterer, seen, header = load_chain(store, [base])
    store.put(layout.story_state_key("en", len(articles)), encode_state(
        {"clusterer": clusterer.to_state(), "seen": list(seen.items()), "consumed": header["consumed"],
         "updated_at": header["updated_at"]}))
    store.delete(base)

    checkpoint, _ = open_writer(store, "en")
    assert checkpoint.state_key == layout.story_state_key("en", len(articles))
    assert checkpoint.offset == len(articles)
    assert final_story(changes_of(store)) == _reference(tmp_path, articles, now)


def test_a_writer_that_loses_the_change_segment_to_other_decisions_is_fenced(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    write_articles(store, two_event_stream()[:2])
    now = T0 + timedelta(minutes=5)
    session = load(store, "en")

    def decisions(story_id: str) -> list[StoryChange]:
        return [StoryChange.at("en", 0, "new_story", story_id, article_id="m0", score=1.0, changed_at=T0)]

    commit(session, decisions("s-first"), now)
    with pytest.raises(WriterFencedError, match="changes of en at 0"):
        commit(session, decisions("s-other"), now + timedelta(minutes=1))
    # The same decisions from the same checkpoint lose only the checkpoint's If-Match.
    with pytest.raises(WriterFencedError, match="checkpoint of en moved"):
        commit(session, decisions("s-first"), now + timedelta(minutes=1))
    assert [c["story_id"] for c in changes_of(store)] == ["s-first"]
    assert _checkpoint(store)["offset"] == 1


def test_two_writers_after_a_crash_make_one_set_of_decisions(tmp_path: Path) -> None:
    root, store, articles, now = _stream_in_store(tmp_path)
    _run_killed(root, now - timedelta(minutes=1), "cluster.after_state")
    barrier = threading.Barrier(2)
    results: list[object] = []

    def run(at: datetime) -> None:
        barrier.wait()
        try:
            results.append(cluster_language(LocalStore(root), "en", at))
        except WriterFencedError as e:
            results.append(e)

    # Two clocks: the two runs store different blobs for the same decisions.
    threads = [threading.Thread(target=run, args=(now + timedelta(seconds=s),)) for s in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(isinstance(r, dict) and r["committed"] for r in results) >= 1
    assert all(isinstance(r, (dict, WriterFencedError)) for r in results)
    changes = changes_of(store)
    assert sorted(c["article_id"] for c in changes) == sorted(a for a, *_ in articles)
    assert final_story(changes) == _reference(tmp_path, articles, now)
    assert cluster_language(store, "en", now + timedelta(minutes=1))["committed"] is False


def test_pruning_keeps_the_named_state_and_the_writer_still_loads(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    stream = two_event_stream()
    for i, article in enumerate(stream):
        write_articles(store, [article])
        cluster_language(store, "en", T0 + timedelta(minutes=article[2], seconds=30 * i))
    write_articles(store, [("late", mannheim(0) + " Police said more arrests may follow.", 40, "pub7")])
    _run_killed(root, T0 + timedelta(minutes=41), "cluster.after_state")  # a leftover blob
    assert len(_states(store)) == len(stream) + 1
    # The chain the checkpoint names (a base and a delta per later run) and the crashed run's delta,
    # past the checkpoint's offset, stay; nothing else was written.
    checkpoint = _checkpoint(store)
    chain = [checkpoint["state_key"], *checkpoint["deltas"]]
    assert len(chain) == len(stream) and set(chain) < set(_states(store))
    assert prune_writer_states(store).pruned_writer_states == 0
    compact_writer_state(store, "en")  # a new base folds the chain; the next commit adopts it
    write_articles(store, [("later", UNRELATED_TEXT, 41, "pub8")])
    assert cluster_language(store, "en", T0 + timedelta(minutes=41, seconds=30))["committed"] is True
    checkpoint = _checkpoint(store)
    assert checkpoint["state_key"] not in chain and len(checkpoint["deltas"]) == 1
    report = prune_writer_states(store)
    assert report.pruned_writer_states == len(stream) + 1  # the old chain and the crashed run's delta
    assert set(_states(store)) == {checkpoint["state_key"], *checkpoint["deltas"]}
    write_articles(store, [("last", UNRELATED_TEXT + " Markets fell.", 42, "pub9")])
    assert cluster_language(store, "en", T0 + timedelta(minutes=42))["committed"] is True  # it still loads
    assert sorted(final_story(changes_of(store))) == sorted([a for a, *_ in stream] + ["late", "later", "last"])


def test_a_log_language_that_cannot_name_a_writer_is_reported_and_the_others_go_on(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    write_articles(store, [("m0", mannheim(0), 0, "pub0")], language="en us")  # as ingested before
    write_articles(store, [("z0", UNRELATED_TEXT, 1, "pub1")], language="zh")
    assert languages_in_log(store) == ["en us", "zh"]
    summaries = [cluster_language(store, language, T0 + timedelta(minutes=5)) for language in languages_in_log(store)]
    assert summaries[0]["committed"] is False and "unsafe language" in summaries[0]["error"]
    assert summaries[1]["committed"] is True
    assert [c["article_id"] for c in changes_of(store)] == ["z0"]

