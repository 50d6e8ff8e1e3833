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
    assert deployment["schedules"], "every deployment runs on a schedule"


def test_every_flow_has_a_deployment() -> None:
    names = {d["entrypoint"] for d in DEPLOYMENTS}
    assert {"flows/ingest.py:ingest_feeds", "flows/cluster.py:cluster_stories",
            "flows/rank.py:rank_and_publish"} <= names


def test_one_writer_deployment_is_active_at_a_time() -> None:
    # The hourly writer session replaces the per-minute cluster flow; it ships switched off.
    writers = {d["name"]: d for d in DEPLOYMENTS if d["entrypoint"].startswith("flows/cluster.py:")}
    active = [name for name, d in writers.items() if any(s.get("active", True) for s in d["schedules"])]
    assert set(writers) == {"cluster_stories-every-minute", "cluster_writer_session-hourly",
                            "cluster_stories-en-every-minute", "cluster_stories-rest-every-minute"}
    assert active == ["cluster_stories-every-minute"]


@pytest.mark.parametrize("flow", ["cluster_stories", "repair_stories"])
def test_the_language_groups_split_the_writers_between_two_work_queues(flow: str) -> None:
    # #19: the English writer on its own queue (a machine of its own), every other language on another.
    groups = {d["name"]: d for d in DEPLOYMENTS if d["entrypoint"].endswith(f":{flow}")
              and d.get("work_pool", {}).get("work_queue_name")}
    assert {d["work_pool"]["work_queue_name"]: d.get("parameters") for d in groups.values()} == {
        "writers-en": {"languages": ["en"]}, "writers-rest": {"except_languages": ["en"]}}
    assert not any(s.get("active", True) for d in groups.values() for s in d["schedules"])
