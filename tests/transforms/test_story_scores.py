"""The score parts computed from story rows (``transforms.story_scores.story_parts``, issue 15) equal
what ``story_scores.sql`` computes from every article of the window, on the synthetic rank worlds."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from rank_world import day_world, quiet_world

from tasks.aggregates.cycle import aggregates_from_logs
from tasks.rank.params import parts_params, score_params
from tasks.settings import RankSettings
from transforms.story_scores import story_parts
from warehouse.duck import connect, load_sql
from warehouse.store import LocalStore, ObjectStore

SETTINGS = RankSettings(burst_min_articles=3, burst_min_publishers=2)
"""Low burst bars, so the worlds' busiest starts are bursts and those parts are compared too."""


def _sql_parts(store: ObjectStore, now: datetime) -> list[dict[str, object]]:
    con = connect(store)
    try:
        frame = pl.from_arrow(con.sql(load_sql("story_scores"), params=score_params(now, SETTINGS)).to_arrow_table())
    finally:
        con.close()
    assert isinstance(frame, pl.DataFrame)
    return frame.sort("story_id").to_dicts()


def _aggregate_parts(store: ObjectStore, now: datetime) -> list[dict[str, object]]:
    view = aggregates_from_logs(store, now, SETTINGS)
    frame = story_parts(view.stories, view.registry.publishers.select("publisher_id", "authority", "region"),
                        now=now, params=parts_params(SETTINGS))
    return frame.to_dicts()


def _close(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("world", ["quiet", "day"])
def test_parts_from_story_rows_equal_the_sql_over_every_article(tmp_path: Path, world: str) -> None:
    store = LocalStore(tmp_path / "store")
    if world == "quiet":
        built, _, end = quiet_world(store, stories=40)
        times = [end - timedelta(minutes=m) for m in (0, 37, 95, 180)]
    else:
        built, day = day_world(store, stories=120)
        times = [day + timedelta(hours=h, minutes=7) for h in (3, 9, 15, 22)]
    start = times[0] - timedelta(minutes=30)  # a burst: eight reports from eight publishers in three minutes
    built.add([("burst", f"pub{i:02d}", start + timedelta(seconds=20 * i)) for i in range(8)])
    compared, bursts = 0, 0
    for now in times:
        sql, ours = _sql_parts(store, now), _aggregate_parts(store, now)
        assert [r["story_id"] for r in ours] == [r["story_id"] for r in sql]
        for mine, theirs in zip(ours, sql, strict=True):
            different = {k: (mine[k], theirs[k]) for k in theirs if not _close(mine[k], theirs[k])}
            assert not different, (mine["story_id"], now, different)
            compared += 1
            bursts += bool(theirs["burst_at"])
    assert compared > 50 and bursts > 0
