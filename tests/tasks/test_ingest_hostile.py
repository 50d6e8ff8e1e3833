"""Hostile pages cost an ingest run what normal ones do (issue 32).

The hostile feed is the replay site's ``hostile_pages`` fault (``replay/hostile.py``): 1 MB titles,
ledes and bodies without a space, a title of 10,000 character references, 4.5 MB and 100 MB of nested
markup. The per-article budget's own tests are in ``test_ingest_budget.py``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from corpus_paths import CLUSTERING_CORPORA

from replay.hostile import HOSTILE_KINDS, hostile_url
from replay.site import ReplaySite
from tasks.registry import import_publishers
from tasks.replay_control import download_publishers_csv
from transforms.features import ENTITY_MAX_CHARS, TERM_MAX_CHARS
from transforms.feeds import TITLE_MAX_CHARS
from warehouse.store import LocalStore
from warehouse.tables import parquet_bytes_to_table

pytestmark = pytest.mark.integration

START = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
NOW = START + timedelta(hours=1, minutes=5)
RUN_ADDRESS_SPACE = 6 * 2**30
"""Every process of the ingest run below gets at most this much address space (a hard limit its article
workers inherit), so the code before the caps fails fast instead of taking the machine's memory: one
1 MB line once took 6.3 GB."""
PEAK_RSS_BOUND_MB = 1024
"""No process of the hostile run may grow past this; a normal run's largest (the ingest process with
16 pages in flight and no workers) is about 460 MB (bench/hostile_ingest.py)."""

_CYCLE = """
import json, sys
from datetime import datetime
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
from tasks.ingest.commit import commit_ingest
from tasks.ingest.plan import plan_due_feeds
from tasks.ingest.poll import poll_shard
from tasks.settings import IngestSettings
from warehouse.store import LocalStore

store_path, now = sys.argv[1], datetime.fromisoformat(sys.argv[2])
settings = IngestSettings(allow_private_addresses=True, host_rate_per_second=50.0, host_burst=50.0,
                          connect_timeout_seconds=5.0, read_timeout_seconds=10.0, total_timeout_seconds=60.0)
store = LocalStore(Path(store_path))
with ThreadPoolExecutor(max_workers=4) as pool:
    shards = list(pool.map(lambda jobs: poll_shard(jobs, settings, now), plan_due_feeds(store, now, shards=4)))
summary = commit_ingest(store, shards, now)
print(json.dumps(summary, default=str))
"""
"""One ingest run as the flow runs it (four shards on threads, then the commit); the article workers
stop at exit, and the run's process waits for them."""


@pytest.fixture(scope="module")
def site() -> Iterator[ReplaySite]:
    replay = ReplaySite.from_corpora(CLUSTERING_CORPORA, seed=7, start=START, limit=60, span_hours=1.0)
    replay.start(port=0)
    replay.set_clock(NOW)
    try:
        yield replay
    finally:
        replay.stop()


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (RUN_ADDRESS_SPACE, RUN_ADDRESS_SPACE))


def _rows(store: LocalStore, prefix: str) -> list[dict[str, Any]]:
    return [row for key in store.list(prefix) for row in parquet_bytes_to_table(store.get(key).data).to_pylist()]


def test_a_hostile_feed_costs_what_a_normal_one_does_and_the_other_articles_are_stored(
        site: ReplaySite, tmp_path: Path) -> None:
    """One ingest run (in a fresh process, as the flow runs it) over every publisher, one of whose feeds
    carries the hostile items: no process grows past PEAK_RSS_BOUND_MB, every other article is stored,
    each hostile item is stored with its texts capped or named as a page error."""
    hostile = next(p for p in site.publishers if p.language == "en")
    site.set_faults({hostile.publisher_id: "hostile_pages"})
    try:
        store = LocalStore(tmp_path / "store")
        import_publishers(store, download_publishers_csv(site.control_url, tmp_path / "publishers.csv"))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        proc = subprocess.Popen([sys.executable, "-c", _CYCLE, str(tmp_path / "store"), NOW.isoformat()],
                                stdout=subprocess.PIPE, text=True, env=env, preexec_fn=_limit_address_space)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)  # the run's own usage: its largest process, workers included
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        site.set_faults({hostile.publisher_id: None})
    assert proc.returncode == 0
    summary = json.loads(out.strip().splitlines()[-1])
    peak_mb = usage.ru_maxrss / 1024
    assert peak_mb < PEAK_RSS_BOUND_MB, f"a process of the run reached {peak_mb:.0f} MB"

    articles = _rows(store, "log/articles/")
    stored = {row["canonical_url"] for row in articles}
    released = {a.url for p in site.publishers for a in site.released(p.publisher_id, NOW)}
    assert released <= stored, sorted(released - stored)[:5]
    assert summary["errors"] == {"page_too_large": 1}, summary["errors"]
    (too_large,) = [r for r in _rows(store, "log/fetches/") if r["error_kind"]]
    assert too_large["url"] == hostile_url(hostile.base_url, "nested-100mb") and too_large["kind"] == "page"
    by_kind = {row["url"].rsplit("/", 1)[-1]: row for row in articles if "/articles/hostile/" in row["url"]}
    assert set(by_kind) == set(HOSTILE_KINDS) - {"nested-100mb"}
    for kind, row in by_kind.items():
        assert len(row["title"]) <= TITLE_MAX_CHARS and len(row["snippet"]) <= 200, kind
        assert all(len(t) <= TERM_MAX_CHARS for t in row["terms"]), kind
        assert all(len(e) <= ENTITY_MAX_CHARS for e in row["entities"]), kind
        assert row["embedding"] is not None and any(row["embedding"]), kind
    assert by_kind["long-title"]["title"].startswith("titleabcdefghijklmnopqrstu")
    assert by_kind["entities"]["title"].startswith("éé&éé&")  # references resolved, then capped
