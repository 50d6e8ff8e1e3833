"""Maintenance on a real pipeline's store: compaction changes no query result, retention and pruning hold."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pipeline_harness import cycle_times, pipeline_env, replay_site

from flows.cycle import pipeline_cycle
from tasks.maintenance import run_maintenance
from tasks.registry import import_publishers
from tasks.replay_control import download_publishers_csv
from warehouse import layout
from warehouse.duck import EXAMPLE_QUERIES, TABLE_VIEWS, connect, load_example_sql
from warehouse.maintenance import is_compacted

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _answers(store) -> dict[str, list[tuple[object, ...]]]:
    con = connect(store)
    try:
        answers = {v: sorted(map(repr, con.sql(f"select * from {v}").fetchall())) for v in TABLE_VIEWS
                   if v not in ("pages", "feeds")}
        for name in EXAMPLE_QUERIES:
            answers[name] = sorted(map(repr, con.sql(load_example_sql(name)).fetchall()))
        return answers
    finally:
        con.close()


def test_compaction_retention_and_pruning(prefect_harness: None, tmp_path: Path) -> None:
    with replay_site(limit=60) as site, pipeline_env({"NEWSROOM_WAREHOUSE_ROOT": str(tmp_path / "s")}) as store:
        import_publishers(store, download_publishers_csv(site.control_url, tmp_path / "p.csv"))
        times = cycle_times(6)
        for now in times:
            site.set_clock(now)
            pipeline_cycle(now=now.isoformat())
        before = _answers(store)
        article_segments = [k for k in store.list(layout.ARTICLES_PREFIX)]
        assert len(article_segments) >= 4

        later = times[-1] + timedelta(days=3)
        report = run_maintenance(store, later, keep_page_versions=2)
        assert report["compacted_segments"] >= len(article_segments)
        after_keys = store.list("")
        assert [k for k in store.list(layout.ARTICLES_PREFIX) if not is_compacted(k)] == []
        assert _answers(store) == before  # compaction changes no query result

        # Pruning keeps the live version and the two a rollback may return to.
        for key in after_keys:
            if key.endswith("/latest.json"):
                folder = key.rsplit("/", 1)[0]
                if folder == layout.search_index_pointer_key().rsplit("/", 1)[0]:
                    continue  # rank prunes the search index as it publishes (NEWSROOM_SEARCH_KEEP_VERSIONS)
                versions = sorted(int(k.rsplit("/v", 1)[1][:-5]) for k in after_keys
                                  if k.startswith(folder + "/v") and k.endswith(".json"))
                assert versions == list(range(max(1, versions[-1] - 2), versions[-1] + 1))
        assert run_maintenance(store, later, keep_page_versions=2)["compacted_segments"] == 0  # idempotent

        # The writers do not take compacted segments for new input.
        site.set_clock(times[-1] + timedelta(minutes=15))
        summary = pipeline_cycle(now=(times[-1] + timedelta(minutes=15)).isoformat())
        assert sum(s.get("duplicate_input", 0) for s in summary["cluster"]) == 0

        # Retention: 31 days on, every article partition and story change is gone.
        report = run_maintenance(store, later + timedelta(days=31), keep_page_versions=2)
        assert report["deleted_for_retention"] > 0
        assert store.list(layout.ARTICLES_PREFIX) == []
