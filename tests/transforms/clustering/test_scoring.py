"""The join score's bounds (transforms/clustering/scoring.py): how far the sentence embedding lowers
the bar a candidate's postings must clear (issue 14)."""

from __future__ import annotations

from transforms.clustering import ClusterParams
from transforms.clustering.scoring import least_joinable_cosine


def test_the_embedding_lowers_the_postings_bar_only_for_an_article_that_has_one() -> None:
    params = ClusterParams()
    plain = least_joinable_cosine(params)
    assert least_joinable_cosine(params, has_body=True, has_embedding=False) == plain
    assert least_joinable_cosine(params, has_body=True, has_embedding=True) < plain
    assert least_joinable_cosine(params, has_body=False, has_embedding=True) < least_joinable_cosine(
        params, has_body=True, has_embedding=True)
