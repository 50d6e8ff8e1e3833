"""The dashboards' logs (fetches, listings; issue 18) are merged at every maintenance run, today's too,
without changing what the views answer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from warehouse import layout
from warehouse.duck import connect
from warehouse.maintenance import compact_logs, is_compacted
from warehouse.schemas import FETCHES_SCHEMA, LISTINGS_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import content_segment_id, rows_to_table, write_segment

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _fetch(i: int) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(FETCHES_SCHEMA.names)
    row.update(fetch_id=f"f{i}", fetched_at=NOW - timedelta(minutes=i), kind="feed", feed_id="feed",
               publisher_id="p", host="p.example", url=f"http://p.example/feed?{i}", status=304)
    return row


def _answers(store: LocalStore) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    con = connect(store)
    try:
        return (sorted(con.sql("select * from fetches").fetchall()), sorted(con.sql("select * from listings").fetchall()))
    finally:
        con.close()


def test_todays_fetch_and_listing_segments_are_merged_and_answer_the_same(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = LocalStore(tmp_path / "store")
    for run in range(6):  # one segment per ingest run; a rerun wrote run 2's rows twice
        rows = [_fetch(run * 10 + k) for k in range(3)] + ([_fetch(20)] if run == 3 else [])
        table = rows_to_table(rows, FETCHES_SCHEMA)
        write_segment(store, layout.fetch_segment_key(NOW, content_segment_id(table)), table, FETCHES_SCHEMA)
        listed = rows_to_table([{"article_id": f"a{run}", "story_id": "s", "listed_at": NOW}], LISTINGS_SCHEMA)
        write_segment(store, layout.listing_segment_key(NOW, content_segment_id(listed)), listed, LISTINGS_SCHEMA)
    before = _answers(store)

    report = compact_logs(store, NOW)  # the same day: fetch segments are complete once written

    fetches, listings = store.list(layout.FETCHES_PREFIX), store.list(layout.LISTINGS_PREFIX)
    assert len(fetches) == 1 and is_compacted(fetches[0])
    assert len(listings) == 1 and is_compacted(listings[0])
    assert report.compacted_segments == 12
    assert _answers(store) == before
    assert len(before[0]) == 18  # the duplicated row counts once
    assert compact_logs(store, NOW).compacted_segments == 0
