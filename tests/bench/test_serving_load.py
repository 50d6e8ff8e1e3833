"""The serving load bench runs end to end (tiny bounds) and reports both URLs and the re-rank."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.integration
def test_serving_load_bench_smoke() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "serving_load.py"), "--seconds", "0.3", "--rounds", "1",
         "--connections", "2", "--max-requests", "300"],
        capture_output=True, text=True, timeout=120, check=True,
    )
    summary = json.loads(out.stdout)
    assert summary["api_edition_page"]["requests"] > 0
    assert summary["static_same_bytes"]["requests"] > 0
    assert summary["for_you_rerank"]["pool"] == 1000
