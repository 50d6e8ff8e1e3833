"""Compaction never doubles a row (a crash between writing and deleting included), never feeds the
profiles fold a click twice, never hides articles from a language writer that has not run yet, and
never folds away story changes a crashed writer has not committed (its restart rolls them forward)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tasks.profiles import fold_clicks
from tasks.writer.run import cluster_language
from warehouse import layout
from warehouse.duck import connect
from warehouse.maintenance import compact_logs, consumed_by_every_writer, is_compacted
from warehouse.schemas import ARTICLES_SCHEMA, CLICKS_SCHEMA
from warehouse.store import LocalStore, ObjectStore
from warehouse.tables import list_segments, read_segments, rows_to_table, write_segment

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from repair_corpus import PUBLISHERS, T0, changes_of, two_event_stream, write_articles  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

DAY = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
NEXT_DAY = datetime(2026, 1, 2, 1, 0, tzinfo=UTC)


class Killed(BaseException):
    """Stands for SIGKILL: not an Exception, so nothing on the way catches it."""


class DiesOnDelete:
    """A store whose process dies at the ``after``-th delete (0: the first)."""

    def __init__(self, inner: ObjectStore, after: int) -> None:
        self.inner, self.after = inner, after

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def delete(self, key: str) -> None:
        if self.after == 0:
            raise Killed(key)
        self.after -= 1
        self.inner.delete(key)


def _click(i: int, reader: str = "r1") -> dict[str, Any]:
    return {"click_id": f"c{i}", "article_id": "a1", "story_id": "s1", "reader_hash": reader, "surface": "top",
            "position": 1, "clicked_at": DAY + timedelta(minutes=i)}


def _write_clicks(store: ObjectStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        write_segment(store, layout.click_segment_key(DAY, f"c{i}"), rows_to_table([_click(i)], CLICKS_SCHEMA),
                      CLICKS_SCHEMA)


def _clicks_log(store: ObjectStore) -> list[str]:
    return sorted(read_segments(store, list_segments(store, layout.CLICKS_PREFIX), CLICKS_SCHEMA)
                  .column("click_id").to_pylist())


@pytest.mark.parametrize("deleted_before_crash", [0, 2, 3], ids=["none", "half", "all-but-one"])
def test_a_crash_between_write_and_deletes_doubles_no_click(store: ObjectStore, deleted_before_crash: int) -> None:
    _write_clicks(store, 4)
    with pytest.raises(Killed):
        compact_logs(DiesOnDelete(store, deleted_before_crash), NEXT_DAY)
    report = compact_logs(store, NEXT_DAY)  # the rerun
    assert report.compacted_segments == 4 - deleted_before_crash
    keys = list_segments(store, layout.CLICKS_PREFIX)
    assert len(keys) == 1 and is_compacted(keys[0])
    assert _clicks_log(store) == [f"c{i}" for i in range(4)]  # the raw log: each click once
    assert compact_logs(store, NEXT_DAY).compacted_segments == 0  # and a third run changes nothing


def test_late_clicks_go_to_a_new_compacted_segment(store: ObjectStore) -> None:
    _write_clicks(store, 4)
    compact_logs(store, NEXT_DAY)
    _write_clicks(store, 4, start=4)
    _write_clicks(store, 1, start=0)  # the same click again (a reload of the link after compaction)
    report = compact_logs(store, NEXT_DAY)
    assert (report.written_segments, report.compacted_segments) == (1, 5)
    assert all(is_compacted(k) for k in list_segments(store, layout.CLICKS_PREFIX))
    assert _clicks_log(store) == [f"c{i}" for i in range(8)]


def test_the_clicks_view_counts_a_click_once(store: ObjectStore) -> None:
    _write_clicks(store, 2)
    # The same click under a second key (e.g. left by a compaction from before this fix).
    write_segment(store, layout.click_segment_key(DAY, "compact-old"), rows_to_table([_click(0)], CLICKS_SCHEMA),
                  CLICKS_SCHEMA)
    con = connect(store)
    try:
        assert con.sql("select count(*), count(distinct click_id) from clicks").fetchall() == [(2, 2)]
    finally:
        con.close()


def test_profiles_do_not_fold_compacted_clicks_again(store: ObjectStore, tmp_path: Path) -> None:
    _write_clicks(store, 4)
    db = str(tmp_path / "profiles.sqlite3")
    assert fold_clicks(store, db, NEXT_DAY, 24.0) == {"segments": 4, "clicks": 4, "readers": 1}
    with pytest.raises(Killed):
        compact_logs(DiesOnDelete(store, 1), NEXT_DAY)  # the compacted segment and 3 sources coexist
    assert fold_clicks(store, db, NEXT_DAY + timedelta(minutes=1), 24.0) == {"segments": 1, "clicks": 0, "readers": 0}
    compact_logs(store, NEXT_DAY)
    _write_clicks(store, 1, start=9)
    assert fold_clicks(store, db, NEXT_DAY + timedelta(minutes=2), 24.0) == {"segments": 1, "clicks": 1, "readers": 1}


def test_profiles_written_before_click_ids_were_recorded_do_not_refold(store: ObjectStore, tmp_path: Path) -> None:
    import sqlite3

    _write_clicks(store, 4)
    db = str(tmp_path / "profiles.sqlite3")
    fold_clicks(store, db, NEXT_DAY, 24.0)
    with sqlite3.connect(db) as con:  # a profile store from before clicks_folded: segment keys only
        con.execute("delete from clicks_folded")
    compact_logs(store, NEXT_DAY)
    assert fold_clicks(store, db, NEXT_DAY + timedelta(minutes=1), 24.0)["clicks"] == 0


def _articles_log(store: ObjectStore) -> list[tuple[str, int]]:
    table = read_segments(store, list_segments(store, layout.ARTICLES_PREFIX), ARTICLES_SCHEMA)
    return sorted(zip(table.column("article_id").to_pylist(), table.column("version").to_pylist(), strict=True))


def test_a_crash_in_article_compaction_doubles_no_article(store: ObjectStore) -> None:
    write_articles(store, two_event_stream())
    now = T0 + timedelta(minutes=40)
    cluster_language(store, "en", now)
    before = _articles_log(store)
    with pytest.raises(Killed):
        compact_logs(DiesOnDelete(store, 5), now + timedelta(days=1))
    compact_logs(store, now + timedelta(days=1))
    assert _articles_log(store) == before
    assert all(is_compacted(k) for k in list_segments(store, layout.ARTICLES_PREFIX))


def test_articles_of_a_language_without_a_writer_checkpoint_are_kept_for_it(store: ObjectStore) -> None:
    write_articles(store, two_event_stream(), language="en")
    lyon = "Le conseil municipal de Lyon vote le budget {}. Les élus débattent longuement du projet."
    write_articles(store, [(f"fr{i}", lyon.format(i), 20 + i, PUBLISHERS[i]) for i in range(4)], language="fr")
    now = T0 + timedelta(minutes=40)
    assert cluster_language(store, "en", now)["committed"]
    assert consumed_by_every_writer(store, ["en", "fr"]) == set()  # fr has consumed nothing yet

    report = compact_logs(store, now + timedelta(days=1))
    assert report.compacted_segments == 12  # the English-only segments
    assert any("fr" in note for note in report.notes)
    fr = cluster_language(store, "fr", now + timedelta(days=1))
    assert fr["articles"] == 4
    # Once fr has consumed them, they are compacted too.
    assert compact_logs(store, now + timedelta(days=1)).compacted_segments == 4
    assert not [k for k in list_segments(store, layout.ARTICLES_PREFIX) if not is_compacted(k)]


def _cluster_killed_after_changes(root: Path, now: datetime) -> int:
    """Run the English writer in a child process that SIGKILLs itself after writing its change
    segment, before its checkpoint moves; returns the child's exit code."""
    code = ("import sys; from datetime import datetime; from tasks.writer.run import cluster_language; "
            "from warehouse.store import LocalStore; "
            "cluster_language(LocalStore(sys.argv[1]), 'en', datetime.fromisoformat(sys.argv[2]))")
    env = {**os.environ, "NEWSROOM_DEBUG_CRASH_POINT": "cluster.after_changes", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code, str(root), now.isoformat()], env=env,
                          capture_output=True, timeout=120).returncode


def test_compaction_between_a_writer_crash_and_its_restart_loses_and_doubles_no_decision(tmp_path: Path) -> None:
    stream = two_event_stream()
    store = LocalStore(tmp_path / "store")
    write_articles(store, stream)
    for minute in (2, 5, 8):  # three committed runs, one change segment each
        assert cluster_language(store, "en", T0 + timedelta(minutes=minute, seconds=30))["committed"]
    assert _cluster_killed_after_changes(tmp_path / "store", T0 + timedelta(minutes=40)) == -9
    crashed_at = json.loads(store.get(layout.story_checkpoint_key("en")).data)["offset"]
    assert crashed_at == 9 and len(changes_of(store)) == 12  # three changes written, not committed

    compact_logs(store, T0 + timedelta(days=1))  # the next day: every change precedes it
    # The restart rolls the crashed run forward and finds nothing left to decide.
    assert cluster_language(store, "en", T0 + timedelta(days=1, minutes=1))["articles"] == 0
    assert json.loads(store.get(layout.story_checkpoint_key("en")).data)["offset"] == 12
    compact_logs(store, T0 + timedelta(days=1))  # now the rolled-forward segment is folded too
    assert all(is_compacted(k) for k in list_segments(store, layout.STORY_CHANGES_PREFIX))

    reference = LocalStore(tmp_path / "reference")  # the same runs, with no crash and no compaction
    write_articles(reference, stream)
    for minute in (2, 5, 8, 40):
        cluster_language(reference, "en", T0 + timedelta(minutes=minute, seconds=30 if minute < 40 else 0))
    ids = [c["change_id"] for c in changes_of(store)]
    assert sorted(ids) == sorted(f"en:{i}" for i in range(12))  # the raw log: each change once
    con, ref = connect(store), connect(reference)
    try:
        query = "select article_id, story_id, kind, \"offset\" from story_changes order by all"
        assert con.sql(query).fetchall() == ref.sql(query).fetchall()
        assert con.sql("select count(*), count(distinct article_id) from story_assignments").fetchall() == [
            (len(stream), len(stream))]
    finally:
        con.close()
        ref.close()
