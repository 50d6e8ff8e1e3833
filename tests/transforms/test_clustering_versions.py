"""New versions of an article (same id, new content hash) through the cluster writer: the article
stays the same member of its story, is never a copy of itself and leaves no ghost member."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path
from typing import Any

from repair_corpus import T0, changes_of, final_story, mannheim

from tasks.cluster import cluster_language, load_writer_state, open_writer
from tasks.repair import repair_language
from transforms.clustering import ClusterParams, LanguageClusterer
from transforms.features import features_from_text, features_to_row
from warehouse import layout
from warehouse.duck import connect
from warehouse.schemas import ARTICLES_SCHEMA
from warehouse.store import LocalStore, ObjectStore
from warehouse.tables import rows_to_table, write_segment

UNRELATED = ("The central bank raised interest rates by a quarter point on Wednesday, citing stubborn "
             "inflation in housing and services, and signalled that further increases were possible.")


def _write_version(store: ObjectStore, article_id: str, text: str, minute: float, publisher: str, version: int) -> None:
    """An article row as the ingest writes a version of an article (same id, its own content hash)."""
    seen = T0 + timedelta(minutes=minute)
    features = features_from_text(article_id, text.split(". ")[0][:80], text, "en", seen, publisher)
    row = {**features_to_row(features), "version": version,
           "content_hash": hashlib.sha1(text.encode()).hexdigest(), "url": f"http://{publisher}.test/{article_id}",
           "canonical_url": f"http://{publisher}.test/{article_id}", "feed_id": f"feed-{publisher}",
           "region": "US", "snippet": text[:120], "image_url": None, "author": None, "section": "sport",
           "categories": [], "is_opinion": False, "published_at": seen}
    write_segment(store, layout.article_segment_key(seen, f"{article_id}-v{version}"),
                  rows_to_table([row], ARTICLES_SCHEMA), ARTICLES_SCHEMA)


def _writer(store: ObjectStore) -> LanguageClusterer:
    checkpoint, _ = open_writer(store, "en")
    return load_writer_state(store, "en", checkpoint)[0]


def _stories_holding(clusterer: LanguageClusterer, article_id: str) -> list[str]:
    return [sid for sid in clusterer.story_ids() for m in clusterer.story_members(sid) if m.article_id == article_id]


def _assignments(store: ObjectStore) -> list[dict[str, Any]]:
    con = connect(store)
    try:
        query = 'select article_id, story_id, copy_of, "offset" from story_assignments order by article_id'
        return con.sql(query).to_arrow_table().to_pylist()
    finally:
        con.close()


def test_a_corrected_version_is_the_same_member_and_no_copy_of_itself(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    _write_version(store, "a", mannheim(0), 0, "pub0", 1)
    cluster_language(store, "en", T0 + timedelta(minutes=1))
    _write_version(store, "a", mannheim(0).replace("seventh round", "7th round"), 5, "pub0", 2)
    summary = cluster_language(store, "en", T0 + timedelta(minutes=6))
    assert summary["version"] == 1
    first, second = changes_of(store)
    assert (first["kind"], second["kind"]) == ("new_story", "version")
    assert second["story_id"] == first["story_id"] and second["copy_of"] is None
    assert _stories_holding(_writer(store), "a") == [first["story_id"]]
    # A version row is no assignment: the article's one assignment still names its story.
    assert _assignments(store) == [{"article_id": "a", "story_id": first["story_id"], "copy_of": None,
                                    "offset": first["offset"]}]


def test_a_rewritten_version_leaves_no_ghost_member_for_a_repair_to_move(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    _write_version(store, "m1", mannheim(1), 0, "pub1", 1)
    _write_version(store, "a", mannheim(0), 1, "pub0", 1)
    cluster_language(store, "en", T0 + timedelta(minutes=2), params=ClusterParams(join_threshold=0.95))
    _write_version(store, "a", UNRELATED, 3, "pub0", 2)  # the same article, rewritten
    cluster_language(store, "en", T0 + timedelta(minutes=4))
    story = final_story(changes_of(store))["a"]
    assert _stories_holding(_writer(store), "a") == [story]
    repair_language(store, "en", T0 + timedelta(minutes=10))
    assert final_story(changes_of(store))["a"] == story
    assert _stories_holding(_writer(store), "a") == [story]
