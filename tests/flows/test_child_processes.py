"""No command leaves a child process behind, however it dies (issue 32).

Each test starts a real ``newsroom`` command (or a real worker pool) with a marker in its
environment, which every process it starts inherits, waits until the child is up, kills the
command with SIGKILL (no handler, no ``atexit``: what the OOM killer does), and then requires that
within a few seconds no process carrying the marker runs and the child's port is free.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import answers, cmdline, descendants, free_port, marked, port_bindable

REPO = Path(__file__).resolve().parents[2]
NEWSROOM = [sys.executable, "-m", "flows.cli"]
GONE_WITHIN_SECONDS = 5.0


@pytest.fixture(scope="module")
def prefect_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Prefect home for the module: the first server migrates its database, later ones reuse it."""
    return tmp_path_factory.mktemp("prefect-home")


def _marked_env(tmp_path: Path, **extra: str) -> tuple[str, dict[str, str]]:
    marker = f"child-processes-{uuid.uuid4().hex}"
    env = {key: value for key, value in os.environ.items() if key != "PREFECT_API_URL"}
    env.update({"PYTHONPATH": str(REPO), "PREFECT_LOGGING_LEVEL": "WARNING", "NEWSROOM_TEST_RUN": marker,
                "NEWSROOM_WAREHOUSE_ROOT": str(tmp_path / "store"), **extra})
    return marker, env


def _port_of(pid: int) -> int:
    args = cmdline(Path(f"/proc/{pid}")).split(b"\0")
    return int(args[args.index(b"--port") + 1])


def _wait(condition_met: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition_met():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.fixture
def killed_after() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Commands a test started; whatever is left of them (and their marked children) goes at the end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for command in started:
        if command.poll() is None:
            command.kill()
            command.wait()


def _assert_nothing_left(marker: str, port: int) -> None:
    deadline = time.monotonic() + GONE_WITHIN_SECONDS
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = marked(marker)
    try:
        assert not left, [cmdline(Path(f"/proc/{pid}")) for pid in left]
        while not port_bindable(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert port_bindable(port), f"port {port} is still held"
    finally:
        for pid in marked(marker):  # this run's own processes only (they carry its marker)
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_killed_flow_command_takes_its_temporary_prefect_server_with_it(
        tmp_path: Path, prefect_home: Path, killed_after: list[subprocess.Popen[bytes]]) -> None:
    """``newsroom cycle`` with no Prefect API configured runs a temporary Prefect server as a child."""
    marker, env = _marked_env(tmp_path, PREFECT_HOME=str(prefect_home))
    cycle = subprocess.Popen([*NEWSROOM, "cycle"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    killed_after.append(cycle)

    def server() -> int | None:
        return next((pid for pid in descendants(cycle.pid)
                     if b"prefect.server.api.server:create_app" in cmdline(Path(f"/proc/{pid}"))), None)

    _wait(lambda: server() is not None or cycle.poll() is not None, 120, "no Prefect server was started")
    found = server()
    assert found is not None, "the cycle ended before its Prefect server was seen"
    cycle.send_signal(signal.SIGSTOP)  # frozen until the SIGKILL: it cannot finish (and stop the server) first
    port = _port_of(found)
    _wait(lambda: _answers_http(port, "/api/health"), 120, "the Prefect server never answered")
    below = descendants(cycle.pid)
    assert found in below and all(marker.encode() in (Path(f"/proc/{p}") / "environ").read_bytes() for p in below)

    cycle.kill()
    cycle.wait()
    _assert_nothing_left(marker, port)


@pytest.mark.slow
def test_a_killed_serve_takes_the_api_server_with_it(tmp_path: Path,
                                                     killed_after: list[subprocess.Popen[bytes]]) -> None:
    port = free_port()
    marker, env = _marked_env(tmp_path, NEWSROOM_SERVING_HMAC_KEY="s" * 40,
                              NEWSROOM_SERVING_PROFILES_PATH=str(tmp_path / "profiles.sqlite3"))
    serve = subprocess.Popen([*NEWSROOM, "serve", "--host", "127.0.0.1", "--port", str(port)], cwd=tmp_path,
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed_after.append(serve)
    _wait(lambda: answers(port) or serve.poll() is not None, 60, "serve never answered")
    assert serve.poll() is None and descendants(serve.pid)

    serve.kill()
    serve.wait()
    _assert_nothing_left(marker, port)


POOL_SCRIPT = """
import os, sys, time, multiprocessing
from concurrent.futures import ProcessPoolExecutor
from tasks.runners import ingest_task_runner
from tasks.settings import ScaleSettings

def nap(_):
    open(f"started-{os.getpid()}", "w").close()  # past the initializer: the worker is at work
    time.sleep(600)

if __name__ == "__main__":
    runner = ingest_task_runner(ScaleSettings(ingest_processes=2))
    # The pool the runner opens, with the runner's own initializer for its workers.
    pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"),
                               initializer=runner._initializer)
    futures = [pool.submit(nap, i) for i in range(2)]
    print("submitted", flush=True)
    time.sleep(600)
"""


def test_a_killed_flow_process_takes_its_ingest_workers_with_it(tmp_path: Path,
                                                               killed_after: list[subprocess.Popen[bytes]]) -> None:
    """``NEWSROOM_SCALE_INGEST_PROCESSES``: the fetch fan-out's worker processes (and
    multiprocessing's resource tracker) go when the flow's process is killed mid-fetch. (A worker
    still starting notices once its start-up is done: the initializer runs after it.)"""
    script = tmp_path / "pool.py"
    script.write_text(POOL_SCRIPT)
    marker, env = _marked_env(tmp_path)
    flow = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    killed_after.append(flow)
    assert flow.stdout is not None
    assert flow.stdout.readline() == b"submitted\n", flow.stdout.read()

    def workers() -> list[int]:
        return [p for p in descendants(flow.pid) if b"spawn_main" in cmdline(Path(f"/proc/{p}"))]

    _wait(lambda: len(workers()) == 2 and len(list(tmp_path.glob("started-*"))) == 2, 60,
          "the pool's two workers never started")
    flow.kill()
    flow.wait()
    deadline = time.monotonic() + GONE_WITHIN_SECONDS
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = marked(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, [cmdline(Path(f"/proc/{pid}")) for pid in left]


def _answers_http(port: int, path: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False
