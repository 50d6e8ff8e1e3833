"""The command-line contracts: demo publishes pages; sql reads every view; publishers round-trip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_paths import CORPUS

REPO = Path(__file__).resolve().parents[2]
NEWSROOM = [sys.executable, "-m", "flows.cli"]


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600) -> str:
    result = subprocess.run([*NEWSROOM, *args], cwd=cwd, env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO)},
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result.stdout


@pytest.mark.integration
@pytest.mark.slow
def test_demo_publishes_pages_then_sql_sees_them(tmp_path: Path) -> None:
    out = _run(["demo", "--cycles", "4", "--step-minutes", "45", "--limit", "150", "--no-serve",
                "--corpus-dir", str(CORPUS), "--store", str(tmp_path / "store")], cwd=tmp_path,
               env={"PREFECT_HOME": str(tmp_path / "prefect")})
    assert "[4/4] pages written" in out
    pointers = sorted((tmp_path / "store" / "pages").glob("*/top/latest.json"))
    assert pointers, out
    page = json.loads((pointers[0].parent / f"v{json.loads(pointers[0].read_text())['version']}.json").read_text())
    assert page["stories"] and page["stories"][0]["sources"]

    env = {"NEWSROOM_WAREHOUSE_ROOT": str(tmp_path / "store")}
    counts = _run(["sql", "select (select count(distinct article_id) from articles) a, "
                   "(select count(*) - count(distinct article_id) from articles) v, (select count(*) from stories) s, "
                   "(select count(*) from story_changes where kind in ('new_story', 'assign', 'copy')) placed, "
                   "(select count(distinct article_id) from story_changes where kind in ('new_story', 'assign', 'copy')) "
                   "placed_once, (select count(*) from story_changes where kind = 'version') versions, "
                   "(select count(*) from story_changes where kind not in "
                   "('new_story', 'assign', 'copy', 'version', 'merge', 'split')) unknown, "
                   "(select count(*) from feeds) f, (select count(*) from pages) p, (select count(*) from clicks) k"],
                  cwd=tmp_path, env=env)
    row = counts.splitlines()[2].split("|")
    articles, new_versions, stories, placed, placed_once, versions, unknown, feeds, pages, clicks = (int(v) for v in row)
    assert articles > 0 and stories > 0 and feeds >= 20 and pages > 0 and clicks == 0, counts
    # Every article is placed exactly once and every later version is one 'version' change; the
    # repair pass may add merges and splits on top (how many depends on what the cycles fetched).
    assert placed == placed_once == articles and versions == new_versions and unknown == 0, counts

    opml = _run(["publishers", "export"], cwd=tmp_path, env=env)
    (tmp_path / "pubs.opml").write_text(opml)
    imported = _run(["publishers", "import", str(tmp_path / "pubs.opml")], cwd=tmp_path,
                    env={"NEWSROOM_WAREHOUSE_ROOT": str(tmp_path / "store2"),
                         "NEWSROOM_INGEST_ALLOW_PRIVATE_ADDRESSES": "true"})  # the replay feeds are on loopback
    assert "20 publishers, 20 feeds" in imported
