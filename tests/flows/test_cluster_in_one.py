"""A whole cluster on one machine, each piece its own process, the way a deployment runs (#19).

SeaweedFS (the store), PostgreSQL (reader profiles), a Prefect server with two process workers (one
on the ``writers-en`` work queue, one on ``writers-rest`` and the default queue), a Dask scheduler
with two workers (the ingest fan-out), two API replicas on the same store and database, and the
replay publisher site. The test drives the ``prefect.yaml`` deployments cycle by cycle (the server's
scheduler is off, so each run's stream time is the replay site's clock), kills a worker, an API
replica and the database mid-run, and checks that nothing is lost and the site keeps serving.

Every step logs one ``cluster_step`` line; run with ``-o log_cli=true --log-cli-level=INFO`` to read
the run as it goes. Every process is started in a session of its own and stopped at the end, even
when an assertion fails.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from corpus_paths import CLUSTERING_CORPORA
from distributed import Client
from pgserver import PostgresServer, find_pg_binary, run_postgres
from pipeline_harness import START, cycle_times, pipeline_env, s3_env
from repair_corpus import changes_of
from s3server import run_seaweedfs

from flows.prefect_server import free_ports
from tasks.registry import import_publishers
from tasks.replay_control import download_publishers_csv, set_replay_clock
from warehouse import layout
from warehouse.duck import connect

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
logger = logging.getLogger("cluster_in_one")
DONE = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
USED_DEPLOYMENTS = ["ingest_feeds-every-minute", "cluster_stories-en-every-minute", "cluster_stories-rest-every-minute",
                    "cluster_stories-every-minute", "rank_and_publish-every-minute", "fold_profiles-every-minute"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_T0 = time.monotonic()


def _step(event: str, **fields: object) -> None:
    logger.info("cluster_step t=%ds %s %s", time.monotonic() - _T0, event,
                " ".join(f"{k}={v}" for k, v in fields.items()))


@dataclass
class Processes:
    """Every process the test started, by name; each in its own session, so a stop takes its children."""

    logs: Path
    running: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("ab")
        process = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        self.running[name] = process
        _step("process_started", name=name, pid=process.pid)
        return process

    def kill(self, name: str) -> None:
        """SIGKILL a process and its children: a machine or container that dies."""
        process = self.running.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        _step("process_killed", name=name, pid=process.pid, signal="SIGKILL")

    def stop_all(self) -> None:
        # Prefect workers ignore SIGTERM (STACK.md): SIGINT first, for everything, then SIGKILL what is left.
        for process in self.running.values():
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGINT)
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 20
        for name, process in list(self.running.items()):
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the group: flow-run children too
            except ProcessLookupError:
                pass
            process.wait(timeout=10)
            _step("process_stopped", name=name, pid=process.pid)
        self.running.clear()


def _wait_http(url: str, seconds: float, statuses: tuple[int, ...] = (200,)) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2, trust_env=False).status_code in statuses:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} never answered {statuses}")


@dataclass
class Prefect:
    api: str
    deployments: dict[str, str] = field(default_factory=dict)

    def load_deployments(self) -> None:
        found = httpx.post(f"{self.api}/deployments/filter", json={}, timeout=30).json()
        self.deployments = {d["name"]: d["id"] for d in found}

    def submit(self, deployment: str, **parameters: object) -> str:
        # The server's SQLite answers 503 while another writer holds it (a busy machine): try again.
        for _ in range(30):
            run = httpx.post(f"{self.api}/deployments/{self.deployments[deployment]}/create_flow_run",
                             json={"parameters": parameters}, timeout=30)
            if run.status_code != 503:
                break
            time.sleep(1)
        run.raise_for_status()
        return str(run.json()["id"])

    def wait(self, runs: dict[str, str], seconds: float = 120) -> dict[str, str]:
        """Each run's final state type, by deployment name, waiting for all of them."""
        states: dict[str, str] = {}
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and len(states) < len(runs):
            for name, run_id in runs.items():
                if name not in states:
                    answer = httpx.get(f"{self.api}/flow_runs/{run_id}", timeout=30)
                    if answer.status_code == 503:
                        continue
                    state = answer.json()["state"]["type"]
                    if state in DONE:
                        states[name] = state
            time.sleep(1)
        return states


def _page_stories(base: str) -> tuple[str, list[dict[str, Any]], int]:
    """The first edition's top page on a replica: (edition, stories, version)."""
    editions = httpx.get(f"{base}/v1/editions", timeout=10).json()
    assert editions, f"{base} serves no edition"
    edition = editions[0]["edition"]
    page = httpx.get(f"{base}/v1/editions/{edition}/top", timeout=10)
    assert page.status_code == 200, page.text
    body = page.json()
    return edition, body["stories"], int(body.get("version", 0))


def _signed_in(base: str, reader: str) -> dict[str, str]:
    token = httpx.post(f"{base}/v1/session", json={"reader": reader}, timeout=10).json()["token"]
    return {"Authorization": f"Bearer {token}"}


@contextmanager
def _started_cluster(tmp_path: Path) -> Iterator[tuple[Processes, dict[str, Any]]]:
    with ExitStack() as stack:
        processes = Processes(logs=tmp_path)
        s3 = stack.enter_context(run_seaweedfs(tmp_path / "seaweedfs"))
        _step("process_started", name="seaweedfs", endpoint=s3.endpoint_url)
        pg: PostgresServer = stack.enter_context(run_postgres())
        profiles_url = pg.create_database("profiles")
        _step("process_started", name="postgres", port=pg.port)
        stack.callback(processes.stop_all)
        store_vars = s3_env(s3, "cluster")
        prefect_port, dask_port = free_ports(2)
        api = f"http://127.0.0.1:{prefect_port}/api"
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "NEWSROOM_"))}
        env = {**base_env, **store_vars, "PYTHONPATH": str(REPO), "NEWSROOM_HOME": str(REPO),
               "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": api,
               "PREFECT_SERVER_UI_API_URL": api, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
               # Each run's stream time is the replay clock: runs are submitted by the test, not scheduled.
               "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
               "PREFECT_WORKER_QUERY_SECONDS": "1", "PREFECT_LOGGING_LEVEL": "WARNING",
               "NEWSROOM_INGEST_ALLOW_PRIVATE_ADDRESSES": "true",
               "NEWSROOM_SCALE_DASK_SCHEDULER_ADDRESS": f"tcp://127.0.0.1:{dask_port}",
               "NEWSROOM_SERVING_PROFILES_URL": profiles_url, "NEWSROOM_SERVING_HMAC_KEY": "k" * 40,
               "NEWSROOM_SERVING_CLICK_FLUSH_SECONDS": "1", "NEWSROOM_SERVING_REFRESH_SECONDS": "1"}
        prefect = str(BIN / "prefect")
        processes.start("prefect-server", [prefect, "server", "start", "--host", "127.0.0.1", "--port",
                                           str(prefect_port), "--analytics-off", "--no-ui"], env)
        processes.start("dask-scheduler", [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port",
                                           str(dask_port), "--no-dashboard"], env)
        for i in (1, 2):
            processes.start(f"dask-worker-{i}", [str(BIN / "dask"), "worker", f"tcp://127.0.0.1:{dask_port}",
                                                 "--nthreads", "2", "--no-dashboard", "--host", "127.0.0.1",
                                                 "--name", f"dask-worker-{i}"], env)
        replay = processes.start("replay", [sys.executable, "-m", "replay", "--port", "0", "--seed", "7",
                                            "--start", START.isoformat(), "--span-hours", "2", "--limit", "60",
                                            *[a for c in CLUSTERING_CORPORA for a in ("--corpus", str(c))]], env)
        control = ""
        for _ in range(200):
            text = (tmp_path / "replay.log").read_text() if (tmp_path / "replay.log").exists() else ""
            if "control=" in text:
                control = text.split("control=", 1)[1].split()[0]
                break
            assert replay.poll() is None, text
            time.sleep(0.1)
        assert control, "the replay site never said where it listens"
        replicas = {}
        for name in ("api-a", "api-b"):
            port = _free_port()
            processes.start(name, [sys.executable, "-m", "serving", "--host", "127.0.0.1", "--port", str(port),
                                   "--log-level", "warning"], env)
            replicas[name] = f"http://127.0.0.1:{port}"
        with pipeline_env(store_vars) as store:
            registry = import_publishers(store, download_publishers_csv(control, tmp_path / "p.csv")).registry
        _step("publishers_imported", publishers=len(registry.publishers), feeds=len(registry.feeds))
        _wait_http(f"{api}/health", 120)
        run = {**env, "PREFECT_LOGGING_LEVEL": "ERROR"}
        subprocess.run([prefect, "work-pool", "create", "newsroom", "--type", "process"], env=run, cwd=REPO,
                       capture_output=True, check=False, timeout=120)
        # Only the deployments the cycles run (each deploy imports its flow: a minute for all of them
        # on a busy machine); tests/flows/test_up_down.py deploys every one.
        names = [a for n in USED_DEPLOYMENTS for a in ("--name", n)]
        deployed = subprocess.run([prefect, "--no-prompt", "deploy", *names], env=run, cwd=REPO,
                                  capture_output=True, text=True, check=False, timeout=300)
        assert deployed.returncode == 0, deployed.stdout[-2000:] + deployed.stderr[-2000:]
        client = Prefect(api)
        client.load_deployments()
        _step("deployed", deployments=len(client.deployments))
        workers = {"worker-en": ["--work-queue", "writers-en"],
                   "worker-rest": ["--work-queue", "writers-rest", "--work-queue", "default"]}
        for name, queues in workers.items():
            processes.start(name, [prefect, "worker", "start", "--pool", "newsroom", "--name", name, *queues], env)
        for base in replicas.values():  # up, with no page yet (503) until the first cycle publishes
            _wait_http(f"{base}/healthz", 60, statuses=(200, 503))
        yield processes, {"store_vars": store_vars, "control": control, "replicas": replicas, "prefect": client,
                          "pg": pg, "env": env, "workers": workers, "dask": f"tcp://127.0.0.1:{dask_port}"}


def _cycle(prefect: Prefect, control: str, number: int, now: datetime,
           extra_writers: dict[str, dict[str, object]] | None = None,
           before_writers: Any = None) -> None:
    """One cycle: ingest; the two writer groups at once (each on its own worker); rank and the fold."""
    at = now.isoformat()
    set_replay_clock(control, now)
    states = prefect.wait({"ingest_feeds": prefect.submit("ingest_feeds-every-minute", now=at)})
    assert states == {"ingest_feeds": "COMPLETED"}, states
    writers = {"cluster_stories-en": prefect.submit("cluster_stories-en-every-minute", now=at),
               "cluster_stories-rest": prefect.submit("cluster_stories-rest-every-minute", now=at)}
    for name, parameters in (extra_writers or {}).items():
        writers[name] = prefect.submit(name, **parameters)
    if before_writers is not None:
        before_writers()
    states = prefect.wait(writers, seconds=180)
    assert states == dict.fromkeys(writers, "COMPLETED"), states
    states = prefect.wait({"rank_and_publish": prefect.submit("rank_and_publish-every-minute", now=at),
                           "fold_profiles": prefect.submit("fold_profiles-every-minute", now=at)})
    assert states == {"rank_and_publish": "COMPLETED", "fold_profiles": "COMPLETED"}, states
    _step("cycle_done", cycle=number, now=at, runs="ingest,cluster-en,cluster-rest,rank,fold"
          + "".join(f",{n}" for n in extra_writers or {}))


def test_a_cluster_on_one_machine_loses_nothing_when_pieces_die(tmp_path: Path) -> None:
    if find_pg_binary("initdb") is None:
        pytest.skip("PostgreSQL server binaries missing: apt-get install postgresql (scripts/ensure-postgresql.sh)")
    started = time.monotonic()
    with _started_cluster(tmp_path) as (processes, c):
        prefect: Prefect = c["prefect"]
        a, b = c["replicas"]["api-a"], c["replicas"]["api-b"]
        times = cycle_times(3, step_minutes=30)
        _step("cluster_up", processes=len(processes.running) + 2, seconds=round(time.monotonic() - started))

        _cycle(prefect, c["control"], 1, times[0])
        for base in (a, b):  # a replica checks its pointers every second
            _wait_http(f"{base}/healthz", 30)
        edition, stories_a, version_a = _page_stories(a)
        _, stories_b, version_b = _page_stories(b)
        assert stories_a and [s["story_id"] for s in stories_a] == [s["story_id"] for s in stories_b]
        _step("pages_served_by_both", edition=edition, stories=len(stories_a), version_a=version_a,
              version_b=version_b)

        # A follow made on replica A shapes the reader's For you on replica B (one Postgres).
        reader_a, reader_b = _signed_in(a, "ada"), _signed_in(b, "ada")
        before = httpx.get(f"{b}/v1/feed", params={"edition": edition}, headers=reader_b, timeout=10).json()
        publisher = stories_a[-1]["sources"][0]["publisher_id"]
        assert httpx.put(f"{a}/v1/me/follows/source/{publisher}", headers=reader_a, timeout=10).status_code == 200
        # B holds ada's profile in memory and learns of the follow at its next poll of the store (issue 29).
        deadline = time.monotonic() + 5
        while True:
            after = httpx.get(f"{b}/v1/feed", params={"edition": edition}, headers=reader_b, timeout=10).json()
            if after["mode"] == "for_you" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert before["mode"] == "top_stories" and after["mode"] == "for_you", (before["mode"], after["mode"])
        assert any(s["reason"].startswith("Because you follow") for s in after["stories"])
        _step("follow_on_a_seen_on_b", publisher=publisher, mode_before=before["mode"], mode_after=after["mode"])

        # Clicks on both replicas: one article each, through the reader's own click tokens.
        clicked = {}
        for base, headers, story in ((a, reader_a, stories_a[0]), (b, reader_b, stories_a[1])):
            article = story["sources"][0]
            token = httpx.post(f"{base}/v1/click-token", headers=headers, timeout=10,
                               json={"article_id": article["article_id"], "surface": "top", "position": 1}).json()
            click = httpx.get(f"{base}{token['click_url']}", timeout=10)
            assert click.status_code == 302 and click.headers["X-Click-Logged"] == "buffered"
            clicked[base] = article["publisher_id"]
        time.sleep(3)  # one flush interval (1 s) and then some
        with pipeline_env(c["store_vars"]) as store:
            segments = store.list(layout.CLICKS_PREFIX)
        assert len(segments) >= 2, segments
        _step("clicks_flushed", replicas=2, segments=len(segments))

        # Kill the English writer's worker while idle; its next run waits for a replacement and is not lost.
        processes.kill("worker-en")
        env, en_queue = c["env"], c["workers"]["worker-en"]

        def replace_worker() -> None:
            time.sleep(5)
            pending = httpx.post(f"{prefect.api}/flow_runs/filter", json={"flow_runs": {"state": {"type": {
                "any_": ["SCHEDULED", "PENDING"]}}}}, timeout=30).json()
            _step("en_run_waits_without_worker", pending=len(pending))
            processes.start("worker-en-2", [str(BIN / "prefect"), "worker", "start", "--pool", "newsroom",
                                            "--name", "worker-en-2", *en_queue], env)

        # Cycle 2 also runs the all-languages writer against the English group: two writers of English.
        _cycle(prefect, c["control"], 2, times[1], before_writers=replace_worker,
               extra_writers={"cluster_stories-every-minute": {"now": times[1].isoformat()}})

        # Kill replica A; B keeps serving, the follow and weights come from Postgres.
        processes.kill("api-a")
        _, stories_b, version_b = _page_stories(b)
        assert stories_b
        _step("replica_b_serves_after_a_killed", stories=len(stories_b), version=version_b)

        # Restart Postgres: B keeps serving pages, For you falls back, then the pool recovers.
        pg: PostgresServer = c["pg"]
        pg.stop()
        # B answers ada from memory while its last good poll of the store is recent (three intervals,
        # issue 29), then falls back to the top stories until the database is back.
        deadline = time.monotonic() + 15
        while True:
            down = httpx.get(f"{b}/v1/feed", params={"edition": edition}, headers=reader_b, timeout=30)
            assert down.status_code == 200, down.text
            if down.json()["mode"] == "top_stories_fallback" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert down.json()["mode"] == "top_stories_fallback", down.text
        assert httpx.get(f"{b}/v1/editions/{edition}/top", timeout=10).status_code == 200
        pg.start()
        me = httpx.get(f"{b}/v1/me", headers=reader_b, timeout=30)
        assert me.status_code == 200, me.text
        assert publisher in me.json()["follows"]["source"]
        _step("postgres_restarted", feed_while_down=down.json()["mode"], me_after=me.status_code,
              follow_kept=True)

        _cycle(prefect, c["control"], 3, times[2])
        me = httpx.get(f"{b}/v1/me", headers=reader_b, timeout=30).json()
        assert set(clicked.values()) <= set(me["source_weights"]), (clicked, me["source_weights"])
        _step("clicks_of_both_replicas_folded", source_weights=sorted(me["source_weights"]))

        # Nothing lost, nothing committed twice: every article decided exactly once.
        with pipeline_env(c["store_vars"]) as store:
            con = connect(store)
            articles = {r[0] for r in con.sql("select distinct article_id from articles").fetchall()}
            con.close()
            decided = [ch["article_id"] for ch in changes_of(store)
                       if ch["kind"] in ("new_story", "assign", "copy")]
        assert articles and set(decided) == articles and len(decided) == len(set(decided))
        _step("every_article_decided_once", articles=len(articles), decisions=len(decided))
        with Client(c["dask"], timeout=30) as dask:
            transitions = dask.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)
            dask_workers = len(dask.scheduler_info()["workers"])
        assert transitions > 0 and dask_workers == 2
        _step("dask_fan_out_used", workers=dask_workers, transitions=transitions)
        _step("asserted_all", seconds=round(time.monotonic() - started))
    _step("all_processes_stopped", seconds=round(time.monotonic() - started))
