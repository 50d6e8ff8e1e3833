"""The join score's bounds (transforms/clustering/scoring.py): how far the sentence embedding lowers
the bar a candidate's postings must clear (issue 14)."""

from __future__ import annotations

import math
from array import array

import pytest

from transforms.clustering import ClusterParams
from transforms.clustering.idf import Idf
from transforms.clustering.scoring import least_joinable_cosine, member_mean
from transforms.clustering.story import Member, Story


def test_the_embedding_lowers_the_postings_bar_only_for_an_article_that_has_one() -> None:
    params = ClusterParams()
    plain = least_joinable_cosine(params)
    assert least_joinable_cosine(params, has_body=True, has_embedding=False) == plain
    assert least_joinable_cosine(params, has_body=True, has_embedding=True) < plain
    assert least_joinable_cosine(params, has_body=False, has_embedding=True) < least_joinable_cosine(
        params, has_body=True, has_embedding=True)


def test_member_mean_is_the_mean_cosine_over_the_latest_original_members() -> None:
    idf = Idf({"bridge": 3.0, "storm": 1.0}, 20.0, 10.0)
    members = [
        Member("old", 0, None, None, ("bridge", "ferry"), (0.6, 0.8), ()),
        Member("a", 1, None, None, ("bridge", "storm"), (0.8, 0.6), ()),
        Member("copy", 2, None, "a", ("bridge", "storm"), (0.8, 0.6), ()),
        Member("b", 3, None, None, ("storm", "rain"), array("d", (0.5, 0.5)), ()),
        Member("empty", 4, None, None, (), (), ()),
    ]
    story = Story("s", "old", 0, 4, 5, {"bridge": 1.0}, {}, [], members)
    vector = {"bridge": 0.6, "storm": 0.8}

    def cosine(member: Member) -> float:  # one term at a time, through the IDF's one-term lookup
        values = {t: w * idf(t) for t, w in zip(member.terms, member.weights, strict=True)}
        norm = math.sqrt(sum(v * v for v in values.values()))
        return sum(v * vector.get(t, 0.0) for t, v in values.items()) / norm if norm else 0.0

    # The latest three originals: the copy does not count, an empty member counts as 0.
    expected = (cosine(members[1]) + cosine(members[3]) + 0.0) / 3
    assert member_mean(story, vector, idf, 3) == pytest.approx(expected, rel=1e-12)
    assert member_mean(Story("t", "c", 0, 0, 1, {}, {}, [], [members[2]]), vector, idf, 3) == 0.0
