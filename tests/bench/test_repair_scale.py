"""The repair-at-scale bench runs end to end on a small writer and reports the same repairs for
the same writer twice (its digest is what A/B runs of two checkouts compare)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = ["-m", "bench.repair_scale"]


@pytest.mark.slow
def test_repair_scale_bench_smoke(tmp_path: Path) -> None:
    writer = tmp_path / "writer.pkl"
    subprocess.run([sys.executable, *BENCH, "write", "--stories", "400", "--minutes", "2", "--per-minute", "300",
                    str(writer)], capture_output=True, text=True, timeout=300, check=True, cwd=REPO)
    lines = [subprocess.run([sys.executable, *BENCH, "time", str(writer)], capture_output=True, text=True,
                            timeout=300, check=True, cwd=REPO).stdout for _ in range(2)]
    found = [re.search(r"(\d+) in the lookback, splits (\d+), merges (\d+), repairs ([0-9a-f]{12})", line)
             for line in lines]
    assert found[0] is not None and found[1] is not None, lines
    assert int(found[0].group(1)) > 400 * 6 / 47  # the window's last 6 hours and the new minutes' stories
    assert found[0].groups() == found[1].groups()


@pytest.mark.slow
def test_repair_scale_bench_times_one_more_minute_with_the_same_decisions(tmp_path: Path) -> None:
    writer = tmp_path / "writer.pkl"
    subprocess.run([sys.executable, *BENCH, "write", "--stories", "400", "--minutes", "1", "--per-minute", "300",
                    str(writer)], capture_output=True, text=True, timeout=300, check=True, cwd=REPO)
    dumps = [tmp_path / "first.json", tmp_path / "second.json"]
    lines = [subprocess.run([sys.executable, *BENCH, "assign", "--per-minute", "300", "--dump", str(dump), str(writer)],
                            capture_output=True, text=True, timeout=300, check=True, cwd=REPO).stdout for dump in dumps]
    found = [re.search(r"([\d,]+) articles, CPU [\d.]+ s = \d+/s, ([\d,]+) stories, "
                       r"placements ([0-9a-f]{12}), scores ([0-9a-f]{12})", line) for line in lines]
    assert found[0] is not None and found[1] is not None, lines
    assert found[0].group(1) == "300"
    assert int(found[0].group(2).replace(",", "")) > 400  # the minute's new stories joined the window
    assert found[0].groups() == found[1].groups()
    first = json.loads(dumps[0].read_text())
    assert len(first["placements"]) == len(first["scores"]) == 300
    assert first == json.loads(dumps[1].read_text())
