"""Queries read the stored Parquet where it lies (issue 28), on a local folder and on S3 alike.

A query reads the files its predicates can match (their footers' statistics), never counts a row
a compaction already holds twice, skips and names a damaged file, and reads a newer release's
segment (issue 32).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from tasks.doctor import diagnose
from warehouse import layout
from warehouse.catalog import LOG_TABLES, is_compacted, plan_table
from warehouse.damage import collect_damage
from warehouse.duck import article_rows, connect, run_resilient
from warehouse.maintenance import compact_folder, compact_logs, merge_closed_days
from warehouse.schemas import ARTICLES_SCHEMA, CLICKS_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import list_segments, rows_to_table, table_to_parquet_bytes, write_segment

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


class Killed(Exception):
    pass


class DiesOnDelete:
    """A store whose process dies at its first delete."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def delete(self, key: str) -> None:
        raise Killed(key)


def _article(article_id: str, seen: datetime, **extra: object) -> dict[str, object]:
    row: dict[str, object] = {name: None for name in ARTICLES_SCHEMA.names}
    row.update(article_id=article_id, version=1, content_hash=f"h-{article_id}", publisher_id="p", language="en",
               title=f"title of {article_id}", first_seen_at=seen, url=f"https://p.example/{article_id}",
               canonical_url=f"https://p.example/{article_id}")
    row.update(extra)
    return row


def _write_articles(store: ObjectStore, day: datetime, name: str, rows: list[dict[str, object]]) -> str:
    key = layout.article_segment_key(day, name)
    write_segment(store, key, rows_to_table(rows, ARTICLES_SCHEMA), ARTICLES_SCHEMA)
    return key


def _count(store: ObjectStore, query: str, **params: object) -> Any:
    con = connect(store)
    try:
        return con.sql(query, params=params or None).fetchall()
    finally:
        con.close()


def _damage_the_pages(store: ObjectStore, key: str) -> None:
    """Overwrite every byte between the leading magic number and the footer: the footer (schema,
    statistics) still reads, any data page does not."""
    data = bytearray(store.get(key).data)
    footer = int.from_bytes(data[-8:-4], "little") + 8
    data[4:len(data) - footer] = b"\xff" * (len(data) - footer - 4)
    store.put(key, bytes(data))


def test_a_time_predicate_reads_only_the_files_it_can_match(store: ObjectStore) -> None:
    old_day, today = NOW - timedelta(days=2), NOW
    old = [_write_articles(store, old_day, f"old{i}", [_article(f"o{i}", old_day + timedelta(minutes=i))])
           for i in range(2)]
    compact_folder(store, LOG_TABLES["articles"], old[0].rsplit("/", 1)[0], old, min_segments=1)
    [compacted] = [k for k in list_segments(store, layout.ARTICLES_PREFIX) if is_compacted(k)]
    _write_articles(store, today, "new", [_article("n1", NOW - timedelta(minutes=10))])
    _damage_the_pages(store, compacted)

    recent = "select count(*) from articles where first_seen_at > $now - interval 1 hour"
    assert _count(store, recent, now=NOW) == [(1,)]  # the old file's pages are never read
    with pytest.raises(duckdb.Error, match="articles_settled"):
        _count(store, "select count(*), max(title) from articles")  # a whole scan reads them, and fails

    # ... unless it runs as every query of the site does: the damaged file is found, named, left out
    con = connect(store)
    try:
        with collect_damage() as damaged:
            whole = run_resilient(con, store, lambda: con.sql("select count(*), max(title) from articles").fetchall())
    finally:
        con.close()
    assert whole == [(1, "title of n1")]
    assert [d.key for d in damaged] == [compacted] and "pages" in damaged[0].problem


def test_a_compaction_that_died_before_its_deletes_counts_each_row_once(store: ObjectStore) -> None:
    keys = []
    for i in range(4):
        key = layout.click_segment_key(NOW, f"batch-{i}")
        row = {"click_id": f"c{i}", "article_id": "a", "story_id": "s", "reader_hash": "r", "surface": "top",
               "position": 1, "clicked_at": NOW + timedelta(minutes=i)}
        write_segment(store, key, rows_to_table([row], CLICKS_SCHEMA), CLICKS_SCHEMA)
        keys.append(key)
    with pytest.raises(Killed):
        compact_folder(DiesOnDelete(store), LOG_TABLES["clicks"], keys[0].rsplit("/", 1)[0], keys)  # type: ignore[arg-type]
    assert set(keys) <= set(list_segments(store, layout.CLICKS_PREFIX))  # the sources are all still there
    plan = plan_table(store, LOG_TABLES["clicks"])
    assert sorted(plan.superseded) == sorted(keys) and not plan.fresh and len(plan.settled) == 1
    assert _count(store, "select count(*) from clicks_log") == [(4,)]
    assert _count(store, "select count(*) from clicks") == [(4,)]
    compact_logs(store, NOW)  # the next run deletes what the compacted segment holds
    assert [k for k in list_segments(store, layout.CLICKS_PREFIX) if not is_compacted(k)] == []
    assert _count(store, "select count(*) from clicks") == [(4,)]


def test_a_segment_of_a_newer_release_is_read_and_never_called_damaged(store: ObjectStore) -> None:
    rows = [_article("a1", NOW - timedelta(minutes=3)), _article("a2", NOW - timedelta(minutes=2))]
    newer = rows_to_table(rows, ARTICLES_SCHEMA).append_column("sentiment", pa.array([0.5, -0.1], pa.float32()))
    key = layout.article_segment_key(NOW, "from-a-newer-release")
    store.put(key, table_to_parquet_bytes(newer))
    _write_articles(store, NOW, "ours", [_article("a3", NOW - timedelta(minutes=1))])

    with collect_damage() as damaged:
        assert _count(store, "select count(*), min(title) from articles") == [(3, "title of a1")]
    assert damaged == []
    assert [f for f in diagnose(store) if f.key == key] == []  # doctor leaves it where it is
    files = {f.key: f for f in plan_table(store, LOG_TABLES["articles"]).files}
    assert files[key].extra_columns == ("sentiment",)
    ours = [k for k in files if k != key]
    report = compact_folder(store, LOG_TABLES["articles"], key.rsplit("/", 1)[0], [key, *ours], min_segments=1)
    assert store.head(key) is not None  # never merged here: its extra column would be lost
    assert report.notes == ["1 segments hold columns of a newer release: left for it to compact"]
    assert report.compacted_segments == 1


def test_a_column_of_another_type_is_damage_skipped_and_named(store: ObjectStore) -> None:
    good = _write_articles(store, NOW, "good", [_article("a1", NOW)])
    other = rows_to_table([_article("a2", NOW)], ARTICLES_SCHEMA)
    other = other.set_column(other.schema.get_field_index("version"), "version", pa.array(["one"]))
    bad = layout.article_segment_key(NOW, "other-type")
    store.put(bad, table_to_parquet_bytes(other))
    with collect_damage() as damaged:
        assert _count(store, "select article_id from articles") == [("a1",)]
    assert [d.key for d in damaged] == [bad] and "version" in damaged[0].problem
    assert good in plan_table(store, LOG_TABLES["articles"]).fresh


def test_a_closed_day_is_merged_into_one_segment_sorted_by_article_id(store: ObjectStore) -> None:
    day = NOW - timedelta(days=1)
    folder = layout.article_segment_key(day, "x").rsplit("/", 1)[0]
    for hour in range(3):
        keys = [_write_articles(store, day, f"h{hour}m{m}", [_article(f"a{(hour * 7 + m * 3) % 11:02d}-{hour}{m}",
                                                                      day + timedelta(hours=hour, minutes=m))])
                for m in range(2)]
        compact_folder(store, LOG_TABLES["articles"], folder, keys, min_segments=1)
    assert len(list_segments(store, f"{folder}/")) == 3
    before = _count(store, "select article_id, first_seen_at from articles order by all")

    merge_closed_days(store, NOW)
    [merged] = list_segments(store, f"{folder}/")
    assert _count(store, "select article_id, first_seen_at from articles order by all") == before
    ids = [r[0] for r in _count(store, "select article_id from articles_log")]
    assert len(ids) == 6 and ids == sorted(ids)  # by id: a lookup by id reads the row groups that can hold it
    found = article_rows(store, ["a03-20", "nope"], ["article_id", "title"]).to_pylist()
    assert found == [{"article_id": "a03-20", "title": "title of a03-20"}]
    assert merge_closed_days(store, NOW).written_segments == 0  # a merged day stays as it is


def test_an_analysts_own_duckdb_reads_the_same_views_from_the_script(store: ObjectStore) -> None:
    from warehouse.duck import views_script

    old_day = NOW - timedelta(days=1)
    keys = [_write_articles(store, old_day, f"o{i}", [_article(f"o{i}", old_day + timedelta(minutes=i))])
            for i in range(3)]
    compact_folder(store, LOG_TABLES["articles"], keys[0].rsplit("/", 1)[0], keys, min_segments=1)
    _write_articles(store, NOW, "n", [_article("n1", NOW), _article("n1", NOW)])  # a row stored twice
    ours = _count(store, "select count(*), count(distinct article_id) from articles")
    script = views_script(store)
    if script.count("s3://"):
        assert "create secret" in script  # the analyst's DuckDB needs httpfs for s3:// (not run here)
        return
    analyst = duckdb.connect()
    analyst.execute(script)
    assert analyst.sql("select count(*), count(distinct article_id) from articles").fetchall() == ours == [(4, 4)]
    assert analyst.sql("select count(*) from stories").fetchall() == [(0,)]


def test_a_click_reloaded_the_next_day_counts_once_once_compacted(store: ObjectStore) -> None:
    def click(day: datetime, name: str) -> str:
        key = layout.click_batch_key(day, name)
        row = {"click_id": "c1", "article_id": "a", "story_id": "s", "reader_hash": "r", "surface": "top",
               "position": 1, "clicked_at": day}
        write_segment(store, key, rows_to_table([row], CLICKS_SCHEMA), CLICKS_SCHEMA)
        return key

    yesterday, today = NOW - timedelta(days=1), NOW.replace(hour=0, minute=5)
    click(yesterday, "first")
    compact_logs(store, NOW, min_segments=1)
    click(today, "reload")  # a token lives a day: the reload lands in the next day's folder
    compact_logs(store, NOW, min_segments=1)
    assert _count(store, "select count(*) from clicks") == [(1,)]


def test_a_merge_that_died_before_its_deletes_is_finished_and_doubles_nothing(store: ObjectStore) -> None:
    day = NOW - timedelta(days=1)
    folder = layout.article_segment_key(day, "x").rsplit("/", 1)[0]
    for hour in range(3):
        key = _write_articles(store, day, f"h{hour}", [_article(f"a{hour}", day + timedelta(hours=hour))])
        compact_folder(store, LOG_TABLES["articles"], folder, [key], min_segments=1)
    with pytest.raises(Killed):
        merge_closed_days(DiesOnDelete(store), NOW)  # type: ignore[arg-type]
    assert len(list_segments(store, f"{folder}/")) == 4  # the merged segment and the three it holds
    assert _count(store, "select count(*) from articles") == [(3,)]
    merge_closed_days(store, NOW)
    assert len(list_segments(store, f"{folder}/")) == 1
    assert _count(store, "select count(*) from articles") == [(3,)]
