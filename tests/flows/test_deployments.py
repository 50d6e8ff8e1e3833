"""Every prefect.yaml deployment points at a real flow, and the flows keep their contract."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml
from prefect import Flow

REPO = Path(__file__).resolve().parents[2]
DEPLOYMENTS = yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=[d["name"] for d in DEPLOYMENTS])
def test_entrypoint_is_a_flow(deployment: dict[str, object]) -> None:
    path, name = str(deployment["entrypoint"]).split(":")
    spec = importlib.util.spec_from_file_location(f"entry_{name}", REPO / path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    flow = getattr(module, name)
    assert isinstance(flow, Flow)
    assert deployment["name"].startswith(f"{flow.name}-")  # named <flow>-<cadence>
    assert deployment.get("schedules") or deployment.get("triggers"), "every deployment runs on a schedule or a trigger"


def test_every_flow_has_a_deployment() -> None:
    names = {d["entrypoint"] for d in DEPLOYMENTS}
    assert {"flows/ingest.py:ingest_feeds", "flows/cluster.py:cluster_stories",
            "flows/rank.py:rank_and_publish"} <= names


def test_one_writer_deployment_is_active_at_a_time() -> None:
    # The hourly writer session ships switched off. The per-minute flow and the long-running writer
    # are both scheduled, and NEWSROOM_SCALE_WRITER_MODE makes exactly one of them write (issue 15).
    writers = {d["name"]: d for d in DEPLOYMENTS if d["entrypoint"].startswith("flows/cluster.py:")}
    active = [name for name, d in writers.items() if any(s.get("active", True) for s in d["schedules"])]
    assert set(writers) == {"cluster_stories-every-minute", "cluster_writer_session-hourly",
                            "cluster_stories-en-every-minute", "cluster_stories-rest-every-minute",
                            "cluster_writer_service-long-running"}
    assert sorted(active) == ["cluster_stories-every-minute", "cluster_writer_service-long-running"]


@pytest.mark.parametrize("flow", ["cluster_stories", "repair_stories"])
def test_the_language_groups_split_the_writers_between_two_work_queues(flow: str) -> None:
    # #19: the English writer on its own queue (a machine of its own), every other language on another.
    groups = {d["name"]: d for d in DEPLOYMENTS if d["entrypoint"].endswith(f":{flow}")
              and d.get("work_pool", {}).get("work_queue_name")}
    assert {d["work_pool"]["work_queue_name"]: d.get("parameters") for d in groups.values()} == {
        "writers-en": {"languages": ["en"]}, "writers-rest": {"except_languages": ["en"]}}
    assert not any(s.get("active", True) for d in groups.values() for s in d["schedules"])


@pytest.mark.parametrize("mode", ["per_minute", "long_running"])
def test_the_writer_mode_setting_chooses_which_writer_deployment_writes(mode: str, tmp_path: Path) -> None:
    from prefect.logging import disable_run_logger

    from flows.cluster import cluster_stories, cluster_writer_service
    from tasks.settings import PipelineSettings, ScaleSettings, use_settings

    settings = PipelineSettings.from_environment(scale=ScaleSettings(writer_mode=mode)).with_store(str(tmp_path / "store"))
    with use_settings(settings), disable_run_logger():
        service = cluster_writer_service.fn(languages=["en"], run_minutes=0.0)
        minute = cluster_stories.fn(languages=["en"]) if mode == "long_running" else None
    if mode == "per_minute":
        assert service == {"skipped": "per_minute"}
    else:
        assert "skipped" not in service and service["batches"] == 0
        assert minute == []  # a scheduled per-minute run leaves the language to the long-running writer


def test_the_long_running_ingest_and_rank_are_deployed_beside_their_minute_fallbacks() -> None:
    # #31: the long-running flows act on events; the minute deployments of the same steps stay scheduled
    # as the fallback, and NEWSROOM_FRESHNESS_MODE makes exactly one of each pair do the work.
    by_name = {d["name"]: d for d in DEPLOYMENTS}
    for service, minute in [("ingest_service-long-running", "ingest_feeds-every-minute"),
                            ("rank_service-long-running", "rank_and_publish-every-minute")]:
        assert by_name[service]["parameters"] == {"run_minutes": 60}
        assert by_name[service]["concurrency_limit"] == 1
        assert [s["interval"] for s in by_name[service]["schedules"] if s.get("active", True)] == [3600]
        assert [s["interval"] for s in by_name[minute]["schedules"] if s.get("active", True)] == [60]


@pytest.mark.parametrize("mode", ["events", "minute"])
def test_the_freshness_mode_chooses_who_polls_and_ranks(mode: str, tmp_path: Path) -> None:
    from prefect.logging import disable_run_logger

    from flows.ingest import ingest_service
    from flows.rank import rank_service
    from tasks.settings import FreshnessSettings, PipelineSettings, use_settings

    settings = PipelineSettings.from_environment(freshness=FreshnessSettings(mode=mode)).with_store(str(tmp_path / "store"))
    if mode == "minute":
        with use_settings(settings), disable_run_logger():
            assert ingest_service.fn(run_minutes=0.0) == {"skipped": "minute"}
            assert rank_service.fn(run_minutes=0.0) == {"skipped": "minute"}
    else:
        assert settings.freshness.mode == "events" == FreshnessSettings.model_fields["mode"].default
