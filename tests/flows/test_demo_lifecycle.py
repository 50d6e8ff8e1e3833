"""``newsroom demo`` fails fast on a busy port, and no process of it outlives it, however it ends.

The live demo (issue 18) is signalled in each phase (cold start, first cycle, serving) with each
of SIGINT, SIGTERM, SIGHUP and SIGKILL; afterwards no process that carries the run's marker in its
environment may be left, and the API port must be free. The stop times are printed
(``stop-time ...`` lines, ``pytest -s``), never asserted.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from corpus_paths import CORPUS
from processes import alive, answers, cmdline, free_port, marked, port_bindable, ppid

REPO = Path(__file__).resolve().parents[2]
NEWSROOM = [sys.executable, "-m", "flows.cli"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PREFECT_LOGGING_LEVEL": "WARNING"}


def test_a_busy_port_fails_before_any_work(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = subprocess.run([*NEWSROOM, "demo", "--port", str(port), "--store", str(tmp_path / "store")],
                                cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert f"127.0.0.1:{port} is in use" in result.stderr
    assert "[1/4]" not in result.stdout  # no replay site started, no cycle run
    assert not (tmp_path / "store").exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_the_batch_demo_takes_the_replay_site_with_it(tmp_path: Path, sig: signal.Signals) -> None:
    """And its temporary Prefect server, and anything else it started (issue 32)."""
    marker = f"batch-demo-{uuid.uuid4().hex}"
    env = {key: value for key, value in _env().items() if key != "PREFECT_API_URL"}
    demo = subprocess.Popen(
        [*NEWSROOM, "demo", "--cycles", "30", "--limit", "60", "--no-serve", "--store", str(tmp_path / "store"),
         "--corpus", str(CORPUS / "clustering" / "ecbplus-dev.jsonl")],
        cwd=tmp_path, env={**env, "NEWSROOM_TEST_RUN": marker}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )
    assert demo.stdout is not None
    try:
        lines = []
        while not any("replay listening" in line for line in lines):
            line = demo.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        # The replay site's pid: the only child process whose command line runs `-m replay`.
        replay_pid = next(int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
                          and b"replay" in cmdline(p) and int(p.name) != demo.pid and ppid(p) == demo.pid)
        demo.send_signal(sig)
        demo.wait(timeout=60)
        deadline = time.monotonic() + 30
        while alive(replay_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(replay_pid), "the replay site outlived the demo"
        while marked(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not marked(marker), [cmdline(Path(f"/proc/{pid}")) for pid in marked(marker)]
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        for pid in marked(marker):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_serve_listens_where_the_settings_say_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    # The port comes from the settings file, as for any deployment; no --port is passed.
    (tmp_path / ".env").write_text(f"NEWSROOM_SERVING_PORT={port}\nNEWSROOM_SERVING_HMAC_KEY={'s' * 40}\n"
                                   f"NEWSROOM_WAREHOUSE_ROOT={tmp_path / 'store'}\n")
    serve = subprocess.Popen([*NEWSROOM, "serve"], cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not answers(port):
            assert serve.poll() is None and time.monotonic() < deadline, "serve never answered"
            time.sleep(0.2)
        server_pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and ppid(p) == serve.pid]
        assert server_pids
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0
        deadline = time.monotonic() + 15
        while any(alive(pid) for pid in server_pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(pid) for pid in server_pids), "the API server outlived `newsroom serve`"
        assert not answers(port)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()


# ---- the live demo: every phase, every signal --------------------------------------------------

PHASES = {
    # what the demo has printed when the signal is sent
    "cold-start": "replay publishers",  # children started; the Prefect server is still starting
    "first-cycle": "pipeline ready",  # the first cycle runs; nothing is served yet
    "serving": "reader page",  # the page is served; the cycles go on behind it
}
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL]


@pytest.fixture(scope="module")
def prefect_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Prefect home for every run: the first run's server migrates its database, the rest reuse it."""
    return tmp_path_factory.mktemp("prefect-home")


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("sig", SIGNALS, ids=[s.name for s in SIGNALS])
@pytest.mark.parametrize("phase", list(PHASES))
def test_no_process_of_the_live_demo_outlives_it(tmp_path: Path, prefect_home: Path, phase: str,
                                                  sig: signal.Signals) -> None:
    port = free_port()
    marker = f"NEWSROOM_TEST_RUN=demo-{uuid.uuid4().hex}"
    env = {**_env(), "PREFECT_HOME": str(prefect_home), marker.split("=")[0]: marker.split("=")[1]}
    demo = subprocess.Popen(
        [*NEWSROOM, "demo", "--cycles", "3", "--step-minutes", "60", "--limit", "80", "--port", str(port),
         "--store", str(tmp_path / "var" / "store"), "--no-prefect-ui",
         "--corpus", str(CORPUS / "clustering" / "ecbplus-dev.jsonl")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    assert demo.stdout is not None
    os.set_blocking(demo.stdout.fileno(), False)
    output = b""
    try:
        deadline = time.monotonic() + 900
        while PHASES[phase].encode() not in output:
            assert demo.poll() is None, output.decode(errors="replace")
            assert time.monotonic() < deadline, f"never reached {phase}:\n{output.decode(errors='replace')}"
            time.sleep(0.1)
            output += demo.stdout.read() or b""
        if phase == "serving":
            status = _http_status(f"http://127.0.0.1:{port}/v1/editions/en-US/top")
            assert status == 200, output.decode(errors="replace")
        running = marked(marker)
        assert len(running) >= 5, running  # the demo, the Prefect server, the replay site, the pipeline, the API

        sent = time.monotonic()
        demo.send_signal(sig)
        demo.wait(timeout=120)
        exited = time.monotonic() - sent
        deadline = time.monotonic() + 60
        while marked(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        all_gone = time.monotonic() - sent
        left = marked(marker)
        print(f"stop-time phase={phase} signal={sig.name} demo_exit_s={exited:.2f} all_gone_s={all_gone:.2f}")
        assert not left, [cmdline(Path(f"/proc/{pid}")) for pid in left]
        # A process on its way out has no readable environment any more but may still be closing
        # its sockets: the port is polled too.
        while not port_bindable(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert port_bindable(port), "the API port is still held"
        if sig != signal.SIGKILL:
            assert demo.returncode == 0
            assert b"stopped every process" in output + (demo.stdout.read() or b"")
    finally:
        for pid in marked(marker):
            os.kill(pid, signal.SIGKILL)
        if demo.poll() is None:
            demo.kill()
            demo.wait()


def _http_status(url: str) -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return 0
