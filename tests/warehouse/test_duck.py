"""``newsroom export --date``: one UTC day's rows, and the stories active that day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq

from warehouse import layout
from warehouse.duck import connect, export_day, load_sql
from warehouse.schemas import ARTICLES_SCHEMA, STORY_CHANGES_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import rows_to_table, write_segment

MIDNIGHT = datetime(2026, 12, 2, tzinfo=UTC)


def _article(article_id: str, seen: datetime) -> dict[str, object]:
    row: dict[str, object] = {name: None for name in ARTICLES_SCHEMA.names}
    row.update(article_id=article_id, version=1, content_hash=f"h-{article_id}", publisher_id="p", language="en",
               title=article_id, first_seen_at=seen, url=f"https://p.example/{article_id}",
               canonical_url=f"https://p.example/{article_id}")
    return row


def test_a_day_holds_its_own_rows_and_the_stories_active_in_it(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    seen = {"old": MIDNIGHT - timedelta(days=2), "late": MIDNIGHT - timedelta(minutes=1),
            "early": MIDNIGHT + timedelta(minutes=1), "next": MIDNIGHT + timedelta(days=1, hours=1)}
    write_segment(store, layout.article_segment_key(MIDNIGHT, "s1"),
                  rows_to_table([_article(a, t) for a, t in seen.items()], ARTICLES_SCHEMA), ARTICLES_SCHEMA)
    stories = {"old": "s-old", "late": "s-night", "early": "s-night", "next": "s-next"}
    changes = [{"change_id": f"en:{i}", "offset": i, "language": "en", "kind": "assign", "story_id": stories[a],
                "article_id": a, "copy_of": None, "other_story_id": None, "score": 1.0, "changed_at": seen[a]}
               for i, a in enumerate(seen)]
    write_segment(store, layout.story_changes_key("en", 0), rows_to_table(changes, STORY_CHANGES_SCHEMA),
                  STORY_CHANGES_SCHEMA)

    counts = export_day(store, "2026-12-02", tmp_path / "out")

    def column(name: str, field: str) -> list[object]:
        return sorted(pq.read_table(tmp_path / "out" / f"{name}.parquet").column(field).to_pylist())

    assert column("articles", "article_id") == ["early"]  # UTC days: "late" was the 1st
    assert column("story_changes", "article_id") == ["early"]
    assert counts["article_links"] == 0  # a log of its own (URL aliases), empty here
    assert column("stories", "story_id") == ["s-night"]  # active that day; s-old and s-next were not
    assert counts["stories"] == 1 and counts["articles"] == 1


# --------------------------------------------------------------------------------------------------
# The views count an article once whatever its versions, with its latest text, as of any time.
# --------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------
# Merges in the change log become the story snapshot's aliases (the API answers them with 301).
# --------------------------------------------------------------------------------------------------

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
