"""What a put killed mid-write leaves is found and deleted, never kept forever (issue 16).

Local: a process is killed with SIGKILL while its put writes the temp file (``.<name>.<uuid>.tmp``),
which no reader lists. S3: an upload in parts started and never completed, whose parts the server
keeps. Maintenance and ``newsroom doctor --repair`` delete both once older than any put in flight.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from s3server import S3Server

from tasks.doctor import run_doctor
from warehouse.maintenance import delete_stale_temporaries
from warehouse.store import TEMPORARY_MAX_AGE_SECONDS, LocalStore, S3Store, list_temporaries

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
_BIG_PUT = """
import sys
from warehouse.store import LocalStore
LocalStore(sys.argv[1]).put("pages/en-GB/top/v9.json", b"x" * (1 << 29))
"""


def _killed_mid_put(root: Path) -> list[Path]:
    """Start a 512 MiB put in another process, SIGKILL it once its temp file exists, return the temp files."""
    process = subprocess.Popen([sys.executable, "-c", _BIG_PUT, str(root)], env={**os.environ, "PYTHONPATH": str(REPO)})
    folder = root / "pages" / "en-GB" / "top"
    deadline = time.monotonic() + 60
    try:
        while not list(folder.glob(".*.tmp")):
            assert process.poll() is None, "the put ended before it was killed"
            assert time.monotonic() < deadline, "no temp file appeared"
            time.sleep(0.01)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    return list(folder.glob(".*.tmp"))


def test_a_put_killed_mid_write_leaves_a_temp_file_that_maintenance_deletes(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    left = _killed_mid_put(store.root)
    assert len(left) == 1
    assert store.list("") == []  # invisible to every reader, so nothing else would ever remove it

    found = list_temporaries(store)
    assert [t.name for t in found] == [left[0].relative_to(store.root).as_posix()]
    report = delete_stale_temporaries(store)  # a temp younger than any put in flight stays
    assert report.deleted_temporaries == 0 and left[0].exists()

    listed = run_doctor(store, NOW, temporaries_older_than=0)
    assert [(e.kind, e.key) for e in listed] == [("temporary", found[0].name)]
    assert left[0].exists()  # listing changes nothing

    report = delete_stale_temporaries(store, older_than_seconds=0)
    assert report.deleted_temporaries == 1
    assert not left[0].exists() and list_temporaries(store) == []


def test_the_doctor_deletes_a_stale_temp_file(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    left = _killed_mid_put(store.root)
    old = time.time() - TEMPORARY_MAX_AGE_SECONDS - 60
    os.utime(left[0], (old, old))
    entries = run_doctor(store, NOW, repair=True)
    assert [(e.kind, e.repaired) for e in entries] == [("temporary", True)]
    assert not left[0].exists()


@pytest.mark.integration
def test_an_unfinished_s3_upload_is_found_and_aborted(seaweedfs: S3Server) -> None:
    store = S3Store(bucket=seaweedfs.bucket, prefix=f"temporaries-{uuid.uuid4().hex}", endpoint_url=seaweedfs.endpoint_url,
                    access_key=seaweedfs.access_key, secret_key=seaweedfs.secret_key, region=seaweedfs.region)
    client = seaweedfs.client()
    key = f"{store.prefix}pages/en-GB/top/v9.json"
    upload = client.create_multipart_upload(Bucket=store.bucket, Key=key)
    client.upload_part(Bucket=store.bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=b"x" * (5 << 20))
    assert store.list("") == []

    found = list_temporaries(store)
    assert [(t.name, t.upload_id) for t in found] == [("pages/en-GB/top/v9.json", upload["UploadId"])]
    assert delete_stale_temporaries(store).deleted_temporaries == 0  # may still be in flight

    assert delete_stale_temporaries(store, older_than_seconds=0).deleted_temporaries == 1
    assert list_temporaries(store) == []
    uploads = client.list_multipart_uploads(Bucket=store.bucket, Prefix=store.prefix).get("Uploads", [])
    assert uploads == []
