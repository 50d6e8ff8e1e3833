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
