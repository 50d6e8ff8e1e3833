"""The hourly writer session under Prefect: the same decisions as minute-by-minute runs, with
each language's state loaded once instead of every minute."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pipeline_harness import pipeline_env
from repair_corpus import T0, break_writer_state, changes_of, final_story, two_event_stream, write_articles

from flows.cluster import cluster_writer_session
from flows.errors import WriterRunsFailedError
from tasks.repair import repair_language
from tasks.writer.run import cluster_language
from transforms.clustering import ClusterParams
from warehouse.store import LocalStore, ObjectStore

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_session_decides_as_minute_runs_do_and_loads_its_state_once(
        prefect_harness: None, store_vars: dict[str, str], tmp_path: Path) -> None:
    stream = two_event_stream()  # 12 articles over 12 minutes
    with pipeline_env(store_vars) as store:
        write_articles(store, stream)
        result = cluster_writer_session(languages=["en"], minutes=16, every_seconds=120, start=T0.isoformat())
        assert result["ticks"] == 8
        # A writer run each tick, and the repair every 10 minutes (after the 5th run).
        assert [(r["tick"], r["kind"]) for r in result["runs"]] == (
            [(t, "cluster") for t in range(5)] + [(4, "repair")] + [(t, "cluster") for t in range(5, 8)])
        assert result["articles"] == len(stream)
        committed = [r for r in result["runs"] if r["committed"] and r["kind"] == "cluster"]
        assert len(committed) >= 6  # the articles arrive over 12 minutes, one run every 2
        # Every run after the first, the repair too, found the state its predecessor left in memory.
        assert result["states_reused"] == 8
        session_changes = changes_of(store)

    reference = LocalStore(tmp_path / "reference")
    write_articles(reference, stream)
    for tick in range(8):
        cluster_language(reference, "en", T0 + timedelta(seconds=120 * tick))
        if tick == 4:
            repair_language(reference, "en", T0 + timedelta(seconds=120 * tick))
    assert session_changes == changes_of(reference)
    assert sorted(final_story(session_changes)) == sorted(a for a, _, _, _ in stream)


def test_one_language_failing_does_not_stop_the_others(prefect_harness: None, store_vars: dict[str, str]) -> None:
    stream = two_event_stream()
    with pipeline_env(store_vars) as store:
        write_articles(store, stream)
        # German's writer state is unreadable: every German run fails.
        break_writer_state(store, "de")
        with pytest.raises(WriterRunsFailedError, match="2 of 4 writer runs failed: "
                                               "CorruptObjectError: unreadable writer state: StateBlobError"):
            cluster_writer_session(languages=["de", "en"], minutes=4, every_seconds=120, start=T0.isoformat())
        assigned = {c["article_id"] for c in changes_of(store)}
    assert assigned == {a for a, _, minute, _ in stream if minute <= 2}  # English went on, both ticks


def test_a_repair_in_the_session_commits_and_later_runs_reuse_the_repaired_state(
        prefect_harness: None, store_vars: dict[str, str], tmp_path: Path) -> None:
    stream = two_event_stream()
    mixing = ClusterParams(join_threshold=0.0, date_conflict_penalty=0.0, year_conflict_penalty=0.0)

    def first_runs(store: ObjectStore) -> None:  # a writer that mixed the two events into one story
        write_articles(store, stream)
        cluster_language(store, "en", T0 + timedelta(minutes=11), params=mixing)

    start = T0 + timedelta(minutes=12)
    with pipeline_env(store_vars) as store:
        first_runs(store)
        result = cluster_writer_session(languages=["en"], minutes=12, every_seconds=120, start=start.isoformat())
        repairs = [r for r in result["runs"] if r["kind"] == "repair"]
        assert len(repairs) == 1 and repairs[0]["committed"] and repairs[0]["split"] == 1
        assert result["states_reused"] == 6  # the session's first run loads; the rest reuse, the repaired one too
        session_changes = changes_of(store)
    after = final_story(session_changes)
    assert len({after[f"b{i}"] for i in range(6)}) == 1 and after["b0"] != after["m0"]

    reference = LocalStore(tmp_path / "reference")
    first_runs(reference)
    for tick in range(6):
        cluster_language(reference, "en", start + timedelta(seconds=120 * tick))
        if tick == 4:
            repair_language(reference, "en", start + timedelta(seconds=120 * tick))
    assert session_changes == changes_of(reference)
