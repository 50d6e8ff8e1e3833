"""How long a newcomer waits for the first page: run a command (``make demo``) and time it.

    d=$(mktemp -d) && git clone -q . $d/newsroom && ln -s /work/shared $d/shared
    python3 -m bench.demo_first_page --cwd $d/newsroom --port 8000 -- make demo

Records, from the moment the command starts: when each output line appeared (stdout and stderr
merged, as a terminal shows them), when the first line of ``newsroom`` itself appeared (the install
is over), and when ``GET /v1/editions/{edition}/top`` first answered 200. Then it sends SIGINT to
the command's process group (Ctrl-C in a terminal) and reports how long it took to exit and
whether any process started under it is still alive. Prints a JSON report; the first ``--lines``
output lines go in it too. Standard library only, so it runs before any install.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (loopback only)
            return int(response.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return 0


def _descendants(root: int) -> set[int]:
    """Every process whose parent chain reaches ``root``, or that shares its session."""
    parents: dict[int, int] = {}
    sessions: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents[int(proc.name)] = int(fields[1])
        sessions[int(proc.name)] = int(fields[3])
    found = {pid for pid, sid in sessions.items() if sid == root}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if pid not in found and (ppid == root or ppid in found):
                found.add(pid)
                changed = True
    return found - {root}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cwd", default=".")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--edition", default="en-US")
    parser.add_argument("--marker", default="[1/", help="the first line of newsroom's own output starts with this")
    parser.add_argument("--lines", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--after-200", type=float, default=0, help="keep running this long after the first 200")
    parser.add_argument("--log", default=None, help="also write every timestamped line here")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    url = f"http://127.0.0.1:{args.port}/v1/editions/{args.edition}/top"
    start = time.monotonic()
    proc = subprocess.Popen(command, cwd=args.cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    lines: list[tuple[float, str]] = []
    log = open(args.log, "w", encoding="utf-8") if args.log else None  # noqa: SIM115

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            text = raw.decode("utf-8", "replace").rstrip("\n")
            at = time.monotonic() - start
            lines.append((at, text))
            if log:
                log.write(f"{at:8.1f} {text}\n")
                log.flush()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    first_200 = None
    while time.monotonic() - start < args.timeout and proc.poll() is None:
        if _status(url) == 200:
            first_200 = time.monotonic() - start
            break
        time.sleep(0.5)
    if first_200 is not None and args.after_200:
        time.sleep(args.after_200)
    tree = _descendants(proc.pid) | {proc.pid}
    stop_at = time.monotonic()
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=120)
        exited = time.monotonic() - stop_at
    except subprocess.TimeoutExpired:
        exited = None
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.2)
    all_gone = time.monotonic() - stop_at
    survivors = sorted(p for p in tree if _alive(p))
    for pid in survivors:  # leave nothing behind on the machine
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if proc.poll() is None:
        proc.kill()
    reader.join(5)
    install_done = next((at for at, text in lines if text.startswith(args.marker)), None)
    report = {
        "command": command,
        "first_200_seconds": None if first_200 is None else round(first_200, 1),
        "install_done_seconds": None if install_done is None else round(install_done, 1),
        "first_200_after_install_seconds": (round(first_200 - install_done, 1)
                                            if first_200 is not None and install_done is not None else None),
        "output_lines_before_first_200": sum(1 for at, _ in lines if first_200 is None or at <= first_200),
        "sigint_exit_seconds": None if exited is None else round(exited, 1),
        "all_processes_gone_seconds": round(all_gone, 1),
        "survivors": survivors,
        "first_lines": [f"{at:6.1f}s {text}" for at, text in lines[: args.lines]],
    }
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 0 if first_200 is not None and not survivors else 1


if __name__ == "__main__":
    raise SystemExit(main())
