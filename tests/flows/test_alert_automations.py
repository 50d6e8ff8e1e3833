"""The seeds' alerts as Prefect automations (issue 31): ``prefect deploy`` of ``route_alert-on-flag``
onto a temporary Prefect server makes one automation per alert, and a flag raised by the real health
flow (or a writer really fenced) makes the automation run the alert flow with the flag's details."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from repair_corpus import T0, two_event_stream, write_articles

from flows.health import check_health
from tasks.errors import WriterFencedError
from tasks.settings import current_settings, use_settings
from tasks.writer.session import commit, load
from transforms.records import StoryChange
from warehouse import layout
from warehouse.schemas import ARTICLES_SCHEMA, PUBLISHERS_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import rows_to_table, write_segment, write_table

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("prefect_harness")]

REPO = Path(__file__).resolve().parents[2]
DEPLOYMENT = "route_alert-on-flag"
ALERTS = {"newsroom: freshness p95 over 5 minutes", "newsroom: tier-1 publisher silent",
          "newsroom: no page for 3 cycles", "newsroom: writer fenced"}


def _api_url() -> str:
    from prefect.settings import PREFECT_API_URL

    return str(PREFECT_API_URL.value())


async def _create_pool() -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists

    async with get_client() as client:
        try:
            await client.create_work_pool(WorkPoolCreate(name="newsroom", type="process"))
        except ObjectAlreadyExists:
            pass


async def _automation_names() -> set[str]:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        return {a.name for a in await client.read_automations()}


async def _alert_runs() -> list[dict[str, Any]]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    async with get_client() as client:
        runs = await client.read_flow_runs(deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=[DEPLOYMENT])))
    return [dict(r.parameters) for r in runs]


@pytest.fixture(scope="module")
def deployed(prefect_harness: None) -> Iterator[None]:
    """``route_alert-on-flag`` deployed from prefect.yaml, as ``newsroom up`` deploys it."""
    asyncio.run(_create_pool())
    env = {**os.environ, "PREFECT_API_URL": _api_url(), "NEWSROOM_HOME": str(REPO), "PYTHONPATH": str(REPO)}
    prefect = str(Path(sys.executable).with_name("prefect"))
    done = subprocess.run([prefect, "--no-prompt", "deploy", "--name", DEPLOYMENT], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert ALERTS <= asyncio.run(_automation_names())
    yield


def _wait_for_alert(check: str, seconds: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = [p for p in asyncio.run(_alert_runs()) if p.get("check") == check]
        if found:
            return found[0]
        time.sleep(1)
    raise AssertionError(f"no {DEPLOYMENT} run for {check} within {seconds:.0f} s: {asyncio.run(_alert_runs())}")


def test_prefect_yaml_ships_one_automation_per_seed_alert() -> None:
    deployments = {d["name"]: d for d in yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]}
    triggers = deployments[DEPLOYMENT]["triggers"]
    assert {t["name"] for t in triggers} == ALERTS
    assert {e for t in triggers for e in t["expect"]} == {
        "newsroom.health.freshness_lag", "newsroom.health.silent_tier1_feed", "newsroom.health.stale_snapshot",
        "newsroom.writer.fenced"}


def test_a_freshness_flag_raised_by_the_health_flow_runs_the_alert(deployed: None, tmp_path: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    store = LocalStore(tmp_path / "store")
    publisher = {"publisher_id": "wire", "name": "Wire", "domain": "wire.test", "region": "US", "language": "en",
                 "tier": 1, "authority": 0.9, "is_paywalled": False, "is_opted_out": False}
    write_table(store, layout.PUBLISHERS_KEY, pa.Table.from_pylist([publisher], PUBLISHERS_SCHEMA), PUBLISHERS_SCHEMA)
    rows = []
    for i in range(12):  # seen 9 minutes after publication: the p95 lag is over 5 minutes
        seen = now - timedelta(minutes=4 * i)
        row: dict[str, object] = {name: None for name in ARTICLES_SCHEMA.names}
        row.update(article_id=f"a{i:03d}", version=1, content_hash=f"h{i}", publisher_id="wire", language="en",
                   title=f"t{i}", first_seen_at=seen, published_at=seen - timedelta(minutes=9))
        rows.append(row)
    write_segment(store, layout.article_segment_key(now, "s1"), rows_to_table(rows, ARTICLES_SCHEMA), ARTICLES_SCHEMA)
    with use_settings(current_settings().with_store(str(tmp_path / "store"))):
        report = check_health(now=now.isoformat())
    assert "freshness_lag" in {f["check"] for f in report["flags"]} and report["events"] >= 1
    alert = _wait_for_alert("freshness_lag")
    assert alert["subject"] == "all feeds" and "p95 publish->first-seen" in alert["detail"]
    assert alert["automation"] == "newsroom: freshness p95 over 5 minutes"


def test_a_fenced_writer_runs_the_alert(deployed: None, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    write_articles(store, two_event_stream()[:2])
    now = T0 + timedelta(minutes=5)
    session = load(store, "en")
    decisions = [StoryChange.at("en", 0, "new_story", "s-first", article_id="m0", score=1.0, changed_at=T0)]
    commit(session, decisions, now)
    with pytest.raises(WriterFencedError):  # a second writer of en, from the same checkpoint
        commit(session, decisions, now + timedelta(minutes=1))
    alert = _wait_for_alert("writer_fenced")
    assert alert["subject"] == "en" and "moved by another writer" in alert["detail"]
    assert json.loads(store.get(layout.story_checkpoint_key("en")).data)["offset"] == 1
