"""Merges in the change log become the story snapshot's aliases (the API answers them with 301)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from warehouse import layout
from warehouse.duck import connect, load_sql
from warehouse.schemas import STORY_CHANGES_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import rows_to_table, write_segment

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _change(offset: int, kind: str, story: str, other: str | None, minutes: int) -> dict[str, object]:
    return {"change_id": f"en:{offset}", "offset": offset, "language": "en", "kind": kind, "story_id": story,
            "article_id": f"a{offset}", "copy_of": None, "other_story_id": other, "score": 1.0,
            "changed_at": NOW - timedelta(minutes=minutes)}


def test_merges_become_aliases_as_of_their_time(tmp_path) -> None:
    store = LocalStore(tmp_path / "store")
    rows = [_change(0, "new_story", "s1", None, 30), _change(1, "new_story", "s2", None, 29),
            _change(2, "merge", "s1", "s2", 10), _change(3, "new_story", "s3", None, 5),
            _change(4, "merge", "s1", "s3", -5)]  # in the future of NOW: not yet an alias
    write_segment(store, layout.story_changes_key("en", 0), rows_to_table(rows, STORY_CHANGES_SCHEMA),
                  STORY_CHANGES_SCHEMA)
    con = connect(store)
    aliases = dict(con.sql(load_sql("story_aliases"), params={"now": NOW}).fetchall())
    later = dict(con.sql(load_sql("story_aliases"), params={"now": NOW + timedelta(minutes=10)}).fetchall())
    con.close()
    assert aliases == {"s2": "s1"}
    assert later == {"s2": "s1", "s3": "s1"}
