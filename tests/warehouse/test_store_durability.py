"""LocalStore puts are durable: the file, the folder entry that names it, and new folders are fsynced."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from warehouse import store as store_module
from warehouse.store import LocalStore


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
