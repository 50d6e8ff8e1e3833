"""Implausible publication times (1900, 9999, far future) never reach lag, polling or ranking; the
claim is kept in ``implausible_published_at``, a column old segments read as null (#16)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from tasks.health import check_health
from tasks.ingest.article import build_article_row
from tasks.ingest.commit import discovery_lag_by_tier
from tasks.ingest.plan import FeedJob
from tasks.registry import import_publishers
from transforms.feeds import FeedItem, is_plausible_published_at
from transforms.records import ArticleRow, FeedState
from warehouse import layout
from warehouse.duck import connect
from warehouse.schemas import ARTICLES_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import content_segment_id, list_segments, read_segments, rows_to_table, write_segment

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
HTML = b"<html><head><title>A headline long enough to keep</title></head><body><p>" + b"words of the body " * 40 + b"</p></body></html>"
JOB = FeedJob("f", "https://x.example/feed", "p", "en", "US", "", FeedState("f"), tier=1)

IMPLAUSIBLE = [
    (datetime(1900, 1, 1, tzinfo=UTC), "year-1900"),
    (datetime(1970, 1, 1, tzinfo=UTC), "unix-epoch"),
    (datetime(9999, 12, 31, tzinfo=UTC), "year-9999"),
    (NOW + timedelta(days=30), "next-month"),
    (NOW + timedelta(days=1, minutes=1), "just-past-a-day-ahead"),
]


def _row(feed_says: datetime | None, page_html: bytes = HTML, n: int = 0) -> ArticleRow:
    link = f"https://x.example/a{n}"
    item = FeedItem(link, link, "", "", feed_says, None, (), None, None, None)
    return build_article_row(JOB, item, page_html, link, NOW, embed=False)


@pytest.mark.parametrize("stated", [t for t, _ in IMPLAUSIBLE], ids=[i for _, i in IMPLAUSIBLE])
def test_an_implausible_time_is_dropped_and_kept_apart(stated: datetime) -> None:
    assert not is_plausible_published_at(stated, NOW)
    row = _row(stated)
    assert row.published_at is None and row.implausible_published_at == stated
    assert discovery_lag_by_tier(LocalStore(Path("/nonexistent-store")), [row]) == {}


def test_a_page_time_in_2099_falls_back_to_the_feeds() -> None:
    page = HTML.replace(b"<title>", b'<meta property="article:published_time" content="2099-01-01T00:00:00Z"><title>')
    feed_says = NOW - timedelta(minutes=7)
    row = _row(feed_says, page)
    assert row.published_at == feed_says and row.implausible_published_at == datetime(2099, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("stated", [NOW - timedelta(days=3650), NOW - timedelta(minutes=5), NOW + timedelta(hours=23)],
                         ids=["ten-years-ago", "minutes-ago", "time-zone-ahead"])
def test_a_plausible_time_is_kept(stated: datetime) -> None:
    row = _row(stated)
    assert row.published_at == stated and row.implausible_published_at is None


def test_health_does_not_page_on_implausible_times(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    csv = tmp_path / "p.csv"
    csv.write_text("publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section\n"
                   "p,P,x.example,US,en,1,0.9,false,false,https://x.example/feed,\n")
    import_publishers(store, csv)
    rows = [_row(datetime(1900, 1, 1, tzinfo=UTC) if n % 2 else NOW - timedelta(seconds=60), n=n) for n in range(20)]
    table = rows_to_table([row.to_row() for row in rows], ARTICLES_SCHEMA)
    write_segment(store, layout.article_segment_key(NOW, content_segment_id(table)), table, ARTICLES_SCHEMA)
    assert not [f for f in check_health(store, NOW) if f.check == "freshness_lag"]


def test_segments_written_before_the_column_still_read(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    old_schema = pa.schema([f for f in ARTICLES_SCHEMA if f.name != "implausible_published_at"])
    row = {k: v for k, v in _row(NOW - timedelta(minutes=3)).to_row().items() if k in old_schema.names}
    old = pa.Table.from_pylist([row], schema=old_schema)
    key = layout.article_segment_key(NOW, "old-segment")
    store.put(key, _parquet(old))
    table = read_segments(store, list_segments(store, layout.ARTICLES_PREFIX), ARTICLES_SCHEMA)
    assert table.column("implausible_published_at").to_pylist() == [None]
    con = connect(store)
    try:
        assert con.sql("select count(*), count(implausible_published_at) from articles").fetchall() == [(1, 0)]
    finally:
        con.close()


def _parquet(table: pa.Table) -> bytes:
    import io

    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()
