"""Looking at processes through /proc, for the tests that require no process to outlive its command
(``newsroom demo``, ``serve``, the flow commands; issues 18 and 32)."""

from __future__ import annotations

import socket
from pathlib import Path


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it has stopped running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def ppid(proc: Path) -> int:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def descendants(pid: int) -> list[int]:
    """Every running process below ``pid`` (its children, their children, ...)."""
    found, frontier = [], [pid]
    procs = [p for p in Path("/proc").iterdir() if p.name.isdigit()]
    while frontier:
        parent = frontier.pop()
        children = [int(p.name) for p in procs if ppid(p) == parent and alive(int(p.name))]
        found += children
        frontier += children
    return found


def marked(marker: str) -> list[int]:
    """Every running process whose environment carries ``marker`` (a child keeps it, re-parented or not)."""
    found = []
    needle = marker.encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ and alive(int(proc.name)):
            found.append(int(proc.name))
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_bindable(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def answers(port: int) -> bool:
    """Whether an HTTP server answers on ``127.0.0.1:port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n")
            return conn.recv(12).startswith(b"HTTP/1.")
    except OSError:
        return False
