"""The ObjectStore contract, run against every backend through the ``store`` fixture."""

from __future__ import annotations

import hashlib
import io
import multiprocessing
import os
import stat
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from warehouse import store as store_module
from warehouse.errors import ObjectNotFoundError, PreconditionFailedError
from warehouse.settings import WarehouseSettings
from warehouse.store import LocalStore, ObjectStore, S3Store, StoredObject, arrow_filesystem, open_store

THREADS = 6


def test_store_implements_protocol(store: ObjectStore) -> None:
    assert isinstance(store, ObjectStore)


def test_put_get_round_trip(store: ObjectStore) -> None:
    data = b"\x00hello\xff" * 100
    etag = store.put("a/b/c.bin", data)

    assert etag == hashlib.md5(data).hexdigest()  # unquoted on every backend
    assert store.get("a/b/c.bin") == StoredObject(key="a/b/c.bin", data=data, etag=etag)


def test_put_overwrites_and_changes_etag(store: ObjectStore) -> None:
    first = store.put("k.json", b"1")
    second = store.put("k.json", b"2")

    assert first != second
    assert store.get("k.json").data == b"2"
    assert store.head("k.json") == second


def test_put_empty_object(store: ObjectStore) -> None:
    etag = store.put("empty", b"")

    assert store.get("empty").data == b""
    assert store.head("empty") == etag


def test_head(store: ObjectStore) -> None:
    etag = store.put("x/y.txt", b"data")

    assert store.head("x/y.txt") == etag
    assert store.head("x/missing.txt") is None
    assert store.head("x") is None  # a "folder" is not an object


def test_get_missing_raises(store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFoundError) as info:
        store.get("no/such/key")
    assert info.value.key == "no/such/key"


def test_list_is_sorted_and_prefix_exact(store: ObjectStore) -> None:
    keys = ["b/5", "a/2", "ab/4", "a/b/3", "a/1", "a-c"]
    for key in keys:
        store.put(key, key.encode())

    assert store.list("") == sorted(keys)
    assert store.list("a/") == ["a/1", "a/2", "a/b/3"]
    assert store.list("a") == ["a-c", "a/1", "a/2", "a/b/3", "ab/4"]
    assert store.list("a/b") == ["a/b/3"]
    assert store.list("a/b/") == ["a/b/3"]
    assert store.list("a/1") == ["a/1"]
    assert store.list("zz/") == []
    assert store.list("b/5/") == []


def test_delete_is_idempotent(store: ObjectStore) -> None:
    store.put("d/1", b"x")
    store.put("d/2", b"y")

    store.delete("d/1")
    store.delete("d/1")
    store.delete("never/existed")

    assert store.head("d/1") is None
    assert store.list("d/") == ["d/2"]
    with pytest.raises(ObjectNotFoundError):
        store.get("d/1")


def test_if_none_match_creates_once(store: ObjectStore) -> None:
    etag = store.put("p/latest.json", b"old", if_none_match=True)

    with pytest.raises(PreconditionFailedError) as info:
        store.put("p/latest.json", b"new", if_none_match=True)

    assert info.value.key == "p/latest.json"
    assert store.get("p/latest.json") == StoredObject(key="p/latest.json", data=b"old", etag=etag)


def test_if_match_replaces_current_version_only(store: ObjectStore) -> None:
    stale = store.put("c/checkpoint.json", b"v1")
    current = store.put("c/checkpoint.json", b"v2", if_match=stale)

    with pytest.raises(PreconditionFailedError):
        store.put("c/checkpoint.json", b"v3-from-stale-reader", if_match=stale)

    assert store.get("c/checkpoint.json").data == b"v2"
    newest = store.put("c/checkpoint.json", b"v3", if_match=current)
    assert store.get("c/checkpoint.json") == StoredObject(key="c/checkpoint.json", data=b"v3", etag=newest)


def test_if_match_accepts_quoted_etag(store: ObjectStore) -> None:
    etag = store.put("q", b"1")

    store.put("q", b"2", if_match=f'"{etag}"')

    assert store.get("q").data == b"2"


def test_if_match_on_missing_key_fails(store: ObjectStore) -> None:
    with pytest.raises(PreconditionFailedError):
        store.put("m/missing.json", b"x", if_match=hashlib.md5(b"x").hexdigest())

    assert store.head("m/missing.json") is None
    assert store.list("m/") == []


def test_both_conditions_rejected(store: ObjectStore) -> None:
    with pytest.raises(ValueError):
        store.put("both", b"x", if_none_match=True, if_match="abc")


def _race(workers: int, body: Callable[[int], object]) -> list[object]:
    """Run ``body(i)`` on ``workers`` threads released together by a barrier."""
    barrier = threading.Barrier(workers)

    def run(i: int) -> object:
        barrier.wait()
        return body(i)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run, range(workers)))


def test_concurrent_if_none_match_has_one_winner(store: ObjectStore) -> None:
    for round_ in range(3):
        key = f"race/{round_}/pointer.json"

        def create(i: int, key: str = key) -> bool:
            try:
                store.put(key, f"writer-{i}".encode(), if_none_match=True)
            except PreconditionFailedError:
                return False
            return True

        wins = _race(THREADS, create)

        assert wins.count(True) == 1
        assert store.get(key).data == f"writer-{wins.index(True)}".encode()


def _increment(store: ObjectStore, key: str, times: int) -> int:
    """Add ``times`` to the counter at ``key`` by compare-and-swap; return the conflicts seen."""
    conflicts = 0
    done = 0
    while done < times:
        current = store.get(key)
        try:
            store.put(key, str(int(current.data) + 1).encode(), if_match=current.etag)
        except PreconditionFailedError:
            conflicts += 1
            continue
        done += 1
    return conflicts


def test_concurrent_compare_and_swap_loses_no_update(store: ObjectStore) -> None:
    store.put("cas/counter", b"0")
    per_thread = 5

    _race(THREADS, lambda _: _increment(store, "cas/counter", per_thread))

    assert int(store.get("cas/counter").data) == THREADS * per_thread


def test_compare_and_swap_across_processes(store: ObjectStore) -> None:
    store.put("cas/procs", b"0")
    processes, per_process = 3, 5
    # fork: the worker and the store need no re-import in the child (S3Store pickles as arguments).
    context = multiprocessing.get_context("fork")

    with ProcessPoolExecutor(max_workers=processes, mp_context=context) as pool:
        futures = [pool.submit(_increment, store, "cas/procs", per_process) for _ in range(processes)]
        for future in futures:
            future.result()

    assert int(store.get("cas/procs").data) == processes * per_process


def test_arrow_filesystem_reads_parquet_written_with_put(store: ObjectStore) -> None:
    table = pa.table({"article_id": ["a1", "a2", "a3"], "score": [0.5, 1.5, 2.5]})
    for part, rows in enumerate((table.slice(0, 2), table.slice(2))):
        buffer = io.BytesIO()
        pq.write_table(rows, buffer)
        store.put(f"log/articles/date=2024-01-01/part-{part}.parquet", buffer.getvalue())
    store.put("log/other/ignored.parquet", b"not parquet")

    fs, base = arrow_filesystem(store)

    one = pq.read_table(f"{base}/log/articles/date=2024-01-01/part-0.parquet", filesystem=fs)
    assert one.equals(table.slice(0, 2))
    dataset = ds.dataset(f"{base}/log/articles", filesystem=fs, format="parquet", partitioning="hive")
    assert dataset.to_table(columns=["article_id", "score"]).sort_by("article_id").equals(table)


def test_open_store_round_trips_uri(store: ObjectStore, request: pytest.FixtureRequest) -> None:
    store.put("registry/feeds.parquet", b"x")
    if isinstance(store, S3Store):
        server = request.getfixturevalue("seaweedfs")
        settings = WarehouseSettings(
            root=store.uri,
            s3_endpoint_url=server.endpoint_url,
            s3_access_key_id=server.access_key,
            s3_secret_access_key=server.secret_key,
        )
    else:
        settings = WarehouseSettings(root=store.uri)

    reopened = open_store(settings)

    assert type(reopened) is type(store)
    assert reopened.uri == store.uri
    assert reopened.list("") == ["registry/feeds.parquet"]


UNSAFE_KEYS = [
    pytest.param("../escape", id="parent"),
    pytest.param("a/../../escape", id="inner-parent"),
    pytest.param("a/..", id="trailing-parent"),
    pytest.param("/etc/passwd", id="absolute"),
    pytest.param("", id="empty"),
    pytest.param("a//b", id="empty-segment"),
    pytest.param("a/./b", id="dot-segment"),
    pytest.param("a/", id="trailing-slash"),
    pytest.param("a\\..\\b", id="backslash"),
]


@pytest.mark.parametrize("key", UNSAFE_KEYS)
def test_unsafe_keys_are_rejected(store: ObjectStore, key: str) -> None:
    with pytest.raises(ValueError):
        store.put(key, b"x")
    with pytest.raises(ValueError):
        store.put(key, b"x", if_none_match=True)
    with pytest.raises(ValueError):
        store.get(key)
    with pytest.raises(ValueError):
        store.head(key)
    with pytest.raises(ValueError):
        store.delete(key)


@pytest.mark.parametrize("prefix", ["../", "/abs/", "a/../"])
def test_unsafe_list_prefixes_are_rejected(store: ObjectStore, prefix: str) -> None:
    with pytest.raises(ValueError):
        store.list(prefix)


def test_local_store_hides_its_bookkeeping(tmp_path: Path) -> None:
    local = LocalStore(tmp_path)
    local.put("a/b", b"1")
    local.put("a/b", b"2", if_match=local.head("a/b"))

    assert local.list("") == ["a/b"]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b"]


# --------------------------------------------------------------------------------------------------
# LocalStore puts are durable: the file, the folder entry that names it, and new folders are fsynced.
# --------------------------------------------------------------------------------------------------

@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Every fsync as (path, is a folder)."""
    calls: list[tuple[str, bool]] = []
    real = os.fsync

    def recording(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        calls.append((path, stat.S_ISDIR(os.fstat(fd).st_mode)))
        real(fd)

    monkeypatch.setattr(store_module.os, "fsync", recording)
    return calls


@pytest.mark.parametrize("condition", [{}, {"if_none_match": True}], ids=["replace", "create-only"])
def test_a_put_fsyncs_its_folder_after_the_move(tmp_path: Path, synced: list[tuple[str, bool]],
                                                condition: dict[str, bool]) -> None:
    store = LocalStore(tmp_path / "s")
    store.put("a/b/k.json", b"1")
    synced.clear()
    store.put("a/b/k2.json" if condition else "a/b/k.json", b"2", **condition)
    folder = str(tmp_path / "s" / "a" / "b")
    assert synced[-1] == (folder, True)  # the rename/link itself is durable
    assert any(not is_dir for _, is_dir in synced[:-1])  # after the bytes were


def test_new_folders_are_fsynced_in_their_parent(tmp_path: Path, synced: list[tuple[str, bool]]) -> None:
    store = LocalStore(tmp_path / "s")
    store.put("x/y/z.bin", b"data")
    folders = [p for p, is_dir in synced if is_dir]
    root = tmp_path / "s"
    assert str(root) in folders and str(root / "x") in folders and str(root / "x" / "y") in folders
