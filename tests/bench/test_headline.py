"""``bench/headline.py`` runs every headline bench in its quick mode and prints one JSON object (#20)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIGURES = {
    "polls_per_second", "polls_per_second_processes", "edition_page", "for_you_rerank_p50_ms", "writer_articles_per_second", "rank_cycle_seconds",
    "cluster_bcubed_f1_mmds", "copy_detection_recall", "extraction_f1", "section_classifier",
}


@pytest.mark.slow
@pytest.mark.integration
def test_headline_quick_prints_every_figure_with_its_baseline() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.headline", "--quick"],
                          capture_output=True, text=True, timeout=1500, check=False, cwd=REPO)
    result = json.loads(done.stdout)
    assert done.returncode == 0, result.get("errors")
    assert result["errors"] == {}
    assert result["mode"] == "quick"
    assert len(result["commit"]) == 40 and isinstance(result["dirty"], bool)
    assert len(result["load_average"]["start"]) == 3 and len(result["load_average"]["end"]) == 3
    assert set(result["figures"]) == FIGURES
    for name, figure in result["figures"].items():
        assert {"value", "unit", "what", "baseline", "baseline_what", "ratio", "command"} <= figure.keys(), name
        assert figure["value"] is not None and figure["command"].startswith("python "), name
        if figure["baseline"] is not None:
            assert figure["ratio"] is not None and figure["ratio"] > 0, name
    for name in ("polls_per_second", "polls_per_second_processes"):
        polls = result["figures"][name]
        assert polls["politeness_max_in_flight_per_host"] <= polls["politeness_limit"] == 2, name
    assert result["figures"]["polls_per_second"]["processes"] == 1
    assert result["figures"]["polls_per_second_processes"]["processes"] >= 2
    page = result["figures"]["edition_page"]
    assert page["bytes"] * 3 < page["page_bytes"]  # the compressed page
