"""The temporary Prefect server a command runs its flows against, tied to the command's life.

With no ``PREFECT_API_URL``, Prefect starts a temporary server of its own at the first flow run (a
``uvicorn`` child process, about 225 MB) and stops it from an ``atexit`` hook. A command killed
with SIGKILL (or by the OOM killer) runs no hook, and the server lived on holding its port: four
kills of ``newsroom cycle`` left four (issue 32). So the commands that run flows (``newsroom
ingest``/``cluster``/``repair``/``rank``/``cycle``, ``newsroom demo --no-serve``) start the same
server themselves, through :mod:`flows.lifeline` (the kernel kills it when the command dies,
however it dies), point this process at it, and stop it when they finish. ``newsroom demo`` starts
its own the same way. A configured ``PREFECT_API_URL`` (a real server) is used as it is.

This module imports Prefect only to read its settings, after the command set its defaults.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from flows import lifeline
from flows.errors import ChildFailed

STOP_GRACE_SECONDS = 10.0
"""How long the server gets to stop on SIGTERM before SIGKILL."""
_PORT_IN_USE = 3
"""uvicorn's exit status when it cannot bind its port (another process took it after we probed)."""
_START_ATTEMPTS = 3


def prefect_server_args(port: int) -> list[str]:
    """uvicorn's arguments for Prefect's server app on ``127.0.0.1:port`` (as Prefect runs its own)."""
    import importlib.util

    spec = importlib.util.find_spec("prefect")
    app_dir = Path(spec.origin).parent.parent if spec and spec.origin else Path(".")
    return ["--app-dir", str(app_dir), "--factory", "prefect.server.api.server:create_app",
            "--host", "127.0.0.1", "--port", str(port), "--log-level", "error", "--lifespan", "on"]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct free ports: every probe stays bound until all are chosen (probed one at
    a time, the same port can come back twice and two servers then race for it)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind((host, 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def _is_healthy(api_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=2) as response:  # noqa: S310 (loopback only)
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def stop_process_group(process: subprocess.Popen[Any], grace_seconds: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM a child started in its own session and everything it started; SIGKILL what is left
    after ``grace_seconds``."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)
    except ProcessLookupError:
        pass


class TemporaryPrefectServer:
    """Prefect's server app on a free loopback port, started through :mod:`flows.lifeline`.

    Start it from the main thread (the kernel's parent-death signal follows the thread that forked
    the child, and the main thread lives as long as the command), do other work while it starts
    (a cold start takes about 25 s), then :meth:`wait_ready`; :meth:`stop` at the end. A port
    taken between the probe and the bind is tried again on another one.
    """

    def __init__(self, env: dict[str, str]) -> None:
        self._env = env
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._start()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def _start(self) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            lifeline.command("uvicorn", *prefect_server_args(self.port)), env=self._env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
        )

    def wait_ready(self, timeout_seconds: float) -> str:
        """Wait until the API answers; returns its URL.

        Raises:
            ChildFailed: The server exited, or did not answer within ``timeout_seconds``.
        """
        assert self.process is not None
        deadline = time.monotonic() + timeout_seconds
        attempts = 1
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code == _PORT_IN_USE and attempts < _START_ATTEMPTS:
                attempts += 1
                self._start()
                continue
            if code is not None:
                raise ChildFailed(f"the temporary Prefect server exited with status {code}")
            if _is_healthy(self.api_url):
                return self.api_url
            time.sleep(0.2)
        self.stop()
        raise ChildFailed(f"the temporary Prefect server did not answer within {timeout_seconds:.0f} s "
                          "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)")

    def stop(self) -> None:
        if self.process is not None:
            stop_process_group(self.process)


@contextmanager
def prefect_api() -> Iterator[Callable[[], None]]:
    """Flows run in this block talk to the configured Prefect API, or, when none is configured, to a
    temporary server started on entry and stopped on the way out (see the module doc).

    Yields ``ready``: call it before the first flow runs (after other work, since the server is
    starting meanwhile); it waits until the server answers and points Prefect at it, in this process
    and in the environment of the processes it starts. Nothing to wait for with a configured API.

    Raises:
        ChildFailed: From ``ready``: the server exited or did not answer in time
            (``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``).
    """
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    settings = get_current_settings()
    if settings.api.url:
        yield lambda: None
        return
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1",
           **settings.to_environment_variables(exclude_unset=True)}  # as Prefect starts its own
    timeout = float(settings.server.ephemeral.startup_timeout_seconds)
    server = TemporaryPrefectServer(env)
    previous = os.environ.get("PREFECT_API_URL")
    try:
        with ExitStack() as stack:
            def ready() -> None:
                url = server.wait_ready(timeout)
                os.environ["PREFECT_API_URL"] = url
                stack.enter_context(temporary_settings(updates={PREFECT_API_URL: url}))

            yield ready
    finally:
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous
        server.stop()
