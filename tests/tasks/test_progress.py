"""Progress on long commands (issue 18): bars on a terminal, nothing when the output is not one."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from corpus_paths import CORPUS

from tasks.cluster_eval import run_cluster_eval
from tasks.extract_pages import extract_directory
from tasks.progress import NO_PROGRESS, Advance, terminal_progress

REPO = Path(__file__).resolve().parents[2]


class Recorder:
    """A Progress that keeps every stage and how far it got."""

    def __init__(self) -> None:
        self.stages: list[list[object]] = []

    def stage(self, description: str, total: int | None = None) -> Advance:
        entry: list[object] = [description, total, 0]
        self.stages.append(entry)

        def advance(count: int) -> None:
            entry[2] = int(entry[2]) + count  # type: ignore[call-overload]

        return advance


def _pages(folder: Path, count: int) -> Path:
    folder.mkdir()
    for i in range(count):
        (folder / f"page-{i}.html").write_text(
            f"<html><head><title>Story {i}</title></head><body><article><p>{'Words of the story. ' * 40}"
            f"</p></article></body></html>", encoding="utf-8")
    return folder


def _mmds(tmp_path: Path, count: int) -> Path:
    with (CORPUS / "clustering" / "mmds-dev.jsonl").open(encoding="utf-8") as fh:
        rows = [json.loads(line) for _, line in zip(range(count), fh, strict=False)]
    path = tmp_path / "articles.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_no_terminal_no_progress() -> None:
    stream = io.StringIO()
    with terminal_progress(stream) as progress:
        progress.stage("anything", 3)(3)
    assert progress is NO_PROGRESS
    assert stream.getvalue() == ""


def test_extract_counts_every_page(tmp_path: Path) -> None:
    recorder = Recorder()
    written = extract_directory(_pages(tmp_path / "pages", 5), tmp_path / "out.jsonl", progress=recorder)
    assert written == 5
    assert recorder.stages == [["extracting pages", 5, 5]]


def test_cluster_eval_reports_its_stages_and_writes_the_same_lines(tmp_path: Path) -> None:
    source = _mmds(tmp_path, 30)
    recorder = Recorder()
    run_cluster_eval(source, tmp_path / "with.jsonl", progress=recorder)
    run_cluster_eval(source, tmp_path / "without.jsonl")

    assert (tmp_path / "with.jsonl").read_bytes() == (tmp_path / "without.jsonl").read_bytes()
    assert [s[0] for s in recorder.stages] == ["embedding titles and ledes", "signatures and features",
                                              "clustering and repair", "cross-language links"]
    assert [s[1:] for s in recorder.stages[:3]] == [[30, 30]] * 3


def _run_on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``newsroom args`` with standard error on a pseudo-terminal; returns its status and what it drew."""
    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "flows.cli", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=slave,
                               env={**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm", "COLUMNS": "120"})
    os.close(slave)
    drawn = b""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other side closed
                break
            if not chunk:
                break
            drawn += chunk
        elif process.poll() is not None:
            break
    os.close(master)
    return process.wait(timeout=60), drawn.decode("utf-8", "replace")


def test_extract_draws_a_bar_on_a_terminal_and_nothing_in_a_log(tmp_path: Path) -> None:
    pages = _pages(tmp_path / "pages", 4)
    status, drawn = _run_on_a_terminal(["extract", "--input-dir", str(pages), "--output", "o.jsonl"], tmp_path)
    assert status == 0
    assert "extracting pages" in drawn and "4/4" in drawn

    logged = subprocess.run([sys.executable, "-m", "flows.cli", "extract", "--input-dir", str(pages), "--output",
                             "p.jsonl"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert logged.returncode == 0
    assert logged.stderr == ""
    assert logged.stdout == "extracted 4 pages -> p.jsonl\n"
