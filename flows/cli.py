"""The ``newsroom`` command line.

One room for every command: each handler sits beside the arguments it reads (the parser is built
by group below), and imports its flows and tasks only when it runs, so ``newsroom --help`` and the
commands over files start without loading Prefect or the models.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from flows import lifeline
from flows.prefect_server import stop_process_group

if TYPE_CHECKING:
    from tasks.settings import PipelineSettings

DEFAULT_CORPORA = ("clustering/ecbplus-dev.jsonl", "clustering/mmds-dev.jsonl")
REPO_ROOT = Path(__file__).resolve().parents[1]


def _quiet_prefect_defaults() -> None:
    """Local runs talk to nobody but loopback, and give the temporary server time to start.

    Prefect's own settings, as defaults for this process and the server it starts (a user's
    values win); newsroom's settings are never written to the environment (issue 17).
    """
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def _say(message: str) -> None:
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def default_corpus_dir() -> Path:
    """``NEWSROOM_CORPUS_DIR``, else the ``shared/corpus`` folder beside the checkout."""
    configured = os.environ.get("NEWSROOM_CORPUS_DIR")
    return Path(configured) if configured else REPO_ROOT.parent / "shared" / "corpus"


class ReplayProcess:
    """The replay publisher site, run as a child process on loopback."""

    def __init__(self, corpora: list[Path], start: datetime, seed: int, limit: int | None) -> None:
        args = ["--port", "0", "--seed", str(seed), "--start", start.strftime("%Y-%m-%dT%H:%M:%SZ")]
        for corpus in corpora:
            args += ["--corpus", str(corpus)]
        if limit:
            args += ["--limit", str(limit)]
        # Tied to this process (flows.lifeline): it goes even if the demo is killed with SIGKILL.
        self.process = subprocess.Popen(lifeline.command("replay", *args), stdout=subprocess.PIPE, text=True,
                                        start_new_session=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if "control=" not in line:
            self.stop()
            raise SystemExit(f"replay site did not start: {line!r}")
        self.control_url = line.split("control=", 1)[1].split()[0]
        self.banner = line

    def stop(self) -> None:
        stop_process_group(self.process)


def serve_api(host: str | None, port: int | None) -> subprocess.Popen[bytes]:
    """``python -m serving`` in its own session, tied to this process (:mod:`flows.lifeline`: it goes
    even if ``newsroom serve`` is killed with SIGKILL, issue 32); a host or port left None comes from
    its settings. Call it from the main thread (the tie follows the thread that starts the child)."""
    args = ["--log-level", "warning"]
    args += ["--host", host] if host is not None else []
    args += ["--port", str(port)] if port is not None else []
    return subprocess.Popen(lifeline.command("serving", *args), start_new_session=True)


def _port_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now (so the API will not fail after the cycles)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def cmd_demo(args: argparse.Namespace) -> int:
    if not args.no_serve and not _port_free(args.host, args.port):
        raise SystemExit(f"{args.host}:{args.port} is in use: stop what holds it, or pass --port")
    corpus_dir = Path(args.corpus_dir) if args.corpus_dir else default_corpus_dir()
    corpora = [Path(c) for c in args.corpus] if args.corpus else [corpus_dir / c for c in DEFAULT_CORPORA]
    for corpus in corpora:
        if not corpus.exists():
            raise SystemExit(f"corpus not found: {corpus} (set NEWSROOM_CORPUS_DIR or pass --corpus)")
    store_dir = Path(args.store).resolve()
    if store_dir.exists() and not args.keep:
        shutil.rmtree(store_dir)
    step = timedelta(minutes=args.step_minutes)
    end = datetime.now(UTC).replace(second=0, microsecond=0)
    start = end - step * args.cycles
    if not args.no_serve:
        from flows.demo import LiveDemoPlan, run_live_demo

        return run_live_demo(LiveDemoPlan(
            corpora=corpora, store_dir=store_dir, start=start, cycles=args.cycles, step_minutes=args.step_minutes,
            seed=args.seed, limit=args.limit, host=args.host, port=args.port, prefect_ui=args.prefect_ui))
    return _batch_demo(args, corpora, store_dir, start, step)


def _batch_demo(args: argparse.Namespace, corpora: list[Path], store_dir: Path, start: datetime,
                step: timedelta) -> int:
    """``newsroom demo --no-serve``: every cycle in this process, one plain line each, then exit (tests
    and benchmarks)."""
    # A SIGTERM (a supervisor, `timeout`, `kill`) stops the demo like Ctrl-C: its children go too.
    signal.signal(signal.SIGTERM, _interrupt)
    _quiet_prefect_defaults()
    from flows.prefect_server import prefect_api
    from tasks.settings import use_settings

    with use_settings(demo_settings(store_dir)), prefect_api() as ready:
        return _batch_cycles(args, corpora, store_dir, start, step, ready)


def demo_settings(store_dir: Path) -> PipelineSettings:
    """The settings in effect plus the demo's own: its store, and fetches of the replay site on loopback."""
    from tasks.settings import current_settings

    return current_settings().with_store(str(store_dir)).with_private_addresses()


def _batch_cycles(args: argparse.Namespace, corpora: list[Path], store_dir: Path, start: datetime,
                  step: timedelta, prefect_ready: Callable[[], None]) -> int:
    from flows.cycle import pipeline_cycle
    from flows.demo_pipeline import cycle_counts
    from tasks.registry import import_publishers
    from tasks.replay_control import download_publishers_csv, set_replay_clock
    from tasks.storage import configured_store

    _say(f"[1/4] starting the replay publisher site ({', '.join(c.name for c in corpora)}) ...")
    replay = ReplayProcess(corpora, start, args.seed, args.limit)
    try:
        _say(f"      {replay.banner}")
        csv_path = store_dir.parent / "replay-publishers.csv"
        store_dir.mkdir(parents=True, exist_ok=True)
        registry = import_publishers(configured_store(),
                                     download_publishers_csv(replay.control_url, csv_path)).registry
        _say(f"[2/4] registered {len(registry.publishers)} publishers, {len(registry.feeds)} feeds")
        _say(f"[3/4] running {args.cycles} pipeline cycles under Prefect, {args.step_minutes} simulated minutes apart")
        prefect_ready()
        pages = 0  # in the last cycle's rank
        for i in range(1, args.cycles + 1):
            now = start + step * i
            set_replay_clock(replay.control_url, now)
            counts = cycle_counts(pipeline_cycle(now=now.isoformat()))
            pages = counts["pages"]
            _say(f"      cycle {i:>2}/{args.cycles} {now:%H:%M}Z  " + " ".join(f"{k}={v}" for k, v in counts.items()))
        if pages == 0:
            _say("no page was published")
            return 1
        _say(f"[4/4] pages written under {store_dir}/pages")
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        replay.stop()


RUN_DIR = Path("var/run")


def _prefect_env(port: int) -> dict[str, str]:
    home = Path("var/prefect").resolve()
    home.mkdir(parents=True, exist_ok=True)
    return {
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_UI_API_URL": f"http://127.0.0.1:{port}/api",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "NEWSROOM_HOME": str(Path.cwd().resolve() if (Path.cwd() / "prefect.yaml").exists() else REPO_ROOT),
    }


def _start_logged(name: str, cmd: list[str], env: dict[str, str]) -> int:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    log = (RUN_DIR / f"{name}.log").open("ab")
    process = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True, cwd=env.get("NEWSROOM_HOME"))
    (RUN_DIR / f"{name}.pid").write_text(str(process.pid))
    return process.pid


def _wait_http(url: str, seconds: float) -> bool:
    import urllib.request

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (loopback only)
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(0.5)
    return False


def cmd_up(args: argparse.Namespace) -> int:
    """Prefect server (UI), a process worker, every deployment, the API, the WebSub receiver when WebSub
    is enabled, and optionally the replay site."""
    from tasks.settings import current_settings

    env = _prefect_env(args.prefect_port)
    prefect = str(Path(sys.executable).with_name("prefect"))
    _say(f"starting the Prefect server on 127.0.0.1:{args.prefect_port} ...")
    _start_logged("prefect-server", [prefect, "server", "start", "--host", "127.0.0.1", "--port",
                                     str(args.prefect_port), "--analytics-off"], env)
    if not _wait_http(f"http://127.0.0.1:{args.prefect_port}/api/health", 120):
        _say(f"the Prefect server did not become healthy; see {RUN_DIR}/prefect-server.log")
        return 1
    if args.replay:
        env["NEWSROOM_INGEST_ALLOW_PRIVATE_ADDRESSES"] = "true"  # the worker's flows fetch the replay site
        env["NEWSROOM_SERVING_SOURCES_ALLOW_PRIVATE_ADDRESSES"] = "true"  # a reader may suggest a replay feed
        corpus = default_corpus_dir()
        start = datetime.now(UTC).replace(second=0, microsecond=0)
        cmd = [sys.executable, "-m", "replay", "--port", str(args.replay_port), "--seed", "7",
               "--start", start.strftime("%Y-%m-%dT%H:%M:%SZ"), "--speed", str(args.replay_speed)]
        for c in DEFAULT_CORPORA:
            cmd += ["--corpus", str(corpus / c)]
        _start_logged("replay", cmd, env)
        control = f"http://127.0.0.1:{args.replay_port}"
        if not _wait_http(f"{control}/_replay/clock", 30):
            _say(f"the replay site did not start; see {RUN_DIR}/replay.log")
            return 1
        from tasks.registry import import_publishers
        from tasks.replay_control import download_publishers_csv
        from tasks.storage import configured_store

        registry = import_publishers(configured_store(), download_publishers_csv(control, RUN_DIR / "replay.csv")).registry
        _say(f"replay publishers on {control} ({len(registry.publishers)} publishers, x{args.replay_speed} clock)")
    run = {**os.environ, **env}
    subprocess.run([prefect, "work-pool", "create", "newsroom", "--type", "process"], env=run,
                   capture_output=True, check=False)
    deployed = subprocess.run([prefect, "--no-prompt", "deploy", "--all"], env=run, cwd=env["NEWSROOM_HOME"],
                              capture_output=True, text=True, check=False)
    if deployed.returncode != 0:
        _say(deployed.stdout[-3000:] + deployed.stderr[-3000:])
        return 1
    _start_logged("prefect-worker", [prefect, "worker", "start", "--pool", "newsroom"], env)
    _start_long_running(env["PREFECT_API_URL"])
    websub = ""
    if current_settings().websub.enabled:
        # The receiver records pushes and tells Prefect (newsroom.feed.pushed), so the long-running
        # ingest polls a pushed feed at once (#31); it runs beside the flows, not as a deployment.
        _start_logged("websub", [sys.executable, "-m", "flows.cli", "websub"], env)
        websub = f"WebSub:      {current_settings().websub.callback_base_url} (receiver)\n"
    api_port = args.port
    _start_logged("api", [sys.executable, "-m", "serving", "--host", "127.0.0.1", "--port", str(api_port),
                          "--log-level", "warning"], env)
    _say(f"Prefect UI:  http://127.0.0.1:{args.prefect_port}/\nAPI:         http://127.0.0.1:{api_port}/v1/editions\n"
         f"Reader page: http://127.0.0.1:{api_port}/\n{websub}logs and pids in {RUN_DIR}/; stop with `newsroom down`")
    return 0


LONG_RUNNING = ("cluster_writer_service/cluster_writer_service-long-running",
                "ingest_service/ingest_service-long-running", "rank_service/rank_service-long-running")
"""Deployments whose runs last an hour: `newsroom up` starts one of each at once, since their hourly
schedule would start the first an hour after the deploy (each does nothing unless its setting picks it)."""


def _start_long_running(api_url: str) -> None:
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api_url}):
        for name in LONG_RUNNING:
            run_deployment(name, timeout=0, as_subflow=False)


def cmd_down(args: argparse.Namespace) -> int:
    """Stop what `newsroom up` started; the worker needs SIGINT to shut down cleanly."""
    stopped = []
    for name, sig in [("prefect-worker", signal.SIGINT), ("api", signal.SIGTERM), ("websub", signal.SIGTERM),
                      ("replay", signal.SIGTERM), ("prefect-server", signal.SIGTERM)]:
        pid_file = RUN_DIR / f"{name}.pid"
        if not pid_file.exists():
            continue
        pid = int(pid_file.read_text())
        try:
            os.killpg(pid, sig)
            for _ in range(60):
                os.killpg(pid, 0)
                time.sleep(0.5)
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        pid_file.unlink()
        stopped.append(name)
    _say(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    return 0


def _with_progress(run: Callable[..., int], source: Path, output: str, done: str) -> int:
    """``run(source, output, progress=...)`` with rich bars on a terminal, then the line ``done``
    (``{count}`` is what ``run`` returned) and where it went."""
    from tasks.progress import terminal_progress

    with terminal_progress() as progress:
        count = run(source, Path(output), progress=progress)
    _say(f"{done.format(count=count)} -> {output}")
    return 0


def cmd_cluster_eval(args: argparse.Namespace) -> int:
    from tasks.cluster_eval import run_cluster_eval

    return _with_progress(run_cluster_eval, Path(args.input), args.output, "clustered {count} articles")


def cmd_classify_sections(args: argparse.Namespace) -> int:
    from tasks.sections import classify_sections_file

    count = classify_sections_file(Path(args.input), Path(args.output))
    _say(f"classified {count} articles -> {args.output}")
    return 0


def cmd_extract(args: argparse.Namespace) -> int:
    from tasks.extract_pages import extract_directory

    return _with_progress(extract_directory, Path(args.input_dir), args.output, "extracted {count} pages")


def cmd_sql(args: argparse.Namespace) -> int:
    from tasks.sql import example_query, run_sql, write_views_file
    from tasks.storage import configured_store

    if args.views_file:
        count = write_views_file(configured_store(), Path(args.views_file))
        _say(f"newsroom sql: {count} views over the store in {args.views_file}; "
             f"open them with: duckdb -cmd \".read {args.views_file}\"")
        return 0
    return run_sql(configured_store(), example_query(args.example) if args.example else args.query, fmt=args.format)


def cmd_export(args: argparse.Namespace) -> int:
    from tasks.progress import terminal_progress
    from tasks.sql import export_tables
    from tasks.storage import configured_store

    with terminal_progress() as progress:
        counts = export_tables(configured_store(), args.date, Path(args.output), progress=progress)
    _say(" ".join(f"{name}={rows}" for name, rows in counts.items()) + f" -> {args.output}")
    return 0


def _err(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def cmd_publishers(args: argparse.Namespace) -> int:
    """``newsroom publishers import FILE [--skip-invalid]`` or ``export``: every invalid row is reported
    as ``FILE:LINE: why``; nothing is imported then unless ``--skip-invalid`` (exit 1 either way)."""
    from tasks.errors import RegistryImportError
    from tasks.registry import export_opml, import_publishers, load_registry
    from tasks.settings import get_ingest_settings
    from tasks.storage import configured_store

    if args.action == "import":
        try:
            result = import_publishers(configured_store(), Path(args.file), skip_invalid=args.skip_invalid,
                                       private_networks=get_ingest_settings().private_networks)
        except RegistryImportError as e:
            for error in e.errors:
                _err(f"{args.file}:{error.line}: {error.message}")
            _err(f"{args.file}: {len(e.errors)} invalid row(s); nothing imported (--skip-invalid imports the valid rows)")
            return 1
        except OSError as e:
            _err(f"{args.file}: cannot read: {e.strerror or e}")
            return 1
        for error in result.skipped:
            _err(f"{args.file}:{error.line}: skipped: {error.message}")
        _say(f"imported {result.imported_publishers} publishers, {result.imported_feeds} feeds"
             + (f" ({len(result.skipped)} invalid row(s) skipped)" if result.skipped else "")
             + f"; registry: {len(result.registry.publishers)} publishers, {len(result.registry.feeds)} feeds")
        return 1 if result.skipped else 0
    sys.stdout.write(export_opml(load_registry(configured_store())))
    return 0


def cmd_flow(args: argparse.Namespace) -> int:
    _quiet_prefect_defaults()
    from flows.prefect_server import prefect_api

    with prefect_api() as ready:  # a temporary server dies with this command, SIGKILL included (issue 32)
        from flows.cluster import cluster_stories  # imported while the server starts
        from flows.cycle import pipeline_cycle
        from flows.ingest import ingest_feeds
        from flows.rank import rank_and_publish
        from flows.repair import repair_stories

        flows: dict[str, Callable[..., object]] = {"ingest": ingest_feeds, "cluster": cluster_stories,
                                                   "repair": repair_stories, "rank": rank_and_publish,
                                                   "cycle": pipeline_cycle}
        flow = flows[args.command]
        ready()
        _say(str(flow(now=args.now)))
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    import json

    from tasks.clock import resolve_now
    from tasks.health import check_health, health_report
    from tasks.storage import configured_store

    report = health_report(check_health(configured_store(), resolve_now(args.now)))
    _say(json.dumps(report, indent=2))
    return 0 if report["healthy"] else 2


def cmd_doctor(args: argparse.Namespace) -> int:
    """``newsroom doctor [--repair]``: corrupt or missing objects, and what was (or would be) done.

    Exit 0: nothing wrong (or everything repaired); 1: something wrong is left; 2: the store could
    not be read (docs/store-faults.md).
    """
    import json

    from newsroom.errors import NewsroomError
    from tasks.clock import resolve_now
    from tasks.doctor import doctor_report, run_doctor
    from tasks.storage import configured_store

    try:
        entries = run_doctor(configured_store(), resolve_now(args.now), repair=args.repair)
    except NewsroomError as e:
        sys.stderr.write(f"newsroom doctor: the store could not be read: {e}\n")
        return 2
    report = doctor_report(entries)
    if args.json:
        _say(json.dumps(report, indent=2))
    else:
        for entry in entries:
            _say(f"{entry.kind:<16} {entry.key}\n{'':<16} {entry.problem}\n{'':<16} -> {entry.action}")
        left = sum(1 for entry in entries if not entry.repaired)
        _say(f"{len(entries)} damaged objects, {len(entries) - left} repaired" if entries else "no damaged objects")
    return 0 if report["clean"] else 1


def cmd_rank(args: argparse.Namespace) -> int:
    """``newsroom rank``: one cycle, or with ``--as-of`` a rebuild of the pages live then (issue 5)."""
    if not args.as_of:
        return cmd_flow(args)
    from tasks.clock import resolve_now
    from tasks.progress import terminal_progress
    from tasks.rank.rebuild import rebuild_as_of
    from tasks.settings import get_rank_settings
    from tasks.storage import configured_store

    output = Path(args.output) if args.output else None
    with terminal_progress() as progress:
        report = rebuild_as_of(configured_store(), resolve_now(args.as_of), get_rank_settings(), output,
                               progress=progress)
    for row in report:
        _say(f"{row['key']} as_of={row['as_of']} version={row['version']} "
             f"{'identical' if row['identical'] else 'DIFFERENT'} sha256={row['sha256'][:16]}")
    return 0 if report and all(r["identical"] for r in report) else 1


def cmd_explain(args: argparse.Namespace) -> int:
    """``newsroom explain STORY_ID [--edition E]``: the score parts, the representative's choice and
    the story's lineage (issue 18)."""
    import json

    from tasks.errors import StoryNotListedError
    from tasks.explain import explain_story, render_explanation
    from tasks.settings import get_rank_settings
    from tasks.storage import configured_store

    try:
        explanation = explain_story(configured_store(), args.story_id, args.edition, get_rank_settings())
    except StoryNotListedError as e:
        raise SystemExit(f"newsroom explain: {e}") from e
    if args.json:
        sys.stdout.write(json.dumps(explanation, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(render_explanation(explanation))
    return 0


def cmd_pages_rollback(args: argparse.Namespace) -> int:
    """``newsroom pages rollback EDITION SECTION VERSION``."""
    from newsroom.errors import NewsroomError
    from tasks.clock import resolve_now
    from tasks.rank.rebuild import rollback_pointer
    from tasks.storage import configured_store

    try:
        result = rollback_pointer(configured_store(), args.edition, args.section, args.version, resolve_now(None))
    except NewsroomError as e:  # no such version, or a damaged pointer (newsroom doctor --repair)
        sys.stderr.write(f"newsroom pages rollback: {e}\n")
        return 1
    _say(f"{args.edition}/{args.section}: {result.reason} (live version {result.version if result.published else '-'})")
    return 0 if result.published else 1


def cmd_serve(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _interrupt)  # a supervisor's stop takes the server down too
    api = serve_api(args.host, args.port)
    try:
        return api.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        stop_process_group(api)


def cmd_websub(args: argparse.Namespace) -> int:
    """``newsroom websub``: the WebSub callback receiver and publisher ping endpoint, as its own process (issue 3)."""
    import threading

    from tasks.settings import get_websub_settings
    from tasks.storage import configured_store
    from websub.receiver import ping_token, run_receiver

    try:
        settings = get_websub_settings()
        if args.print_ping_token:
            _say(ping_token(settings, args.print_ping_token))
            return 0
        settings.master_key()
    except ValueError as e:  # pydantic's ValidationError is a ValueError too
        raise SystemExit(f"newsroom websub: {e}") from e
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    host = args.host or settings.bind_host
    port = settings.bind_port if args.port is None else args.port
    run_receiver(configured_store(), settings, host, port, stop, on_ready=lambda url: _say(f"websub listening url={url}"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``newsroom`` parser: each command with its arguments and its handler (``func``)."""
    parser = argparse.ArgumentParser(prog="newsroom", description="A news aggregator as a micro-batch pipeline.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add_commands in (_add_demo_command, _add_file_commands, _add_store_commands, _add_flow_commands,
                         _add_page_commands, _add_operation_commands):
        add_commands(sub)
    return parser


def _add_demo_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``demo``: the live demo (or, ``--no-serve``, every cycle in this process)."""
    demo = sub.add_parser("demo", help="replay publishers -> flows -> pages -> API and reader page, served "
                                       "from the first published cycle on")
    demo.add_argument("--cycles", type=int, default=18, help="pipeline cycles to run (default 18)")
    demo.add_argument("--step-minutes", type=int, default=20, help="simulated minutes between cycles")
    demo.add_argument("--corpus", action="append", help="a JSONL corpus (repeatable; default: the dev corpora)")
    demo.add_argument("--corpus-dir", help="folder holding clustering/*.jsonl (default: ../shared/corpus)")
    demo.add_argument("--limit", type=int, default=None, help="take only this many corpus articles")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--store", default="var/demo/store", help="local store folder (wiped unless --keep)")
    demo.add_argument("--keep", action="store_true", help="keep the store from an earlier demo")
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=8000)
    demo.add_argument("--no-serve", action="store_true",
                      help="run every cycle in this process, then stop without serving (tests, benchmarks)")
    demo.add_argument("--no-prefect-ui", dest="prefect_ui", action="store_false",
                      help="run the temporary Prefect server without its UI (a few background services fewer)")
    demo.set_defaults(func=cmd_demo)


def _add_file_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Commands over files, with no store and no setting: ``cluster-eval``, ``classify-sections``, ``extract``."""
    ce = sub.add_parser("cluster-eval", help="run dedup + clustering over a JSONL file of articles")
    ce.add_argument("--input", required=True)
    ce.add_argument("--output", required=True)
    ce.set_defaults(func=cmd_cluster_eval)

    cs = sub.add_parser("classify-sections",
                        help="the section ingest gives each article of a JSONL file when its feed gives no hint")
    cs.add_argument("--input", required=True)
    cs.add_argument("--output", required=True)
    cs.set_defaults(func=cmd_classify_sections)

    ex = sub.add_parser("extract", help="extract every .html/.html.gz page in a folder")
    ex.add_argument("--input-dir", required=True)
    ex.add_argument("--output", required=True)
    ex.set_defaults(func=cmd_extract)


def _add_store_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Commands over the store's tables and registry: ``sql``, ``export``, ``publishers``."""
    sql = sub.add_parser("sql", help="DuckDB over every table")
    sql.add_argument("query", nargs="?", help="one query; none reads queries from standard input")
    sql.add_argument("--example", help="run a documented example query (see docs/queries.md)")
    sql.add_argument("--format", choices=("table", "csv", "jsonl"), default="table",
                     help="table for people (long values cut); csv or jsonl for other tools (whole values)")
    sql.add_argument("--views-file", default=None, metavar="PATH",
                     help="write a DuckDB script creating the same views over the store's files as they are "
                          "now, for your own DuckDB (.read PATH), instead of running a query")
    sql.set_defaults(func=cmd_sql)

    export = sub.add_parser("export", help="write one day's tables as Parquet")
    export.add_argument("--date", required=True, help="UTC day, YYYY-MM-DD")
    export.add_argument("--output", required=True, help="folder for the Parquet files")
    export.set_defaults(func=cmd_export)

    pubs = sub.add_parser("publishers", help="import (CSV/OPML) or export (OPML) the registry")
    pubs.add_argument("action", choices=["import", "export"])
    pubs.add_argument("file", nargs="?")
    pubs.add_argument("--skip-invalid", action="store_true",
                      help="import: import the valid rows even when some are invalid (they are listed; exit 1)")
    pubs.set_defaults(func=cmd_publishers)


def _add_flow_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """One run of a flow: ``ingest``, ``cluster``, ``repair``, ``rank`` (and ``rank --as-of``), ``cycle``."""
    for name, text in [("ingest", "one ingest cycle"), ("cluster", "one cluster cycle"),
                       ("repair", "one repair pass (merges and splits)"), ("rank", "one rank & publish cycle"),
                       ("cycle", "ingest, cluster, repair and rank once")]:
        p = sub.add_parser(name, help=text)
        p.add_argument("--now", default=None, help="ISO instant for the cycle (default: now)")
        p.set_defaults(func=cmd_flow)
        if name == "rank":
            p.add_argument("--as-of", default=None,
                           help="rebuild the pages live at this past instant from the logs; writes nothing to the store")
            p.add_argument("--output", default=None, help="with --as-of: a folder for the rebuilt page files")
            p.set_defaults(func=cmd_rank)


def _add_page_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Commands about the published pages: ``explain``, ``pages rollback``."""
    explain = sub.add_parser("explain", help="why a story is where it is: score parts, representative, lineage")
    explain.add_argument("story_id")
    explain.add_argument("--edition", default=None, help="the edition to explain it on (default: its first top page)")
    explain.add_argument("--json", action="store_true", help="print the explanation as JSON")
    explain.set_defaults(func=cmd_explain)

    pages = sub.add_parser("pages", help="page pointers: roll a page back to an earlier version")
    pages_sub = pages.add_subparsers(dest="pages_action", required=True)
    rollback = pages_sub.add_parser("rollback", help="point EDITION/SECTION back at VERSION (conditional put)")
    rollback.add_argument("edition")
    rollback.add_argument("section")
    rollback.add_argument("version", type=int)
    rollback.set_defaults(func=cmd_pages_rollback)


def _add_operation_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Running and watching the pipeline: ``up``, ``down``, ``health``, ``doctor``, ``websub``, ``serve``."""
    up = sub.add_parser("up", help="start the Prefect server and UI, a worker, every deployment and the API")
    up.add_argument("--prefect-port", type=int, default=4200)
    up.add_argument("--port", type=int, default=8000, help="API port")
    up.add_argument("--replay", action="store_true", help="also start the replay publisher site and register it")
    up.add_argument("--replay-port", type=int, default=8900)
    up.add_argument("--replay-speed", type=float, default=60.0, help="simulated seconds per real second")
    up.set_defaults(func=cmd_up)

    down = sub.add_parser("down", help="stop what `newsroom up` started")
    down.set_defaults(func=cmd_down)

    health = sub.add_parser("health", help="run the monitoring checks; exit 2 when any flag is raised")
    health.add_argument("--now", default=None, help="ISO instant to check as of (default: now)")
    health.set_defaults(func=cmd_health)

    doctor = sub.add_parser("doctor", help="list corrupt or missing objects in the store; --repair fixes what is safe")
    doctor.add_argument("--repair", action="store_true",
                        help="repoint damaged pointers, rebuild or rewind writer checkpoints, quarantine other "
                             "corrupt objects, delete stale temporaries")
    doctor.add_argument("--json", action="store_true", help="one JSON report instead of text")
    doctor.add_argument("--now", default=None, help="ISO instant the repairs are stamped with (default: now)")
    doctor.set_defaults(func=cmd_doctor)

    websub = sub.add_parser("websub", help="run the WebSub callback receiver and publisher ping endpoint")
    websub.add_argument("--host", default=None, help="listen address (default NEWSROOM_WEBSUB_BIND_HOST)")
    websub.add_argument("--port", type=int, default=None, help="listen port (default NEWSROOM_WEBSUB_BIND_PORT)")
    websub.add_argument("--print-ping-token", metavar="PUBLISHER_ID", default=None,
                        help="print the bearer token PUBLISHER_ID sends with POST /ping/PUBLISHER_ID, and exit")
    websub.set_defaults(func=cmd_websub)

    serve = sub.add_parser("serve", help="serve the API and reader page")
    serve.add_argument("--host", default=None, help="listen address (default NEWSROOM_SERVING_HOST)")
    serve.add_argument("--port", type=int, default=None, help="listen port (default NEWSROOM_SERVING_PORT)")
    serve.set_defaults(func=cmd_serve)


# Commands that read no setting: they run the pipeline's code over files, not over a store.
_NO_SETTINGS = frozenset({"cluster-eval", "extract", "classify-sections", "down"})
# Commands that open a store of their own (``--store``), never the one the settings name.
_OWN_STORE = frozenset({"demo"})


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "publishers" and args.action == "import" and not args.file:
        raise SystemExit("newsroom publishers import FILE")
    if args.command in _NO_SETTINGS:
        return int(args.func(args))
    from tasks.settings import PipelineSettings, use_settings

    try:
        settings = PipelineSettings.from_environment()  # one line and exit 2 for a bad setting, before any work (#16)
        if args.command not in _OWN_STORE:
            settings.check_store()  # a root that is a file, an s3:// root without credentials (issue 32)
    except ValueError as e:
        _err(f"newsroom {args.command}: {e}")
        return 2
    with use_settings(settings):  # read once; every flow and task of the command gets these (issue 17)
        return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
