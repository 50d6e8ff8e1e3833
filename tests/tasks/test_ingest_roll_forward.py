"""A crashed ingest commit is rolled forward: the log holds each article version once (issue 28)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tasks.identity import assign_identities, commit_identities, mark_pending, roll_forward_pending
from transforms.records import ArticleRow
from warehouse import layout
from warehouse.duck import connect
from warehouse.schemas import ARTICLES_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import content_segment_id, list_segments, read_segment, rows_to_table, write_segment

NOW = datetime(2026, 12, 3, 23, 59, 30, tzinfo=UTC)


def _row(article_id: str, seen: datetime, text: str = "a") -> ArticleRow:
    return ArticleRow(article_id=article_id, version=1, content_hash=f"h-{article_id}-{text}",
                      url=f"https://p.example/{article_id}", canonical_url=f"https://p.example/{article_id}",
                      feed_id="f", publisher_id="p", language="en", region="GB", title=f"Title {article_id}",
                      snippet="s", image_url=None, author=None, section=None, categories=(), is_opinion=False,
                      published_at=None, first_seen_at=seen, simhash=1, minhash=(1, 2), terms=("t",),
                      term_weights=(1.0,), entities=(), embedding=None, signature_version="v")


def _write_like_a_run_that_died(store: LocalStore, rows: list[ArticleRow], now: datetime) -> str:
    """Ingest's commit up to its segment: the marker, the segment, and no identity shards."""
    batch = assign_identities(store, rows, now)
    table = rows_to_table([r.to_row() for r in batch.rows], ARTICLES_SCHEMA)
    key = layout.article_segment_key(now, content_segment_id(table))
    mark_pending(store, key)
    write_segment(store, key, table, ARTICLES_SCHEMA)
    return key


def _commit(store: LocalStore, rows: list[ArticleRow], now: datetime) -> list[ArticleRow]:
    """A whole commit of ``rows``: what the rerun stores."""
    roll_forward_pending(store, now)
    batch = assign_identities(store, rows, now)
    if batch.rows:
        table = rows_to_table([r.to_row() for r in batch.rows], ARTICLES_SCHEMA)
        write_segment(store, layout.article_segment_key(now, content_segment_id(table)), table, ARTICLES_SCHEMA)
    commit_identities(store, batch, now)
    return batch.rows


def test_the_rerun_after_a_crash_between_segment_and_identities_writes_no_article_twice(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    first = [_row("a1", NOW), _row("a2", NOW)]
    crashed = _write_like_a_run_that_died(store, first, NOW)
    later = NOW + timedelta(minutes=1)  # past midnight: the rerun writes into the next day's folder
    again = [replace(r, first_seen_at=later) for r in first] + [_row("a3", later)]
    stored = _commit(store, again, later)
    assert [r.article_id for r in stored] == ["a3"]  # a1 and a2 were rolled forward, not written again
    assert store.head(layout.INGEST_PENDING_KEY) is None
    con = connect(store)
    try:
        rows = con.sql("select article_id, first_seen_at from articles_log order by 1").fetchall()
    finally:
        con.close()
    assert rows == [("a1", NOW), ("a2", NOW), ("a3", later)]
    assert crashed in list_segments(store, layout.ARTICLES_PREFIX)


def test_a_marker_naming_no_segment_is_dropped(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    mark_pending(store, layout.article_segment_key(NOW, "never-written"))
    assert roll_forward_pending(store, NOW) == 0
    assert store.head(layout.INGEST_PENDING_KEY) is None
    assert [r.article_id for r in _commit(store, [_row("a1", NOW)], NOW)] == ["a1"]


def test_a_garbage_marker_is_named_and_dropped(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    store.put(layout.INGEST_PENDING_KEY, b"{not json")
    assert roll_forward_pending(store, NOW) == 0
    assert store.head(layout.INGEST_PENDING_KEY) is None


def test_an_article_row_reads_back_as_the_record_it_was(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    row = replace(_row("a1", NOW), categories=("world",), embedding=(0.5, -0.25))
    table = rows_to_table([row.to_row()], ARTICLES_SCHEMA)
    write_segment(store, "log/articles/date=2026-12-03/x.parquet", table, ARTICLES_SCHEMA)
    [read] = read_segment(store, "log/articles/date=2026-12-03/x.parquet", ARTICLES_SCHEMA).to_pylist()
    assert ArticleRow.from_row(read) == row
    assert json.dumps(ArticleRow.from_row(read).to_row(), default=str) == json.dumps(row.to_row(), default=str)
