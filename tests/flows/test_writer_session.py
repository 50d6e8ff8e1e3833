"""The hourly writer session under Prefect: the same decisions as minute-by-minute runs, with
each language's state loaded once instead of every minute."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from pipeline_harness import pipeline_env
from repair_corpus import T0, changes_of, final_story, two_event_stream, write_articles

from flows.cluster import cluster_writer_session
from tasks.cluster import cluster_language
from warehouse import layout
from warehouse.store import LocalStore

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_session_decides_as_minute_runs_do_and_loads_its_state_once(
        prefect_harness: None, store_vars: dict[str, str], tmp_path: Path) -> None:
    stream = two_event_stream()  # 12 articles over 12 minutes
    with pipeline_env(store_vars) as store:
        write_articles(store, stream)
        result = cluster_writer_session(languages=["en"], minutes=16, every_seconds=120, start=T0.isoformat())
        assert result["ticks"] == 8 and len(result["runs"]) == 8
        assert result["articles"] == len(stream)
        committed = [r for r in result["runs"] if r["committed"]]
        assert len(committed) >= 6  # the articles arrive over 12 minutes, one run every 2
        # Every run after the first found the state its predecessor left in memory.
        assert result["states_reused"] == 7
        session_changes = changes_of(store)

    reference = LocalStore(tmp_path / "reference")
    write_articles(reference, stream)
    for tick in range(8):
        cluster_language(reference, "en", T0 + timedelta(seconds=120 * tick))
    assert session_changes == changes_of(reference)
    assert sorted(final_story(session_changes)) == sorted(a for a, _, _, _ in stream)


def test_one_language_failing_does_not_stop_the_others(prefect_harness: None, store_vars: dict[str, str]) -> None:
    stream = two_event_stream()
    with pipeline_env(store_vars) as store:
        write_articles(store, stream)
        # German's writer state is unreadable: every German run fails.
        store.put(layout.story_state_key("de", 0), b"not a state")
        store.put(layout.story_checkpoint_key("de"), json.dumps(
            {"offset": 0, "state_key": layout.story_state_key("de", 0), "consumed": []}).encode())
        with pytest.raises(RuntimeError, match="2 of 4 writer runs failed: StateBlobError"):
            cluster_writer_session(languages=["de", "en"], minutes=4, every_seconds=120, start=T0.isoformat())
        assigned = {c["article_id"] for c in changes_of(store)}
    assert assigned == {a for a, _, minute, _ in stream if minute <= 2}  # English went on, both ticks
