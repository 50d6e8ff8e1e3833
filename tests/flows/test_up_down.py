"""`newsroom up` brings up Prefect (server, UI, worker, every deployment) and the API; runs complete
on schedule and publish artifacts; `newsroom down` stops everything."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from corpus_paths import CORPUS

from flows.prefect_server import free_ports

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DEPLOYMENTS = {d["name"] for d in yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]}


def _newsroom(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _wait_for_health(url: str, deadline: float) -> httpx.Response:
    while True:
        response = httpx.get(url, timeout=10)
        if response.status_code != 503 or time.monotonic() > deadline:
            return response
        time.sleep(1)


def test_up_runs_every_deployment_and_down_stops_it(tmp_path: Path) -> None:
    prefect_port, api_port, replay_port = free_ports(3)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NEWSROOM_WAREHOUSE_ROOT": str(tmp_path / "store"),
           "NEWSROOM_SERVING_PROFILES_PATH": str(tmp_path / "profiles.sqlite3"),
           "NEWSROOM_SERVING_HMAC_KEY": "k" * 40, "NEWSROOM_CORPUS_DIR": str(CORPUS)}
    for key in [k for k in env if k.startswith("PREFECT_")]:
        env.pop(key)
    up = _newsroom(["up", "--replay", "--prefect-port", str(prefect_port), "--port", str(api_port),
                    "--replay-port", str(replay_port), "--replay-speed", "120"], tmp_path, env)
    api = f"http://127.0.0.1:{prefect_port}/api"
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"http://127.0.0.1:{prefect_port}/" in up.stdout
        deployed = httpx.post(f"{api}/deployments/filter", json={}, timeout=10).json()
        assert {d["name"] for d in deployed} == DEPLOYMENTS

        completed: set[str] = set()
        deadline = time.monotonic() + 240
        wanted = {"ingest_feeds", "cluster_stories", "rank_and_publish"}
        while time.monotonic() < deadline and not wanted <= completed:
            runs = httpx.post(f"{api}/flow_runs/filter", json={
                "flow_runs": {"state": {"type": {"any_": ["COMPLETED"]}}}}, timeout=10).json()
            flows = {f["id"]: f["name"] for f in httpx.post(f"{api}/flows/filter", json={}, timeout=10).json()}
            completed = {flows.get(r["flow_id"], "") for r in runs}
            time.sleep(3)
        assert wanted <= completed, f"completed runs: {completed}"
        artifacts = httpx.post(f"{api}/artifacts/filter", json={}, timeout=10).json()
        assert "ingest-summary" in {a.get("key") for a in artifacts}
        # The API answers 503 until a page is published: a rank run before the first stories exist
        # publishes none, the next (every minute) does, and the API's refresh picks it up.
        health = _wait_for_health(f"http://127.0.0.1:{api_port}/healthz", deadline=time.monotonic() + 150)
        assert health.status_code == 200, health.text
        assert health.json()["pages"] > 0
    finally:
        down = _newsroom(["down"], tmp_path, env)
    assert down.returncode == 0 and "prefect-worker" in down.stdout
    assert not list((tmp_path / "var" / "run").glob("*.pid"))
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{api}/health", timeout=2)
