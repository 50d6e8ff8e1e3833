"""Tie a child process's life to its parent's: it dies when the parent dies, however that happens.

``newsroom demo`` runs the replay site, a temporary Prefect server, the pipeline and the API as
child processes; ``newsroom serve`` runs the API, and the flow commands (``newsroom cycle`` ...) a
temporary Prefect server (:mod:`flows.prefect_server`, issue 32). Ctrl-C, SIGTERM and SIGHUP reach
the command, which stops them in order; but a command killed with SIGKILL (or by the OOM killer)
runs no code at all, and its children used to live on holding their ports (issues 18, 32). Linux's
``prctl(PR_SET_PDEATHSIG)`` asks the kernel to signal a process when the thread that forked it
exits, so each child is started through this module:

    python -m flows.lifeline PARENT_PID -m replay --port 0 ...

sets the death signal, checks that ``PARENT_PID`` is still its parent (it may have died between
the fork and the ``prctl``), and only then runs the module as ``__main__`` in the same process. A
child that starts processes of its own starts them through this module too, so the whole tree
goes. Standard library only: it must not slow down a child's start.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import runpy
import signal
import sys

PR_SET_PDEATHSIG = 1
"""From <linux/prctl.h>."""


def tie_to_parent(parent_pid: int, sig: int = signal.SIGKILL) -> bool:
    """Have the kernel send ``sig`` to this process when its parent exits.

    Returns False where the call does not exist (not Linux); the caller's orderly shutdown is then
    the only one. Exits at once if the parent is already gone (this process was re-parented).
    """
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the prctl took effect: nobody would stop this process
    return True


def command(module: str, *args: str, parent_pid: int | None = None) -> list[str]:
    """The argv that runs ``python -m module args...`` tied to ``parent_pid`` (default: this process)."""
    pid = os.getpid() if parent_pid is None else parent_pid
    return [sys.executable, "-m", "flows.lifeline", str(pid), "-m", module, *args]


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 3 or argv[1] != "-m":
        raise SystemExit("usage: python -m flows.lifeline PARENT_PID -m MODULE [ARGS...]")
    tie_to_parent(int(argv[0]))
    module = argv[2]
    sys.argv = [module, *argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
