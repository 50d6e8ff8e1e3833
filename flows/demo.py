"""``newsroom demo``, live (issue 18): the reader page is served as soon as the first cycle has published.

Four child processes start at once, each tied to this one by :mod:`flows.lifeline` (the kernel
kills them if this process dies, SIGKILL included) and each in a session of its own (so a
terminal's Ctrl-C reaches only this process, which stops them in order):

- the temporary Prefect server (uvicorn over Prefect's app, on a free loopback port);
- the replay publisher site (the recorded corpora as feeds and pages on 127.0.1.x);
- the pipeline (:mod:`flows.demo_pipeline`): registers the replay publishers, loads its models
  while the Prefect server starts, then runs the cycles under Prefect, moving the replay clock one
  step per cycle, and reports each cycle here on a pipe;
- the API and reader page (``python -m serving``), up from the start, refreshing its pointers
  every second, so the first page is served about a second after the first cycle publishes it.

This process only supervises and reports: it never imports Prefect or the pipeline, and it never
blocks for long, so Ctrl-C, SIGTERM or SIGHUP stop everything within a few seconds in every phase
(SIGTERM to each child's process group, then SIGKILL to whatever is left after
``CHILD_GRACE_SECONDS``). Progress goes to the terminal with rich (a spinner for what is running,
one line per finished step); when standard output is not a terminal it is plain lines.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO

from flows import lifeline
from flows.demo_pipeline import PipelineEvent
from flows.errors import ChildFailed
from flows.prefect_server import free_port, prefect_server_args

CHILD_GRACE_SECONDS = 3.0
"""How long children get to stop on SIGTERM before SIGKILL (the demo's stop stays under 5 s)."""
POLL_SECONDS = 0.2
PREFECT_START_TIMEOUT_SECONDS = 300.0
REPLAY_START_TIMEOUT_SECONDS = 120.0
SERVING_REFRESH_SECONDS = "1"
PREFERRED_EDITION = "en-US"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _DemoStopped(Exception):  # noqa: N818 - a request to stop, not an error
    """A stop signal reached the demo (this module's own control flow; never leaves it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stop(signum: int, frame: object) -> None:
    for sig in STOP_SIGNALS:  # a second signal must not interrupt the stop that this one starts
        signal.signal(sig, signal.SIG_IGN)
    raise _DemoStopped(signum)


def _http_status(url: str, timeout: float = 1.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback only)
            return int(response.status), response.read()
    except urllib.error.HTTPError as e:
        return int(e.code), b""
    except OSError:
        return 0, b""


# ---- children -------------------------------------------------------------------------------


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log: Path


@dataclass
class Supervisor:
    """Child processes tied to this one; :meth:`stop_all` takes them all down, each with its group."""

    log_dir: Path
    children: list[Child] = field(default_factory=list)

    def start(self, name: str, module: str, args: Sequence[str], env: dict[str, str], *,
              capture_stdout: bool = False, pass_fds: Sequence[int] = ()) -> Child:
        """Start ``python -m module args`` through :mod:`flows.lifeline`, logging to ``<name>.log``.

        Called from the main thread only: the kernel's parent-death signal follows the thread that
        forked the child, and the main thread lives as long as the demo.
        """
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{name}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                lifeline.command(module, *args), env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if capture_stdout else sink, stderr=sink,
                start_new_session=True, pass_fds=tuple(pass_fds),
            )
        child = Child(name, process, log)
        self.children.append(child)
        return child

    def check(self) -> None:
        """Raise :class:`ChildFailed` naming the first child that has exited."""
        for child in self.children:
            code = child.process.poll()
            if code is not None:
                raise ChildFailed(f"the {child.name} process exited with status {code}; its log: {child.log}\n"
                                  + _tail(child.log))

    def stop_all(self, grace_seconds: float = CHILD_GRACE_SECONDS) -> float:
        """SIGTERM every child's process group, SIGKILL what is left after ``grace_seconds``.

        Returns the seconds it took until every child had exited.
        """
        began = time.monotonic()
        for child in self.children:
            _signal_group(child.process, signal.SIGTERM)
        deadline = began + grace_seconds
        while time.monotonic() < deadline and any(c.process.poll() is None for c in self.children):
            time.sleep(0.05)
        for child in self.children:
            _signal_group(child.process, signal.SIGKILL)  # its group too: nothing it started stays
            try:
                child.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        return time.monotonic() - began


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\n".join(f"    {line}" for line in text)


# ---- progress on the terminal ----------------------------------------------------------------


class Display:
    """Plain lines: what a log or a CI run shows (standard output is not a terminal)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.started = time.monotonic()

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.started:5.1f} s"

    def line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def step(self, label: str, detail: str) -> None:
        """A finished step: what it was, what it gave, when."""
        self.line(f"  {self.elapsed()}  {label:<22} {detail}")

    def activity(self, text: str) -> None:
        """What is running now (a spinner on a terminal; nothing in a log)."""

    def tick(self) -> None:
        """Redraw the spinner's elapsed time (a terminal only)."""

    def serving(self, lines: Sequence[tuple[str, str]]) -> None:
        for label, value in lines:
            self.line(f"  {'':>7}  {label:<22} {value}")

    def error(self, text: str) -> None:
        self.line(f"  {self.elapsed()}  error: {text}")

    def close(self) -> None:
        pass


class RichDisplay(Display):
    """On a terminal: the same lines, coloured, under a live spinner naming what is running."""

    def __init__(self, stream: IO[str]) -> None:
        super().__init__(stream)
        from rich.console import Console
        from rich.live import Live
        from rich.spinner import Spinner

        self.console = Console(file=stream, highlight=False)
        self.spinner = Spinner("dots", text="starting")
        self.live = Live(self.spinner, console=self.console, refresh_per_second=8, transient=True)
        self.live.start()
        self._activity = "starting"

    def line(self, text: str) -> None:
        self.console.print(text, markup=False)

    def step(self, label: str, detail: str) -> None:
        self.console.print(f"  [dim]{self.elapsed()}[/dim]  [green]✓[/green] [bold]{label:<20}[/bold] {detail}",
                           markup=True, soft_wrap=True)

    def activity(self, text: str) -> None:
        self._activity = text
        self.tick()

    def tick(self) -> None:
        self.spinner.update(text=f"{self._activity}  [dim]({self.elapsed().strip()})[/dim]")

    def serving(self, lines: Sequence[tuple[str, str]]) -> None:
        for label, value in lines:
            self.console.print(f"  {'':>7}  [cyan]➜[/cyan] [bold]{label:<20}[/bold] [underline]{value}[/underline]"
                               if value.startswith("http") else f"  {'':>7}    {label:<20} {value}",
                               markup=True, soft_wrap=True)

    def error(self, text: str) -> None:
        self.console.print(f"  [dim]{self.elapsed()}[/dim]  [red]error:[/red] {text}", markup=True)

    def close(self) -> None:
        self.live.stop()


def make_display(stream: IO[str] | None = None) -> Display:
    stream = stream or sys.stdout
    return RichDisplay(stream) if stream.isatty() and os.environ.get("TERM") != "dumb" else Display(stream)


# ---- the demo -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LiveDemoPlan:
    corpora: list[Path]
    store_dir: Path
    start: datetime
    cycles: int
    step_minutes: int
    seed: int
    limit: int | None
    host: str
    port: int
    prefect_ui: bool


def _base_env(plan: LiveDemoPlan) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "NEWSROOM_WAREHOUSE_ROOT": str(plan.store_dir),
        "NEWSROOM_INGEST_ALLOW_PRIVATE_ADDRESSES": "true",  # the replay site is on loopback
        "NEWSROOM_SERVING_SOURCES_ALLOW_PRIVATE_ADDRESSES": "true",  # and so are the sources a reader may suggest
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PYTHONUNBUFFERED": "1",
    })
    env.setdefault("PREFECT_HOME", str((plan.store_dir.parent / "prefect").resolve()))
    env.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    return env


class _Events:
    """JSON lines from the pipeline, read without blocking."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.closed = False

    def read(self) -> list[PipelineEvent]:
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        if not chunk:
            self.closed = True
            return []
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]


def _cycle_detail(event: PipelineEvent) -> str:
    return (f"{event['now'][11:16]}Z  {event['new_articles']} new articles, {event['stories']} stories, "
            f"{event['published']}/{event['pages']} pages published  ({event['seconds']:.1f} s)")


def run_live_demo(plan: LiveDemoPlan, display: Display | None = None) -> int:
    """Run the live demo until a stop signal; returns the exit status (0 after a stop signal)."""
    display = display or make_display()
    previous = {sig: signal.signal(sig, _raise_stop) for sig in STOP_SIGNALS}
    supervisor = Supervisor(plan.store_dir.parent / "logs")
    status, why = 0, "stopped"
    try:
        status = _run(plan, display, supervisor)
    except _DemoStopped as stop:
        why = str(stop)
    except ChildFailed as e:
        display.error(str(e))
        status, why = 1, "a process failed"
    finally:
        for sig in STOP_SIGNALS:  # nothing interrupts the stop itself
            signal.signal(sig, signal.SIG_IGN)
        seconds = supervisor.stop_all()
        display.close()
        display.line(f"newsroom demo: stopped every process in {seconds:.1f} s ({why})")
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status


def _run(plan: LiveDemoPlan, display: Display, supervisor: Supervisor) -> int:
    env = _base_env(plan)
    plan.store_dir.mkdir(parents=True, exist_ok=True)
    names = ", ".join(c.name for c in plan.corpora)
    display.line(f"newsroom demo: the recorded corpora ({names}) replayed as publishers on loopback, "
                 f"{plan.cycles} pipeline cycles {plan.step_minutes} simulated minutes apart, served live")
    prefect_port = free_port()
    prefect_api = f"http://127.0.0.1:{prefect_port}/api"
    replay, api_env = _start_services(plan, supervisor, env, prefect_port, prefect_api)
    display.activity("starting the replay site, the Prefect server and the API")
    control_url, publishers = _await_replay(replay, supervisor, display)
    pipeline_env = {**env, "PREFECT_API_URL": prefect_api,
                    **{k: v for k, v in api_env.items() if k.startswith("NEWSROOM_SERVING_PROFILES")}}
    events_read = _start_pipeline(plan, supervisor, pipeline_env, control_url)
    display.step("replay publishers", f"{publishers} publishers on 127.0.1.x; clock and control at {control_url}")
    return _follow(plan, display, supervisor, _Events(events_read), prefect_port, prefect_api)


def _start_services(plan: LiveDemoPlan, supervisor: Supervisor, env: dict[str, str], prefect_port: int,
                    prefect_api: str) -> tuple[Child, dict[str, str]]:
    """Start the Prefect server, the replay site and the API; the replay child and the API's environment."""
    server_env = {**env, "PREFECT_SERVER_UI_ENABLED": str(plan.prefect_ui).lower(),
                  "PREFECT_UI_ENABLED": str(plan.prefect_ui).lower(), "PREFECT_SERVER_UI_API_URL": prefect_api}
    if not plan.prefect_ui:
        server_env["PREFECT__SERVER_EPHEMERAL"] = "1"  # fewer background services; no UI
    supervisor.start("prefect-server", "uvicorn", prefect_server_args(prefect_port), server_env)

    replay_args = ["--port", "0", "--seed", str(plan.seed), "--start", plan.start.strftime("%Y-%m-%dT%H:%M:%SZ")]
    for corpus in plan.corpora:
        replay_args += ["--corpus", str(corpus)]
    if plan.limit:
        replay_args += ["--limit", str(plan.limit)]
    replay = supervisor.start("replay", "replay", replay_args, env, capture_stdout=True)

    api_env = {**env, "NEWSROOM_SERVING_REFRESH_SECONDS": SERVING_REFRESH_SECONDS}
    api_env.setdefault("NEWSROOM_SERVING_HMAC_KEY", secrets.token_urlsafe(32))  # signs this run's sessions
    api_env.setdefault("NEWSROOM_SERVING_PROFILES_PATH", str(plan.store_dir.parent / "profiles.sqlite3"))
    supervisor.start("api", "serving", ["--host", plan.host, "--port", str(plan.port), "--log-level", "warning"],
                     api_env)
    return replay, api_env


def _start_pipeline(plan: LiveDemoPlan, supervisor: Supervisor, pipeline_env: dict[str, str], control_url: str) -> int:
    """Start the pipeline process (``flows.demo_pipeline``); the read end of the pipe its events come on."""
    events_read, events_write = os.pipe()
    os.set_blocking(events_read, False)
    supervisor.start("pipeline", "flows.demo_pipeline", [
        "--events-fd", str(events_write), "--control-url", control_url,
        "--start", plan.start.strftime("%Y-%m-%dT%H:%M:%SZ"), "--step-minutes", str(plan.step_minutes),
        "--cycles", str(plan.cycles), "--csv", str(plan.store_dir.parent / "replay-publishers.csv"),
    ], pipeline_env, pass_fds=(events_write,))
    os.close(events_write)
    return events_read


@dataclass(slots=True)
class _Progress:
    """What the demo has shown so far: the cycle running, the page served, whether Prefect answered."""

    prefect_ready: bool = False
    current_cycle: int = 0
    """The cycle running now; 0 before the pipeline is ready and after the last one."""
    served: str | None = None
    waiting_for_page: bool = False
    next_poll: float = 0.0

    def show_event(self, event: PipelineEvent, display: Display, supervisor: Supervisor) -> None:
        """One line for a pipeline event; a cycle that published makes the demo look for the first page."""
        kind = event["event"]
        if kind == "registered":
            display.step("publishers registered", f"{event['publishers']} publishers, {event['feeds']} feeds")
        elif kind == "ready":
            self.current_cycle = 1
            display.step("pipeline ready", f"models loaded, Prefect API answering ({event['seconds']:.1f} s "
                         "after its start)")
        elif kind in ("cycle", "cycle_failed"):
            label = f"cycle {event['cycle']:>2}/{event['cycles']}"
            if kind == "cycle":
                display.step(label, _cycle_detail(event))
                self.waiting_for_page = self.waiting_for_page or (self.served is None and event["published"] > 0)
            else:
                display.error(f"{label} failed: {event['error']} (see {supervisor.log_dir}/pipeline.log)")
            self.current_cycle = event["cycle"] + 1 if event["cycle"] < event["cycles"] else 0
        elif kind == "done":
            self.current_cycle = 0
            display.step("all cycles done", "serving until Ctrl-C; the profiles flow folds readers' "
                         "clicks every minute, the health flow refreshes the dashboards")

    def look(self, plan: LiveDemoPlan, display: Display, prefect_port: int, prefect_api: str, base: str) -> None:
        """Every half second: whether the Prefect server answers yet, whether the first page is served."""
        now = time.monotonic()
        if now < self.next_poll:
            return
        self.next_poll = now + 0.5
        if not self.prefect_ready and _http_status(f"{prefect_api}/health", 0.5)[0] == 200:
            self.prefect_ready = True
            where = (f"http://127.0.0.1:{prefect_port}/ (its UI: runs, artifacts, dashboards)"
                     if plan.prefect_ui else prefect_api)
            display.step("Prefect server", f"{where}, temporary")
        if self.waiting_for_page:
            page = _first_page(base)
            if page is not None:
                self.served, stories = page
                self.waiting_for_page = False
                display.serving([
                    ("reader page", f"{base}/"),
                    ("edition API", f"{base}/v1/editions/{self.served}/top"),
                    ("", f"{stories} stories on {self.served}/top now; the cycles go on behind it, so the page "
                         "fills and changes. Ctrl-C stops everything."),
                ])


def _follow(plan: LiveDemoPlan, display: Display, supervisor: Supervisor, events: _Events, prefect_port: int,
            prefect_api: str) -> int:
    """Show the pipeline's progress and the processes' health until a stop signal ends the demo."""
    selector = selectors.DefaultSelector()
    selector.register(events.fd, selectors.EVENT_READ)
    base = f"http://{plan.host}:{plan.port}"
    progress = _Progress()
    display.activity("loading the pipeline and its models; the Prefect server is starting (cold start)")
    while True:
        for _ in selector.select(timeout=POLL_SECONDS):
            for event in events.read():
                progress.show_event(event, display, supervisor)
            if events.closed:
                selector.unregister(events.fd)
                os.close(events.fd)
        supervisor.check()
        progress.look(plan, display, prefect_port, prefect_api, base)
        if progress.current_cycle:
            display.activity(f"cycle {progress.current_cycle}/{plan.cycles}: ingest, cluster, repair, rank"
                             + ("" if progress.served else " (the reader page opens once it has published)"))
        elif progress.served:
            display.activity(f"serving {base}/  (Ctrl-C stops)")
        display.tick()


def _await_replay(replay: Child, supervisor: Supervisor, display: Display) -> tuple[str, str]:
    """The replay site's control URL and publisher count, from its first line
    (``replay listening control=... publishers=N``)."""
    assert replay.process.stdout is not None
    fd = replay.process.stdout.fileno()
    os.set_blocking(fd, False)
    buffer = b""
    deadline = time.monotonic() + REPLAY_START_TIMEOUT_SECONDS
    while b"\n" not in buffer:
        if time.monotonic() > deadline:
            raise ChildFailed(f"the replay site did not start within {REPLAY_START_TIMEOUT_SECONDS:.0f} s")
        supervisor.check()
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            chunk = b""
            time.sleep(POLL_SECONDS)
            display.tick()
        buffer += chunk
    line = buffer.split(b"\n", 1)[0].decode("utf-8", "replace")
    fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
    if "control" not in fields:
        raise ChildFailed(f"the replay site did not start: {line!r}")
    return fields["control"], fields.get("publishers", "?")


def _first_page(base: str) -> tuple[str, int] | None:
    """The edition whose top page the API serves (``en-US`` when it has one), and its story count."""
    status, body = _http_status(f"{base}/v1/editions", 0.5)
    if status != 200:
        return None
    editions = [e["edition"] for e in json.loads(body) if "top" in e.get("sections", [])]
    if not editions:
        return None
    edition = PREFERRED_EDITION if PREFERRED_EDITION in editions else editions[0]
    status, body = _http_status(f"{base}/v1/editions/{edition}/top", 0.5)
    if status != 200:
        return None
    return edition, len(json.loads(body).get("stories", []))
