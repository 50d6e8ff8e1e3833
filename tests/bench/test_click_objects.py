"""The click-objects bench runs end to end (few clicks): every click is kept, batched in far fewer objects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.integration
def test_click_objects_bench_smoke() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench.click_objects", "--clicks", "60", "--connections", "2"],
        capture_output=True, text=True, timeout=300, check=True, cwd=REPO,
    )
    summary = json.loads(out.stdout)
    assert summary["per_click"]["objects"] == 60
    assert 1 <= summary["batched"]["objects"] < 60
    assert summary["per_click"]["clicks_missing_after_sigterm"] == summary["batched"]["clicks_missing_after_sigterm"] == 0
