"""``newsroom doctor``: exit codes as documented (docs/store-faults.md), through the real command line.

The repairs themselves, per kind of object, run in tests/tasks/test_store_faults.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from warehouse import layout
from warehouse.schemas import PUBLISHERS_SCHEMA
from warehouse.snapshots import PAGE_SCHEMA, publish_page
from warehouse.store import LocalStore
from warehouse.tables import write_table

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
SEGMENT = "log/articles/date=2026-12-02/0123456789abcdef0123.parquet"


def _newsroom(args: list[str], root: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=180, env={**os.environ, "PYTHONPATH": str(REPO), "NEWSROOM_WAREHOUSE_ROOT": root,
                                            **env})


def _damaged_store(root: Path) -> LocalStore:
    store = LocalStore(root)
    write_table(store, layout.PUBLISHERS_KEY, pa.Table.from_pylist([], PUBLISHERS_SCHEMA), PUBLISHERS_SCHEMA)
    for minute in (1, 2):
        at = NOW.replace(minute=minute)
        payload = {"schema": PAGE_SCHEMA, "edition": "en-GB", "section": "top", "as_of": at.isoformat(),
                   "stories": [{"story_id": f"s{minute}"}]}
        assert publish_page(store, "en-GB", "top", payload, now=at, validate=lambda new, prev: None).published
    store.put(layout.page_pointer_key("en-GB", "top"), b'{"version": 2, "ke')  # torn
    store.put(SEGMENT, b"PAR1 not really")
    return store


def test_exit_1_lists_damage_then_0_once_repaired(tmp_path: Path) -> None:
    store = _damaged_store(tmp_path / "store")
    listed = _newsroom(["doctor", "--json"], str(store.root), tmp_path)
    assert listed.returncode == 1, listed.stderr
    report = json.loads(listed.stdout)
    assert not report["clean"]
    assert {e["key"]: e["kind"] for e in report["entries"]} == {
        layout.page_pointer_key("en-GB", "top"): "page_pointer", SEGMENT: "article_segment"}
    assert store.get(SEGMENT).data == b"PAR1 not really"  # listing changes nothing

    repaired = _newsroom(["doctor", "--repair"], str(store.root), tmp_path)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "pointer moved to v2" in repaired.stdout and "moved to quarantine/" in repaired.stdout
    assert store.head(SEGMENT) is None and store.head(f"quarantine/{SEGMENT}") is not None
    assert json.loads(store.get(layout.page_pointer_key("en-GB", "top")).data)["version"] == 2

    again = _newsroom(["doctor"], str(store.root), tmp_path)
    assert again.returncode == 0 and "no damaged objects" in again.stdout


def test_exit_2_when_the_store_cannot_be_read(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = _newsroom(["doctor"], "s3://nowhere/newsroom", tmp_path,
                     NEWSROOM_WAREHOUSE_S3_ENDPOINT_URL=f"http://127.0.0.1:{port}",
                     NEWSROOM_WAREHOUSE_S3_ACCESS_KEY_ID="x", NEWSROOM_WAREHOUSE_S3_SECRET_ACCESS_KEY="y")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "could not be read" in done.stderr and "Traceback" not in done.stderr
