"""Crash safety: SIGKILL each flow at each crash point, rerun, and compare with an uninterrupted run.

The writer's points cover every step of a commit of its state as a base and deltas: the run's
delta, its change segment, the checkpoint, and a compaction's new base before its note.

No article may be lost or doubled, no article assigned twice, the pages must match, and every live
pointer must resolve to a readable version right after the kill (pages keep being served).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pipeline_harness import cycle_times, pipeline_env, replay_site

from flows.cycle import pipeline_cycle
from tasks.crashpoints import CRASH_POINTS
from tasks.registry import import_publishers
from tasks.replay_control import download_publishers_csv
from warehouse.duck import connect
from warehouse.snapshots import list_live_pages, read_live_page, read_live_stories
from warehouse.store import ObjectStore

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CYCLES = cycle_times(4)
CRASH_CYCLE = 2  # the third cycle: pages are live and every stage has new work


def _logical_state(store: ObjectStore) -> dict[str, Any]:
    con = connect(store)
    try:
        state: dict[str, Any] = {
            "articles_log": con.sql("select article_id, version, content_hash, first_seen_at from articles_log "
                                    "order by all").fetchall(),
            "assignments": con.sql("select article_id, kind, story_id, copy_of from story_changes_log "
                                   "order by all").fetchall(),
        }
    finally:
        con.close()
    pages = {}
    for edition, section in list_live_pages(store):
        payload = json.loads(read_live_page(store, edition, section).data)
        payload.pop("version")
        pages[f"{edition}/{section}"] = payload
    stories = json.loads(read_live_stories(store).data)
    stories.pop("version")
    state["pages"] = pages
    state["stories"] = stories
    return state


def _run_flow_killed(flow: str, now: datetime, point: str, store_vars: dict[str, str]) -> int:
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, **store_vars, "NEWSROOM_INGEST_ALLOW_PRIVATE_ADDRESSES": "true",
           "NEWSROOM_DEBUG_CRASH_POINT": point, "PREFECT_API_URL": str(PREFECT_API_URL.value()),
           "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "flows.cli", flow, "--now", now.isoformat()], env=env,
                            capture_output=True, text=True, timeout=300)
    return result.returncode


def _pipeline(root: Path, port: int, crash: str | None, *, prefix: Path | None = None) -> dict[str, Any]:
    """Every cycle on the store at ``root``, on a fresh replay site on the same port (so the same
    article URLs).

    Without ``crash`` (the reference run) the store as it stands before the crashed cycle is copied
    to ``prefix``; with it, the run starts from that copy, kills ``crash``'s flow in the crashed
    cycle, reruns it, and runs the cycles after it. The cycles before the crash are the same in every
    run (the reference comparison would show otherwise), so they run once per module.
    """
    store_vars = {"NEWSROOM_WAREHOUSE_ROOT": str(root)}
    if crash is not None:
        assert prefix is not None
        shutil.copytree(prefix, root)
    with replay_site(limit=50, port=port) as site, pipeline_env(store_vars) as store:
        if crash is None:
            import_publishers(store, download_publishers_csv(site.control_url, root.parent / "p.csv"))
        for i, now in enumerate(CYCLES):
            if crash is None and i == CRASH_CYCLE and prefix is not None:
                shutil.copytree(root, prefix)
            if crash is not None and i < CRASH_CYCLE:
                continue
            site.set_clock(now)
            if crash is not None and i == CRASH_CYCLE:
                flow = crash.split(".")[0]
                before = list_live_pages(store)
                if flow in ("cluster", "rank"):  # run the stages before the one that crashes
                    from flows.ingest import ingest_feeds

                    ingest_feeds(now=now.isoformat())
                if flow == "rank":
                    from flows.cluster import cluster_stories

                    cluster_stories(now=now.isoformat())
                assert _run_flow_killed(flow, now, crash, store_vars) == -9, f"{crash} did not fire"
                for edition, section in before:  # every pointer still names a readable version
                    read_live_page(store, edition, section)
            pipeline_cycle(now=now.isoformat())  # the rerun (or a normal cycle)
        return _logical_state(store)


@pytest.fixture(scope="module")
def fold_every_run() -> Iterator[None]:
    """Every cluster run folds its writer's chain into a new base after its commit and the next run
    adopts it, so the crashed cycle kills a run whose state is a delta on an adopted base, and
    ``cluster.after_fold`` fires between a fold and its note (issue 15). The reference run and every
    crashed one (in-process and the killed child alike) run with it."""
    from tasks.settings import forget_environment_settings

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NEWSROOM_SCALE_WRITER_COMPACT_EVERY", "1")
        forget_environment_settings()
        yield
    forget_environment_settings()


@pytest.fixture(scope="module")
def reference_run(prefect_harness: None, fold_every_run: None,
                  tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path, dict[str, Any]]:
    """The uninterrupted run every crash point is compared with, once per module; the replay site's
    port it used (each crashed run replays the same article URLs); and its store as it stood before
    the crashed cycle, where each crashed run starts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    folder = tmp_path_factory.mktemp("crash-reference")
    prefix = folder / "before-crash-cycle"
    reference = _pipeline(folder / "reference", port, None, prefix=prefix)
    assert reference["articles_log"] and reference["pages"] and prefix.is_dir()
    ids = [row[0] for row in reference["assignments"]]
    assert len(ids) == len(set(ids)), "an article was assigned twice"
    return port, prefix, reference


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_crash_point_recovers(reference_run: tuple[int, dict[str, Any]], point: str, tmp_path: Path) -> None:
    """One test per point: each replays the crashed cycle and the ones after it (half a minute), so
    together they would outrun one test's timeout."""
    port, prefix, reference = reference_run
    state = _pipeline(tmp_path / point.replace(".", "-"), port, point, prefix=prefix)
    differs = sorted(k for k in reference if state[k] != reference[k])
    assert not differs, f"after a kill at {point}, {differs} differ from the uninterrupted run"
