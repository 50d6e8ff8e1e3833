"""The online IDF (transforms/clustering/idf.py): counted per article, decayed with a half-life."""

from __future__ import annotations

import math

import pytest

from transforms.clustering.idf import DF_FLOOR, IDF_FLOOR, Idf, OnlineIdf


def test_a_term_seen_everywhere_weighs_the_floor_and_an_unseen_one_the_most() -> None:
    idf = OnlineIdf(prior_docs=1.0, half_life_hours=24.0)
    for _ in range(100):
        idf.count(["the", "bridge"], [])
    idf.count(["giraffe"], ["tara", "reid"])
    weights = idf.function()
    assert weights("the") == IDF_FLOOR
    assert weights("giraffe") == pytest.approx(math.log((101 + 1 + 1) / 2))
    assert weights("unseen") == pytest.approx(math.log(101 + 1 + 1))
    assert weights("e:reid") == weights("giraffe")  # entity words are counted under e:


def test_counts_keep_the_order_terms_were_first_seen() -> None:
    idf = OnlineIdf(10.0, 24.0)
    idf.count(["b", "a"], ["x"])
    idf.count(["c", "a"], [])
    assert list(idf.df) == ["b", "a", "e:x", "c"] and idf.df["a"] == 2.0 and idf.n_docs == 2.0


def test_decay_halves_every_count_per_half_life_and_drops_the_faded() -> None:
    idf = OnlineIdf(10.0, 24.0, {"a": 1.0, "b": 2 * DF_FLOOR - 0.001}, 4.0)
    idf.decay(24.0)
    assert idf.df == {"a": 0.5} and idf.n_docs == 2.0
    idf.decay(0.0)
    assert idf.df == {"a": 0.5}


def test_a_function_is_fixed_to_the_counts_it_was_made_from() -> None:
    idf = OnlineIdf(10.0, 24.0)
    idf.count(["a"], [])
    before = idf.function()
    value = before("a")
    idf.count(["a"], [])
    assert before("a") == value  # memoised
    assert idf.function()("a") < value


def test_idf_values_never_fall_below_the_floor() -> None:
    assert Idf({"x": 1e9}, 1.0, 0.0)("x") == IDF_FLOOR
