from __future__ import annotations

import pytest

from bench.shingle_metric import score_corpus, score_page, shingle_counts

TEXT = "The quick brown fox jumps over the lazy dog while the cat watches from the warm windowsill."


def test_identical_texts_score_one() -> None:
    page = score_page(TEXT, TEXT)
    assert (page.precision, page.recall) == (1.0, 1.0)
    corpus = score_corpus([(TEXT, TEXT), ("a b c d e f", "a b c d e f")])
    assert (corpus.precision, corpus.recall, corpus.f1) == (1.0, 1.0, 1.0)


def test_disjoint_texts_score_zero() -> None:
    other = "Completely different words appear in this other sentence about trains and rivers."
    page = score_page(TEXT, other)
    assert (page.precision, page.recall) == (0.0, 0.0)
    corpus = score_corpus([(TEXT, other)])
    assert (corpus.precision, corpus.recall, corpus.f1) == (0.0, 0.0, 0.0)


def test_normalised_counts_sum_to_one() -> None:
    page = score_page(TEXT, TEXT[: len(TEXT) // 2] + " extra words at the end here")
    assert page.tp + page.fp + page.fn == pytest.approx(1.0)
    assert 0 < page.precision < 1 and 0 < page.recall < 1


def test_empty_prediction_left_out_of_precision() -> None:
    corpus = score_corpus([(TEXT, TEXT), (TEXT, "")])
    assert corpus.precision == 1.0
    assert corpus.recall == 0.5


def test_multiset_counts_repeats() -> None:
    assert shingle_counts("a b c d a b c d", 4)[("a", "b", "c", "d")] == 2
    page = score_page("a b c d", "a b c d a b c d")
    assert page.recall == 1.0 and page.precision < 1.0


def test_punctuation_and_whitespace_ignored() -> None:
    assert (
        score_page("Hello, world! How are you?", "hello world how are you").precision < 1.0
    )  # case-sensitive
    assert score_page("Hello, world! How are you?", "Hello world\nHow are you").precision == 1.0


def test_score_corpus_rejects_empty() -> None:
    with pytest.raises(ValueError):
        score_corpus([])
