"""``newsroom export --date``: one UTC day's rows, and the stories active that day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq

from warehouse import layout
from warehouse.duck import export_day
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

