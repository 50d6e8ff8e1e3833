"""``newsroom demo`` fails fast on a busy port and takes its children down on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from corpus_paths import CORPUS

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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_sigterm_stops_the_replay_site_too(tmp_path: Path) -> None:
    demo = subprocess.Popen(
        [*NEWSROOM, "demo", "--cycles", "30", "--limit", "60", "--no-serve", "--store", str(tmp_path / "store"),
         "--corpus", str(CORPUS / "clustering" / "ecbplus-dev.jsonl")],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
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
                          and b"replay" in _cmdline(p) and int(p.name) != demo.pid and _ppid(p) == demo.pid)
        demo.send_signal(signal.SIGTERM)
        demo.wait(timeout=60)
        deadline = time.monotonic() + 15
        while _alive(replay_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(replay_pid), "the replay site outlived the demo"
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def _ppid(proc: Path) -> int:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n")
            return conn.recv(12).startswith(b"HTTP/1.")
    except OSError:
        return False


@pytest.mark.slow
def test_serve_listens_where_the_settings_say_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    # The port comes from the settings file, as for any deployment; no --port is passed.
    (tmp_path / ".env").write_text(f"NEWSROOM_SERVING_PORT={port}\nNEWSROOM_SERVING_HMAC_KEY={'s' * 40}\n"
                                   f"NEWSROOM_WAREHOUSE_ROOT={tmp_path / 'store'}\n")
    serve = subprocess.Popen([*NEWSROOM, "serve"], cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _answers(port):
            assert serve.poll() is None and time.monotonic() < deadline, "serve never answered"
            time.sleep(0.2)
        server_pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == serve.pid]
        assert server_pids
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0
        deadline = time.monotonic() + 15
        while any(_alive(pid) for pid in server_pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in server_pids), "the API server outlived `newsroom serve`"
        assert not _answers(port)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
