"""The in-process A/B of assignment runs end to end on a small writer: a checkout against itself
places every article alike, with the same scores, in both halves."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_checkout_against_itself_places_alike_with_the_same_scores(tmp_path: Path) -> None:
    writer = tmp_path / "writer.pkl"
    subprocess.run([sys.executable, "-m", "bench.repair_scale", "write", "--stories", "400",
                    "--minutes", "1", "--per-minute", "300", str(writer)],
                   capture_output=True, text=True, timeout=300, check=True, cwd=REPO)
    line = subprocess.run([sys.executable, "-m", "bench.assign_ab", "--a", str(REPO), "--b", str(REPO),
                           "--per-minute", "300", "--chunk", "100", str(writer)],
                          capture_output=True, text=True, timeout=300, check=True, cwd=REPO).stdout
    found = re.search(r"A [\d.]+ s = \d+/s, B [\d.]+ s = \d+/s, B/A [\d.]+; per-chunk B/A median [\d.]+ "
                      r"\[[\d.]+\.\.[\d.]+\] over (\d+) chunks; same placements (\w+), "
                      r"largest score difference ([\d.e+-]+)", line)
    assert found is not None, line
    assert found.group(1) == "3"
    assert found.group(2) == "True"
    assert float(found.group(3)) == 0.0
