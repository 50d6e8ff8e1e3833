"""The pipeline records what the dashboards read, the health flow publishes them, and ``explain``
agrees with the pages (issue 18).

Replay publishers -> real cycles under Prefect -> ``log/fetches`` (every feed poll and page fetch)
and ``log/listings`` (when each article first reached a page) -> the health flow's four dashboards,
read back from the Prefect API as markdown (chart) and table artifacts.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from pipeline_harness import cycle_times, pipeline_env, replay_site

from flows.cycle import pipeline_cycle
from flows.health import check_health
from tasks.dashboards import DASHBOARD_KEYS
from tasks.explain import explain_story, render_explanation
from tasks.registry import import_publishers
from tasks.replay_control import download_publishers_csv
from tasks.settings import get_rank_settings
from warehouse.duck import connect
from warehouse.snapshots import read_live_page, read_live_stories
from warehouse.store import ObjectStore

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def _latest_artifacts(keys: list[str]) -> dict[str, Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    async with get_client() as client:
        found = await client.read_latest_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys)))
    return {a.key: a for a in found}


@dataclass(frozen=True)
class Pipeline:
    store: ObjectStore
    root: str
    polled: int
    last: datetime


@pytest.fixture(scope="module")
def pipeline(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    """Four real cycles over replay publishers, under Prefect, into a local store."""
    tmp = tmp_path_factory.mktemp("dashboards")
    with replay_site(limit=60) as site, pipeline_env({"NEWSROOM_WAREHOUSE_ROOT": str(tmp / "store")}) as store:
        import_publishers(store, download_publishers_csv(site.control_url, tmp / "publishers.csv"))
        polled = 0
        times = cycle_times(4)
        for now in times:
            site.set_clock(now)
            polled += pipeline_cycle(now=now.isoformat())["ingest"]["feeds_polled"]
        yield Pipeline(store, str(tmp / "store"), polled, times[-1])


def test_cycles_record_fetches_and_listings(pipeline: Pipeline) -> None:
    con = connect(pipeline.store)
    try:
        feed_polls, conditional, not_modified = con.sql(
            "select count(*), count(*) filter (where is_conditional), count(*) filter (where status = 304) "
            "from fetches where kind = 'feed'").fetchall()[0]
        pages_fetched = con.sql("select count(*) from fetches where kind = 'page' and status = 200").fetchall()[0][0]
        articles = con.sql("select count(distinct article_id) from articles").fetchall()[0][0]
        listed = dict(con.sql("select article_id, listed_at from listings").fetchall())
        clustered = dict(con.sql("select article_id, min(changed_at) from story_changes "
                                 "where kind in ('new_story', 'assign', 'copy') group by 1").fetchall())
    finally:
        con.close()
    assert feed_polls == pipeline.polled
    assert conditional > 0 and not_modified > 0  # the replay site answers validators with 304
    assert pages_fetched >= articles > 0
    snapshot = json.loads(read_live_stories(pipeline.store).data)
    on_pages = {s["article_id"] for story in snapshot["stories"].values() for s in story["sources"]}
    assert set(listed) <= set(clustered) and on_pages <= set(listed)  # every article on a page is listed
    assert all(listed[a] >= clustered[a] for a in listed)  # and only once it is in a story


def test_the_health_flow_publishes_every_dashboard(pipeline: Pipeline) -> None:
    with pipeline_env({"NEWSROOM_WAREHOUSE_ROOT": pipeline.root}):
        report = check_health(now=pipeline.last.isoformat())
    assert report["dashboards"] == list(DASHBOARD_KEYS)

    artifacts = asyncio.run(_latest_artifacts([*DASHBOARD_KEYS, *(f"{k}-table" for k in DASHBOARD_KEYS)]))
    for key in DASHBOARD_KEYS:
        assert artifacts[key].type == "markdown"
        assert "data:image/svg+xml;base64," in str(artifacts[key].data)
        assert artifacts[f"{key}-table"].type == "table"
    freshness = artifacts["dashboard-freshness-table"].data
    rows = freshness if isinstance(freshness, list) else json.loads(freshness)
    whole = [r for r in rows if r["stage"] == "published -> on a page"]
    assert whole and all(r["articles"] > 0 for r in whole)


def test_explain_agrees_with_the_published_page(pipeline: Pipeline) -> None:
    top = json.loads(read_live_page(pipeline.store, "en-US", "top").data)
    card = top["stories"][0]
    explanation = explain_story(pipeline.store, card["story_id"], "en-US", get_rank_settings())

    assert explanation["listings"][0] == {"edition": "en-US", "section": "top", "rank": 1, "of": len(top["stories"]),
                                          "version": top["version"], "as_of": top["as_of"]}
    score = explanation["score"]
    assert score["base_averaged"] * score["regional_factor"] == pytest.approx(card["score"])
    assert {k: score[k] for k in card["score_parts"]} == card["score_parts"]
    rep = explanation["representative"]
    # computed again at the page's as_of, the same choice as the page shows, for the same reasons
    assert rep["chosen"] == rep["published"] == card["sources"][0]["article_id"]
    assert len(rep["candidates"]) == card["representative_choice"]["candidates"]
    assert rep["near_ties"] == card["representative_choice"]["near_ties"]
    assert rep["stepped_aside"] == card["representative_choice"]["stepped_aside"]
    kinds = [c["kind"] for c in explanation["lineage"]]
    assert kinds[0] == "new_story" and kinds.count("new_story") == 1
    assert sum(k in ("new_story", "assign", "copy") for k in kinds) >= card["article_count"]

    text = render_explanation(explanation)
    for heading in ("where it is", "score on en-US", "representative", "lineage"):
        assert heading in text
