"""The serving load bench runs end to end (tiny bounds): every way in the same rounds, the re-rank,
For you on each profile store, and the code of a git revision served beside this one (issue 29)."""

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
        [sys.executable, "-m", "bench.serving_load", "--seconds", "0.3", "--rounds", "1",
         "--connections", "2", "--max-requests", "300", "--readers", "5", "--baseline-rev", "HEAD",
         "--search-stories", "200", *postgres],
        capture_output=True, text=True, timeout=300, check=True, cwd=REPO,
    )
    summary = json.loads(out.stdout)
    assert summary["api_edition_page"]["requests"] > 0
    assert summary["static_same_bytes"]["requests"] > 0
    compressed = summary["api_edition_page_compressed"]  # as a browser asks for it: brotli (#20)
    assert compressed["requests"] > 0 and compressed["coding"] == "br"
    assert compressed["bytes"] * 3 < summary["page_bytes"] == summary["api_edition_page"]["bytes"]
    assert summary["for_you_rerank"]["pool"] == 1000 and summary["for_you_rerank"]["page_p50_ms"] > 0
    for_you = summary["for_you_by_profile_store"]
    assert for_you["sqlite"]["requests"] > 0 and for_you["profile_cache"] is True
    assert summary["for_you_vs_page_rate"] > 0
    search = summary["search"]  # issue 30: GET /v1/search in the same rounds, against the edition page
    assert search["requests"] > 0 and search["indexed_stories"] == 230 and summary["search_vs_page_p50"] > 0
    assert not postgres or for_you["postgres"]["requests"] > 0 and for_you["postgres_vs_sqlite_rate"] > 0
    baseline = summary["baseline"]  # HEAD's code, served from a git archive of it
    assert len(baseline["commit"]) == 40 and baseline["for_you_sqlite"]["requests"] > 0
    assert baseline["api_edition_page"]["requests"] > 0
    assert set(summary["vs_baseline_rate"]) >= {"api_edition_page", "for_you_sqlite"}


@pytest.mark.slow
@pytest.mark.integration
def test_profile_reads_bench_measures_postgres_own_cpu() -> None:
    if find_pg_binary("initdb") is None:
        pytest.skip("PostgreSQL server binaries missing")
    out = subprocess.run(
        [sys.executable, "-m", "bench.serving_load", "--profile-reads", "--seconds", "0.3",
         "--rounds", "1", "--readers", "5"],
        capture_output=True, text=True, timeout=300, check=True, cwd=REPO,
    )
    summary = json.loads(out.stdout)
    assert summary["postgres"]["reads"] > 0 and summary["postgres"]["server_cpu_ms_per_read"] > 0


@pytest.mark.slow
@pytest.mark.integration
def test_cpu_per_request_bench_runs_this_code_and_a_revision() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench.serving_load", "--cpu-per-request", "--rounds", "1",
         "--baseline-rev", "HEAD"],
        capture_output=True, text=True, timeout=300, check=True, cwd=REPO,
    )
    summary = json.loads(out.stdout)
    for code in ("this", "baseline"):
        assert summary[code]["api_edition_page"] > 0 and summary[code]["for_you_sqlite"] > 0
