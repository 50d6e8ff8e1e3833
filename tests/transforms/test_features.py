"""A body too short to sign (boilerplate, a caption, none) gives no copy signature and no terms."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from repair_corpus import mannheim

from transforms.clustering import LanguageClusterer
from transforms.features import ArticleFeatures, features_from_text
from transforms.signatures import (
    MIN_COPY_SHINGLES,
    NUM_PERM,
    estimate_jaccard,
    lsh_bands,
    shingle_tokens,
    text_signatures,
    tokenize,
)

T0 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
EMPTY = (0, tuple([0xFFFFFFFF] * NUM_PERM))
BOILERPLATE = [
    "Subscribe now to continue reading. Already a subscriber? Log in to read the full article.",
    "Watch the video.",
    "We use cookies to improve your experience. By continuing to browse you agree to our use of cookies.",
]


def _f(aid: str, title: str, body: str, minutes: float = 0, publisher: str = "paper") -> ArticleFeatures:
    return features_from_text(aid, title, body, "en", T0 + timedelta(minutes=minutes), publisher)


@pytest.mark.parametrize("body", BOILERPLATE)
def test_unrelated_articles_sharing_a_boilerplate_body_are_neither_copies_nor_one_story(body: str) -> None:
    clusterer = LanguageClusterer("en")
    first = clusterer.assign(_f("x", "Klitschko stops Rahman in Mannheim", body, 0))
    second = clusterer.assign(_f("y", "Central bank raises interest rates again", body, 5))
    assert second.copy_of is None
    assert second.story_id != first.story_id


@pytest.mark.parametrize("body", [*BOILERPLATE, "", "   "])
def test_a_short_body_has_the_empty_signatures(body: str) -> None:
    features = _f("x", "Klitschko stops Rahman in Mannheim", body)
    assert (features.simhash, features.minhash) == EMPTY
    assert lsh_bands(features.minhash) == []
    assert estimate_jaccard(features.minhash, features.minhash) == 0.0


def test_a_short_body_leaves_the_title_to_describe_the_article() -> None:
    notice = _f("x", "Klitschko stops Rahman in Mannheim", BOILERPLATE[0])
    title_only = _f("x", "Klitschko stops Rahman in Mannheim", "")
    assert (notice.terms, notice.term_weights, notice.entities) == (
        title_only.terms, title_only.term_weights, title_only.entities)
    assert "subscriber" not in notice.terms and "rahman" in notice.terms


def test_a_body_at_the_bar_is_signed_on_the_body_alone() -> None:
    words = mannheim(0).split()
    body = " ".join(words[: MIN_COPY_SHINGLES + 3])  # exactly MIN_COPY_SHINGLES distinct 4-word shingles
    assert len(set(shingle_tokens(tokenize(body, "en")))) == MIN_COPY_SHINGLES
    features = _f("x", "Another headline entirely", body)
    simhash, minhash = text_signatures(body, "en")
    assert (features.simhash, features.minhash) == (simhash, tuple(int(v) for v in minhash))
    shorter = _f("x", "Another headline entirely", " ".join(words[: MIN_COPY_SHINGLES + 2]))
    assert (shorter.simhash, shorter.minhash) == EMPTY


def test_a_reprint_of_a_real_article_under_a_new_headline_is_still_a_copy() -> None:
    clusterer = LanguageClusterer("en")
    clusterer.assign(_f("m0", "Klitschko stops Rahman", mannheim(0), 0, "p0"))
    reprint = clusterer.assign(_f("w0", "Wire: Rahman beaten", "MANNHEIM (Wire) - " + mannheim(0), 1, "p9"))
    assert reprint.copy_of == "m0"


def test_no_term_or_entity_is_longer_than_its_cap_and_the_body_is_read_up_to_its_cap() -> None:
    """A 1 MB token (a page without spaces) is never a term or an entity; only the first
    FEATURE_TEXT_MAX_CHARS of a body count (issue 32)."""
    from transforms.features import ENTITY_MAX_CHARS, FEATURE_TEXT_MAX_CHARS, TERM_MAX_CHARS

    body = mannheim(0) + "\n" + "Council " + "X" * 1_000_000 + " met. " + "word " * 10
    features = _f("x", "Klitschko stops Rahman in Mannheim", body)
    assert features.terms and max(map(len, features.terms)) <= TERM_MAX_CHARS
    assert features.entities and max(map(len, features.entities)) <= ENTITY_MAX_CHARS
    padded = mannheim(0) + "\n" + "filler " * (FEATURE_TEXT_MAX_CHARS // 7 + 1)
    assert _f("x", "T", padded + "Zebrafish zebrafish zebrafish.").terms == _f("x", "T", padded).terms
