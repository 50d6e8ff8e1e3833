"""Sections the stream teaches (issue 33): articles whose feed names their section are folded into
the section model as they arrive, per language, from the shipped model; the others are classified
by what was taught. Real embeddings, a real local store."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tasks.sections import (
    guess_sections,
    load_learned_sections,
    store_taught_sections,
    teach_sections,
)
from transforms.embedding import EMBEDDING_MODEL_ID, embed_articles
from transforms.records import ArticleRow
from warehouse import layout
from warehouse.damage import collect_damage
from warehouse.store import LocalStore

NOW = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
# One story, filed under business by the feeds that carry it; the shipped model reads these
# headlines as technology.
FILED_UNDER_BUSINESS = [
    "Bitcoin exchange Mt. Gox files for bankruptcy protection",
    "Mt. Gox collapse leaves bitcoin traders in limbo",
    "Bitcoin exchange Mt. Gox says hackers stole coins",
    "Japan probes Mt. Gox after bitcoin exchange shuts down",
    "Mt. Gox chief apologises as bitcoin exchange goes bust",
    "Mt. Gox customers demand answers over missing bitcoins",
]
UNNAMED = "Bankrupt bitcoin exchange Mt. Gox finds 200,000 lost coins"


def _row(article_id: str, title: str, at: datetime, section: str | None = None, language: str = "en",
         categories: tuple[str, ...] = ()) -> ArticleRow:
    (embedding,) = embed_articles([(title, "", language)])
    return ArticleRow(article_id=article_id, version=1, content_hash=f"h-{article_id}",
                      url=f"https://p.example/{article_id}", canonical_url=f"https://p.example/{article_id}",
                      feed_id="f", publisher_id="p", language=language, region="SG", title=title, snippet="",
                      image_url=None, author=None, section=section, categories=categories, is_opinion=False,
                      published_at=None, first_seen_at=at, simhash=1, minhash=(1, 2), terms=("t",),
                      term_weights=(1.0,), entities=(), embedding=embedding, signature_version="v",
                      section_guess=guess_sections([embedding])[0], embedding_model=EMBEDDING_MODEL_ID)


def _run(store: LocalStore, rows: list[ArticleRow]) -> list[ArticleRow]:
    """What ingest's commit does with a run's rows: guess and teach, then store what was taught."""
    out, taught = teach_sections(store, rows, rows[0].first_seen_at)
    assert store_taught_sections(store, taught)
    return out


def _examples(store: LocalStore, language: str = "en") -> int:
    learned, _ = load_learned_sections(store)
    taught = learned.languages.get(language)
    return 0 if taught is None else taught.examples


def test_articles_naming_their_section_teach_the_guess_for_those_that_name_none(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    cold = _run(store, [_row("u0", UNNAMED, NOW)])
    assert cold[0].section_guess == "technology"  # the shipped model, with nothing taught
    assert store.head(layout.LEARNED_SECTIONS_KEY) is None  # nothing named, nothing stored

    named = [_row(f"n{i}", title, NOW + timedelta(minutes=1), section="Business")
             for i, title in enumerate(FILED_UNDER_BUSINESS)]
    _run(store, named)
    assert _examples(store) == len(FILED_UNDER_BUSINESS)

    later = NOW + timedelta(minutes=2)
    english, malay = _run(store, [_row("u1", UNNAMED, later), _row("u2", UNNAMED, later, language="ms")])
    assert english.section_guess == "business"  # taught by the stories of the day
    assert malay.section_guess == "technology"  # each language learns from its own articles
    assert _examples(store, "ms") == 0


def test_an_rss_category_teaches_too_and_a_rerun_of_a_minute_folds_nothing_twice(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    rows = [_row(f"n{i}", title, NOW, categories=("Markets", "bitcoin"))
            for i, title in enumerate(FILED_UNDER_BUSINESS)]
    _run(store, rows)
    assert _examples(store) == len(FILED_UNDER_BUSINESS)
    _run(store, rows)  # the same minute again (a rerun after a crash)
    assert _examples(store) == len(FILED_UNDER_BUSINESS)


def test_a_run_that_loses_the_race_folds_its_examples_onto_the_newer_state(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    first = [_row(f"a{i}", t, NOW, section="business") for i, t in enumerate(FILED_UNDER_BUSINESS[:3])]
    second = [_row(f"b{i}", t, NOW + timedelta(minutes=1), section="business")
              for i, t in enumerate(FILED_UNDER_BUSINESS[3:])]
    _, taught_first = teach_sections(store, first, NOW)
    _run(store, second)  # another run stores in between
    assert store_taught_sections(store, taught_first)
    assert _examples(store) == len(FILED_UNDER_BUSINESS)


@pytest.mark.parametrize("stored", [b"{not json", json.dumps({"version": 1, "model_version": "x"}).encode()])
def test_a_state_that_cannot_be_read_is_named_and_the_shipped_model_answers(tmp_path: Path, stored: bytes) -> None:
    store = LocalStore(tmp_path / "store")
    store.put(layout.LEARNED_SECTIONS_KEY, stored)
    with collect_damage() as damaged:
        (row,) = _run(store, [_row("u", UNNAMED, NOW)])
    assert row.section_guess == "technology"
    if stored.startswith(b"{not"):
        assert [d.key for d in damaged] == [layout.LEARNED_SECTIONS_KEY]


def test_another_models_embedding_teaches_nothing(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    rows = [replace(_row(f"n{i}", t, NOW, section="business"), embedding_model="other/x==1")
            for i, t in enumerate(FILED_UNDER_BUSINESS)]
    _run(store, rows)
    assert _examples(store) == 0
