"""The serving load bench runs end to end (tiny bounds): both URLs, the re-rank, For you on each profile store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pgserver import find_pg_binary

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.integration
def test_serving_load_bench_smoke() -> None:
    postgres = [] if find_pg_binary("initdb") else ["--no-postgres"]
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "serving_load.py"), "--seconds", "0.3", "--rounds", "1",
         "--connections", "2", "--max-requests", "300", "--readers", "5", *postgres],
        capture_output=True, text=True, timeout=300, check=True,
    )
    summary = json.loads(out.stdout)
    assert summary["api_edition_page"]["requests"] > 0
    assert summary["static_same_bytes"]["requests"] > 0
    compressed = summary["api_edition_page_compressed"]  # as a browser asks for it: brotli (#20)
    assert compressed["requests"] > 0 and compressed["coding"] == "br"
    assert compressed["bytes"] * 3 < summary["page_bytes"] == summary["api_edition_page"]["bytes"]
    assert summary["for_you_rerank"]["pool"] == 1000
    for_you = summary["for_you_by_profile_store"]
    assert for_you["sqlite"]["requests"] > 0
    assert not postgres or for_you["postgres"]["requests"] > 0 and for_you["postgres_vs_sqlite_p50"] > 0
