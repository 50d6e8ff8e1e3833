"""The repair flow under Prefect: it runs each language's repair through the writer's fence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from pipeline_harness import pipeline_env
from repair_corpus import changes_of, final_story, two_event_stream, write_articles

from flows.repair import repair_stories
from tasks.writer.run import cluster_language
from transforms.clustering import ClusterParams

pytestmark = [pytest.mark.integration, pytest.mark.slow]
T0 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)


def test_deployment_is_listed() -> None:
    config = yaml.safe_load((Path(__file__).resolve().parents[2] / "prefect.yaml").read_text(encoding="utf-8"))
    deployment = {d["name"]: d for d in config["deployments"]}["repair_stories-every-10-minutes"]
    assert deployment["entrypoint"] == "flows/repair.py:repair_stories"
    assert deployment["schedules"] == [{"interval": 600}]


def test_repair_flow_splits_through_the_fence(prefect_harness: None, store_vars: dict[str, str],
                                              tmp_path: Path) -> None:
    with pipeline_env(store_vars) as store:
        write_articles(store, two_event_stream())
        mixing = ClusterParams(join_threshold=0.0, date_conflict_penalty=0.0, year_conflict_penalty=0.0)
        cluster_language(store, "en", T0 + timedelta(minutes=15), params=mixing)
        summaries = repair_stories(now=(T0 + timedelta(minutes=20)).isoformat())
        assert summaries == [{"language": "en", "committed": True, "offset": 18, "merge": 0, "split": 1}]
        after = final_story(changes_of(store))
        assert len({after[f"b{i}"] for i in range(6)}) == 1 and after["b0"] != after["m0"]
