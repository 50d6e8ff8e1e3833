"""The views count an article once whatever its versions, with its latest text, as of any time."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from test_export_day import MIDNIGHT, _article

from warehouse import layout
from warehouse.duck import connect
from warehouse.schemas import ARTICLES_SCHEMA, STORY_CHANGES_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import rows_to_table, write_segment


def test_an_article_with_two_versions_counts_once_with_its_latest_text(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    first, second = _article("a", MIDNIGHT), _article("a", MIDNIGHT + timedelta(hours=2))
    second.update(version=2, content_hash="h-a2", title="a, corrected")
    other = _article("b", MIDNIGHT + timedelta(minutes=5))
    write_segment(store, layout.article_segment_key(MIDNIGHT, "s1"),
                  rows_to_table([first, second, other], ARTICLES_SCHEMA), ARTICLES_SCHEMA)
    changes = [{"change_id": f"en:{i}", "offset": i, "language": "en", "kind": kind, "story_id": "s",
                "article_id": a, "copy_of": None, "other_story_id": None, "score": 1.0, "changed_at": at}
               for i, (kind, a, at) in enumerate([("new_story", "a", first["first_seen_at"]),
                                                  ("assign", "b", other["first_seen_at"]),
                                                  ("version", "a", second["first_seen_at"])])]
    write_segment(store, layout.story_changes_key("en", 0), rows_to_table(changes, STORY_CHANGES_SCHEMA),
                  STORY_CHANGES_SCHEMA)
    con = connect(store)
    try:
        assert con.sql("select article_count, first_seen_at from stories").fetchall() == [(2, MIDNIGHT)]
        members = con.sql("select article_id, title, first_seen_at from articles_as_of($now) order by 1",
                          params={"now": MIDNIGHT + timedelta(hours=3)}).fetchall()
        before = con.sql("select article_id, title from articles_as_of($now) order by 1",
                         params={"now": MIDNIGHT + timedelta(hours=1)}).fetchall()
    finally:
        con.close()
    assert members == [("a", "a, corrected", MIDNIGHT), ("b", "b", MIDNIGHT + timedelta(minutes=5))]
    assert before == [("a", "a"), ("b", "b")]  # as of an hour in, the correction was not seen yet
