"""The ingest flow hands the stored robots.txt verdicts to its shards and writes back what they fetched,
so a second cycle within the TTL asks the publisher for no robots.txt (RFC 9309 §2.4)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pipeline_harness import START, pipeline_env, replay_site

from flows.ingest import ingest_feeds
from tasks.registry import import_publishers
from tasks.replay_control import download_publishers_csv

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_second_cycle_within_the_ttl_reuses_the_stored_robots_txt(prefect_harness: None, tmp_path: Path) -> None:
    first_at, second_at = START + timedelta(minutes=60), START + timedelta(minutes=90)
    with replay_site(limit=80) as site, pipeline_env({"NEWSROOM_WAREHOUSE_ROOT": str(tmp_path / "store")}) as store:
        import_publishers(store, download_publishers_csv(site.control_url, tmp_path / "p.csv"))
        site.set_clock(first_at)
        first = ingest_feeds(now=first_at.isoformat())
        site.set_clock(second_at)
        second = ingest_feeds(now=second_at.isoformat())
    assert not first["errors"] and not second["errors"], (first["errors"], second["errors"])
    assert first["new_articles"] > 0 and second["new_articles"] > 0, (first, second)
    assert first["robots_fetched"] >= 1
    assert second["robots_fetched"] == 0
