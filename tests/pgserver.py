"""Run a real, throwaway PostgreSQL server on 127.0.0.1 for tests and benches.

The server is Debian's PostgreSQL (package ``postgresql``; ``scripts/ensure-postgresql.sh``
installs it when ``make test`` runs as root). Its binaries are looked up on PATH, then in
``/usr/lib/postgresql/<version>/bin`` where Debian puts them. PostgreSQL refuses to run as root, so
as root the server runs as the ``postgres`` user the package creates (else ``nobody``), in a
folder of its own under the system temp dir (pytest's temp folders are private to root).

The cluster is made for tests: trust authentication on loopback only, ``fsync=off`` (a crash of
the machine may lose it, which a throwaway server does not mind).

Run ``python tests/pgserver.py`` for a server to work against by hand; it prints the URL and
stops on Ctrl+C.
"""

from __future__ import annotations

import glob
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
SUPERUSER = "postgres"


@dataclass(frozen=True, slots=True)
class PostgresServer:
    """How to reach (and stop, start or kill) a running test server."""

    port: int
    data_dir: Path
    socket_dir: Path
    run_as: str | None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@{HOST}:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return its URL."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
        return self.url(name)

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are ended)."""
        _pg_ctl(self, "stop", "-m", "fast")

    def start(self) -> None:
        """Start the server again on the same port and data."""
        _start(self)


def find_pg_binary(name: str) -> str | None:
    """Path of a PostgreSQL server binary: on PATH, else Debian's newest ``/usr/lib/postgresql/*/bin``."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return candidates[-1] if candidates else None


def _server_user() -> str | None:
    """Who runs the server: None (ourselves) unless we are root, then ``postgres`` or ``nobody``."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists")


def _as(user: str | None, cmd: list[str]) -> list[str]:
    return cmd if user is None else ["runuser", "-u", user, "--", *cmd]


def _pg_ctl(server: PostgresServer, *args: str) -> None:
    pg_ctl = find_pg_binary("pg_ctl")
    assert pg_ctl is not None
    subprocess.run(_as(server.run_as, [pg_ctl, "-D", str(server.data_dir), "-w", *args]),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)


def _start(server: PostgresServer) -> None:
    options = (f"-p {server.port} -k {server.socket_dir} -c listen_addresses={HOST} -c fsync=off "
               "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
    _pg_ctl(server, "-l", str(server.data_dir.parent / "server.log"), "-o", options, "start")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@contextmanager
def run_postgres(attempts: int = 3) -> Iterator[PostgresServer]:
    """Create a cluster in a fresh temp folder, start it on a free loopback port, yield, stop, delete.

    Raises:
        FileNotFoundError: No ``initdb``/``pg_ctl`` (install Debian's ``postgresql``).
        subprocess.CalledProcessError: The server did not start.
    """
    initdb = find_pg_binary("initdb")
    if initdb is None or find_pg_binary("pg_ctl") is None:
        raise FileNotFoundError("PostgreSQL server binaries not found: apt-get install postgresql "
                                "(scripts/ensure-postgresql.sh)")
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="newsroom-pg-"))
    try:
        if user is not None:
            shutil.chown(root, user)
        data = root / "data"
        subprocess.run(_as(user, [initdb, "-D", str(data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
                                  "--no-sync", "--locale=C"]),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
        for attempt in range(1, attempts + 1):
            server = PostgresServer(port=_free_port(), data_dir=data, socket_dir=root, run_as=user)
            try:
                _start(server)
            except subprocess.CalledProcessError:
                if attempt == attempts:  # a port taken between picking and binding costs one try
                    raise
                continue
            logger.info("postgres_started port=%d data=%s", server.port, data)
            try:
                yield server
            finally:
                try:
                    server.stop()
                except subprocess.CalledProcessError:
                    _kill(data)
            return
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _kill(data: Path) -> None:
    """Kill a server that would not stop, by the pid in its own pid file."""
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main() -> None:
    """Run a throwaway server until Ctrl+C, printing its URL."""
    with run_postgres() as server:
        print(f"NEWSROOM_SERVING_PROFILES_URL={server.url()}")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
