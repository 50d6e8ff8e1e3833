"""How long a hand-off takes through Prefect (issue 31): an event to a deployment-triggered flow run on
a process worker, against an event to a long-running flow that waits on the event stream.

Usage:
    .venv/bin/python -m bench.prefect_handoff [--events 6] [--gap 20] [--query-seconds 10]

It starts a temporary Prefect server, a process work pool and worker (``--query-seconds`` is
``PREFECT_WORKER_QUERY_SECONDS``, 10 by default as ``newsroom up`` runs it), deploys a flow that
imports what a rank run imports and records when its body starts, with a deployment trigger on a
custom event (the way ``prefect.yaml`` would hand off from a writer's commit to rank), and emits
``--events`` events ``--gap`` seconds apart. Then two events two seconds apart, as a commit arriving
while the triggered run is in flight (the deployment's ``concurrency_limit: 1``). Beside the worker, a
``tasks.events.EventWaiter`` (what the long-running ingest and rank wait on) records when each event
reaches it. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bench.harness import REPO, load_average, percentile

FLOW = '''
from __future__ import annotations
import json, os, time
import tasks.rank  # noqa: F401 - what a rank run imports
from prefect import flow

@flow(name="handoff_probe")
def handoff_probe(sent: str = "0") -> None:
    with open(os.environ["HANDOFF_LOG"], "a") as f:
        f.write(json.dumps({"sent": float(sent), "body": time.time()}) + "\\n")
'''
PREFECT_YAML = '''
name: handoff
prefect-version: 3.9.1
pull:
  - prefect.deployments.steps.set_working_directory:
      directory: "{home}"
deployments:
  - name: handoff_probe-on-event
    entrypoint: probe.py:handoff_probe
    work_pool: {{name: handoff}}
    concurrency_limit: 1
    triggers:
      - type: event
        enabled: true
        match: {{prefect.resource.id: "handoff.*"}}
        expect: ["handoff.go"]
        parameters: {{sent: "{{{{ event.payload.sent }}}}"}}
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=6)
    parser.add_argument("--gap", type=float, default=20.0, help="seconds between events (one run at a time)")
    parser.add_argument("--query-seconds", type=float, default=10.0, help="PREFECT_WORKER_QUERY_SECONDS")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="handoff-"))
    os.environ.update({"PREFECT_HOME": str(home / "prefect"), "DO_NOT_TRACK": "1",
                       "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING"})
    (home / "probe.py").write_text(FLOW)
    (home / "prefect.yaml").write_text(textwrap.dedent(PREFECT_YAML.format(home=home)))
    log = home / "bodies.jsonl"
    from flows.prefect_server import TemporaryPrefectServer, stop_process_group

    server = TemporaryPrefectServer({**os.environ})
    worker: subprocess.Popen[bytes] | None = None
    try:
        url = server.wait_ready(180)
        env = {**os.environ, "PREFECT_API_URL": url, "PYTHONPATH": str(REPO), "HANDOFF_LOG": str(log),
               "PREFECT_WORKER_QUERY_SECONDS": str(args.query_seconds)}
        os.environ["PREFECT_API_URL"] = url
        prefect = str(Path(sys.executable).with_name("prefect"))
        subprocess.run([prefect, "work-pool", "create", "handoff", "--type", "process"], env=env, capture_output=True,
                       check=False)
        deployed = subprocess.run([prefect, "--no-prompt", "deploy", "--all"], cwd=home, env=env, capture_output=True,
                                  text=True, check=False)
        if deployed.returncode != 0:
            raise SystemExit(deployed.stdout[-2000:] + deployed.stderr[-2000:])
        worker = subprocess.Popen([prefect, "worker", "start", "--pool", "handoff"], env=env, cwd=home,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        from prefect.events import emit_event

        from tasks.events import EventWaiter

        waiter = EventWaiter(["handoff.go"])
        waiter.start()
        waiter.wait_connected(60)
        time.sleep(15)  # the worker is polling
        subscriber: list[float] = []

        def fire(i: int) -> None:
            sent = time.time()
            emit_event("handoff.go", resource={"prefect.resource.id": f"handoff.{i}"}, payload={"sent": str(sent)})
            got = waiter.wait(10)
            if got:
                subscriber.append(time.time() - sent)

        for i in range(args.events):
            fire(i)
            time.sleep(args.gap)
        fire(args.events)
        time.sleep(2)
        fire(args.events + 1)  # arrives while the run before it is in flight
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and (not log.exists() or len(log.read_text().splitlines()) < args.events + 2):
            time.sleep(1)
        waiter.stop()
    finally:
        if worker is not None:
            os.killpg(worker.pid, signal.SIGINT)  # the worker stops on SIGINT only
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                stop_process_group(worker)
        server.stop()
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    lags = sorted((r["sent"], r["body"] - r["sent"]) for r in rows)
    serial = [lag for _, lag in lags[:args.events]]
    collided = [lag for _, lag in lags[args.events:]]
    load = load_average()[0]
    sys.stdout.write(f"load average {load:.1f}; worker query interval {args.query_seconds:.0f} s\n")
    sys.stdout.write("| hand-off | n | p50 s (or each) | max s |\n|---|---|---|---|\n")
    if serial:
        sys.stdout.write(f"| event -> triggered deployment's flow body (process worker) | {len(serial)} | "
                         f"{percentile(serial, 0.5):.1f} | {max(serial):.1f} |\n")
    if collided:
        sys.stdout.write(f"| the same, two events 2 s apart (concurrency limit 1), each | {len(collided)} | "
                         f"{', '.join(f'{c:.1f}' for c in collided)} | |\n")
    if subscriber:
        sys.stdout.write(f"| event -> a long-running flow waiting on the event stream | {len(subscriber)} | "
                         f"{percentile(subscriber, 0.5):.2f} | {max(subscriber):.2f} |\n")
    sys.stdout.write(json.dumps({"worker_p50_s": percentile(serial, 0.5) if serial else None,
                                 "worker_max_s": max(serial, default=None), "collided_s": collided,
                                 "subscriber_p50_s": percentile(subscriber, 0.5) if subscriber else None,
                                 "subscriber_max_s": max(subscriber, default=None), "load_avg": load,
                                 "query_seconds": args.query_seconds}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
