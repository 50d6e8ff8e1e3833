"""Shared fixtures. S3 plumbing lives in ``tests/s3server.py``; keep this file to fixtures."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pgserver import PostgresServer, find_pg_binary, run_postgres
from s3server import S3Server, run_seaweedfs

from warehouse.store import LocalStore, ObjectStore, S3Store


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One real SeaweedFS S3 server on 127.0.0.1 for the whole session, with a bucket."""
    with run_seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server


def make_s3_store(server: S3Server, prefix: str | None = None) -> S3Store:
    """An S3Store on ``server``'s bucket under ``prefix`` (a fresh unique one by default)."""
    return S3Store(
        bucket=server.bucket,
        prefix=prefix or f"test-{uuid.uuid4().hex}",
        endpoint_url=server.endpoint_url,
        access_key=server.access_key,
        secret_key=server.secret_key,
        region=server.region,
    )


@pytest.fixture(
    params=[
        pytest.param("local", id="local"),
        pytest.param("s3", id="s3", marks=pytest.mark.integration),
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """An empty object store, once per backend: a LocalStore in tmp_path, an S3Store on SeaweedFS.

    SeaweedFS starts only when an ``s3`` case runs (``-m "not integration"`` skips it).
    """
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    return make_s3_store(request.getfixturevalue("seaweedfs"))


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One real PostgreSQL server (Debian's) on 127.0.0.1 for the whole session.

    ``make test`` installs Debian's ``postgresql`` first when it is missing and it runs as root
    (scripts/ensure-postgresql.sh); elsewhere the tests that need it are skipped, saying why.
    """
    if find_pg_binary("initdb") is None:
        pytest.skip("PostgreSQL server binaries missing: apt-get install postgresql (scripts/ensure-postgresql.sh)")
    with run_postgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> str:
    """The URL of a fresh, empty database on the session's server, one per test."""
    return postgres.create_database(f"t_{uuid.uuid4().hex[:16]}")


# Prefect: quiet, offline, and on a throwaway home, before any flow runs.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="newsroom-prefect-"))


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """A temporary Prefect server for the whole session (about 20 s to start, so started once)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(
    params=[
        pytest.param("local", id="local"),
        pytest.param("s3", id="s3", marks=pytest.mark.integration),
    ]
)
def store_vars(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """NEWSROOM_WAREHOUSE_* settings for an empty store, once per backend (for flow tests)."""
    from pipeline_harness import local_env, s3_env

    if request.param == "local":
        return local_env(tmp_path / "store")
    return s3_env(request.getfixturevalue("seaweedfs"), f"flows-{uuid.uuid4().hex}")


@pytest.fixture(
    scope="session",
    params=[
        pytest.param("local", id="local"),
        pytest.param("s3", id="s3", marks=pytest.mark.integration),
    ],
)
def pipeline_world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A store holding every kind of object, built by two real pipeline cycles, once per backend for
    the session (``tests/store_faults.py``); tests that change it work on ``world.copy()``. The
    replay site stays up, at the built store's clock, for tests that run ingest again."""
    from pipeline_harness import replay_site
    from store_faults import World, build_store

    tmp = tmp_path_factory.mktemp(f"world-{request.param}")
    if request.param == "local":
        def fresh() -> ObjectStore:
            return LocalStore(tmp / f"copy-{uuid.uuid4().hex[:8]}")
    else:
        server = request.getfixturevalue("seaweedfs")

        def fresh() -> ObjectStore:
            return make_s3_store(server)
    with replay_site(limit=90) as site:
        source = fresh()
        yield World(request.param, source, build_store(source, site, tmp), site, fresh)
