"""Article identity against a real store: versions for new content, links for AMP/print copies,
nothing stored twice, and the index persists between cycles."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tasks.identity import assign_identities, commit_identities
from transforms.records import ArticleRow
from warehouse.duck import connect
from warehouse.store import LocalStore

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _row(article_id: str, content_hash: str, url: str, at: datetime = NOW) -> ArticleRow:
    return ArticleRow(article_id=article_id, version=1, content_hash=content_hash, url=url, canonical_url=url,
                      feed_id="f", publisher_id="p", language="en", region="US", title="t", snippet="",
                      image_url=None, author=None, section=None, categories=(), is_opinion=False,
                      published_at=None, first_seen_at=at, simhash=0, minhash=(), terms=(), term_weights=(),
                      entities=(), embedding=None, signature_version="v")


def _cycle(store: LocalStore, rows: list[ArticleRow], at: datetime = NOW):
    batch = assign_identities(store, rows, at)
    commit_identities(store, batch, at)
    return batch


def test_versions_links_and_duplicates_across_cycles(tmp_path) -> None:
    store = LocalStore(tmp_path / "store")
    first = _cycle(store, [_row("a1", "h1", "https://x.test/a"), _row("a1", "h1", "https://x.test/a?src=atom"),
                           _row("b2", "h2", "https://x.test/b")])
    assert [(r.article_id, r.version) for r in first.rows] == [("a1", 1), ("b2", 1)]
    assert first.counts == {"new": 2, "new_version": 0, "unchanged": 1, "linked": 0}

    later = NOW + timedelta(minutes=5)
    second = _cycle(store, [
        _row("a1", "h1b", "https://x.test/a", later),          # the same URL, edited: version 2
        _row("c3", "h2", "https://x.test/b/amp", later),       # an AMP copy of b2: a link, not an article
        _row("b2", "h2", "https://x.test/b", later),           # seen again, unchanged: dropped
    ], later)
    assert [(r.article_id, r.version) for r in second.rows] == [("a1", 2)]
    assert second.links == [{"article_id": "c3", "url": "https://x.test/b/amp", "canonical_url": "https://x.test/b/amp",
                             "linked_to": "b2", "publisher_id": "p", "first_seen_at": later}]
    con = connect(store)
    assert con.sql("select article_id, linked_to from article_links").fetchall() == [("c3", "b2")]
    con.close()

    third = _cycle(store, [_row("a1", "h1c", "https://x.test/a", later + timedelta(minutes=5))])
    assert [(r.article_id, r.version) for r in third.rows] == [("a1", 3)]
