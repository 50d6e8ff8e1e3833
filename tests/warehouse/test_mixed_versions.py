"""A deployment being upgraded: the release before issue 28 and this one read and write one store.

While replicas and workers are upgraded one by one, both releases run against the same logs: the
earlier one must count what this one writes (compacted segments that name what they hold, a merged
day, a compaction that died before its deletes), and this one what the earlier one wrote
(compacted segments that say nothing of their sources). Each answers the same queries the same.

One exception, by design: this release's article segments carry ``embedding_model`` (issue 33), a
column the earlier release does not know. The earlier release names each such segment as damaged
and skips it, and its maintenance leaves it in place; nothing is lost, and the upgrade order in
docs/store-faults.md (the pipeline's deployments together, before the analysts' tools) applies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from warehouse import layout
from warehouse.catalog import LOG_TABLES
from warehouse.duck import connect
from warehouse.maintenance import compact_folder, merge_closed_days
from warehouse.schemas import ARTICLES_SCHEMA, CLICKS_SCHEMA, STORY_CHANGES_SCHEMA
from warehouse.store import LocalStore, ObjectStore
from warehouse.tables import rows_to_table, write_segment

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
EARLIER = "3a6d4c0"
"""The last release whose queries read every segment into memory (before issue 28)."""
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
QUERIES = {
    "articles": "select count(*), count(distinct article_id), min(title), max(first_seen_at) from articles",
    "stories": "select count(*), sum(article_count), max(publisher_count) from stories",
    "changes": "select count(*), count(distinct change_id), max(\"offset\") from story_changes",
    "clicks": "select count(*), count(distinct click_id) from clicks",
    "last_hour": "select count(*) from articles where first_seen_at > timestamptz '2026-12-03 11:00:00+00'",
}


@pytest.fixture(scope="module")
def earlier_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp(f"newsroom-{EARLIER}")
    archive = subprocess.run(["git", "-C", str(REPO), "archive", EARLIER], capture_output=True)
    if archive.returncode != 0:
        pytest.skip(f"git history without {EARLIER} (a shallow clone)")
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def _answers(store: ObjectStore) -> dict[str, Any]:
    con = connect(store)
    try:
        return {name: [list(map(str, row)) for row in con.sql(q).fetchall()] for name, q in QUERIES.items()}
    finally:
        con.close()


def _earlier_answers(code: Path, root: Path) -> tuple[dict[str, Any], str]:
    """The earlier release's answers, and what it logged (the segments it named as damaged)."""
    script = ("import json, sys\nfrom warehouse.duck import connect\nfrom warehouse.store import LocalStore\n"
              "con = connect(LocalStore(sys.argv[1]))\nqueries = json.loads(sys.argv[2])\n"
              "print(json.dumps({n: [list(map(str, r)) for r in con.sql(q).fetchall()] for n, q in queries.items()}))\n")
    done = subprocess.run([sys.executable, "-c", script, str(root), json.dumps(QUERIES)], capture_output=True,
                          text=True, timeout=300, cwd=code, env={**os.environ, "PYTHONPATH": str(code)})
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1])), done.stderr


def _assert_earlier_reads(store: ObjectStore, earlier: dict[str, Any], log: str, ours: dict[str, Any]) -> None:
    """The earlier release answers as this one on every log but articles; the article segments it
    cannot read are each named, for the new column, and are still stored."""
    assert {k: v for k, v in earlier.items() if k not in ("articles", "stories", "last_hour")} == \
        {k: v for k, v in ours.items() if k not in ("articles", "stories", "last_hour")}
    article_keys = store.list(layout.ARTICLES_PREFIX)
    assert article_keys
    for key in article_keys:
        named = [line for line in log.splitlines() if f"key={key} " in line]
        assert named and "embedding_model" in named[0] and "action=skipped" in named[0], (key, log[-1500:])
    assert earlier["articles"][0][0] == "0"  # it counts none of them, and counts nothing twice


def _earlier_maintenance(code: Path, root: Path) -> None:
    script = ("import sys\nfrom datetime import datetime\nfrom warehouse.maintenance import compact_logs\n"
              "from warehouse.store import LocalStore\n"
              "compact_logs(LocalStore(sys.argv[1]), datetime.fromisoformat(sys.argv[2]), min_segments=1)\n")
    done = subprocess.run([sys.executable, "-c", script, str(root), (NOW + timedelta(days=2)).isoformat()],
                          capture_output=True, text=True, timeout=300, cwd=code,
                          env={**os.environ, "PYTHONPATH": str(code)})
    assert done.returncode == 0, done.stderr[-2000:]


def _article(i: int, seen: datetime) -> dict[str, object]:
    row: dict[str, object] = {name: None for name in ARTICLES_SCHEMA.names}
    row.update(article_id=f"a{i:03d}", version=1, content_hash=f"h{i}", publisher_id=f"p{i % 3}", language="en",
               title=f"headline {i:03d}", first_seen_at=seen, url=f"https://p.example/{i}",
               canonical_url=f"https://p.example/{i}")
    return row


def _build(store: ObjectStore) -> None:
    """Two days of articles, their changes and clicks, as this release lays them out: yesterday
    compacted hour by hour and merged, today's hours compacted with the last one left as written,
    and one compaction that died before deleting its sources."""
    offset = 0
    for day in (NOW - timedelta(days=1), NOW.replace(hour=0)):
        for hour in range(3):
            keys: dict[str, list[str]] = {"articles": [], "story_changes": [], "clicks": []}
            for minute in (0, 20, 40):
                at = day + timedelta(hours=hour * 4, minutes=minute)
                i = offset
                art = rows_to_table([_article(i, at), _article(i + 1, at)], ARTICLES_SCHEMA)
                key = layout.article_segment_key(at, f"s{i}")
                write_segment(store, key, art, ARTICLES_SCHEMA)
                keys["articles"].append(key)
                changes = [{"change_id": f"en:{o}", "offset": o, "language": "en",
                            "kind": "new_story" if o % 4 == 0 else "assign", "story_id": f"s{o // 4}",
                            "article_id": f"a{o:03d}", "copy_of": None, "other_story_id": None, "score": 1.0,
                            "changed_at": at + timedelta(seconds=30)} for o in (i, i + 1)]
                key = layout.story_changes_key("en", i)
                write_segment(store, key, rows_to_table(changes, STORY_CHANGES_SCHEMA), STORY_CHANGES_SCHEMA)
                keys["story_changes"].append(key)
                # the third click of an hour reloads its first (one click, counted once)
                click_id = f"c{i - 4}" if minute == 40 else f"c{i}"
                clicks = [{"click_id": click_id, "article_id": f"a{i:03d}", "story_id": f"s{i // 4}",
                           "reader_hash": "r", "surface": "top", "position": 1, "clicked_at": at}]
                key = layout.click_batch_key(at, f"b{i}")
                write_segment(store, key, rows_to_table(clicks, CLICKS_SCHEMA), CLICKS_SCHEMA)
                keys["clicks"].append(key)
                offset += 2
            if day.date() == NOW.date() and hour == 2:
                continue  # the last hour, as written
            for name, written in keys.items():
                folder = written[0].rsplit("/", 1)[0]
                if day.date() == NOW.date() and hour == 1 and name == "articles":
                    class DiesOnDelete:
                        def __getattr__(self, attribute: str) -> Any:
                            return getattr(store, attribute)

                        def delete(self, key: str) -> None:
                            raise RuntimeError("killed")

                    with pytest.raises(RuntimeError):
                        compact_folder(DiesOnDelete(), LOG_TABLES[name], folder, written, min_segments=1)  # type: ignore[arg-type]
                    continue
                compact_folder(store, LOG_TABLES[name], folder, written, min_segments=1)
    merge_closed_days(store, NOW)


def test_both_releases_answer_alike_on_a_store_this_one_wrote(earlier_code: Path, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    _build(store)
    ours = _answers(store)
    assert ours["articles"][0][:2] == ["36", "36"]  # nothing counted twice, the died compaction included
    _assert_earlier_reads(store, *_earlier_answers(earlier_code, store.root), ours)


def test_this_release_reads_what_the_earlier_one_compacted(earlier_code: Path, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    _build(store)
    before = _answers(store)
    articles = sorted(store.list(layout.ARTICLES_PREFIX))
    _earlier_maintenance(earlier_code, store.root)  # its compacted segments name no sources
    assert sorted(store.list(layout.ARTICLES_PREFIX)) == articles  # what it cannot read it leaves alone
    assert _answers(store) == before
    _assert_earlier_reads(store, *_earlier_answers(earlier_code, store.root), before)
