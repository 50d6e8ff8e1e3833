"""The section classifier's arithmetic (issue 21): parsing a model, abstaining, votes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from transforms.sections import (
    SECTIONS,
    article_section_votes,
    classify_embeddings,
    section_model_from_dict,
    section_probabilities,
)


def _model(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "version": "toy", "classes": ["business", "sports", "world"],
        "weights": [[5.0, 0.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, 5.0]], "intercepts": [0.0, 0.0, 0.0],
        "min_probability": 0.8, "embedding": {"model": "toy-3"},
    }
    body.update(changes)
    return body


@pytest.mark.parametrize("changes", [
    {"classes": ["business", "sports", "weather"]},
    {"classes": ["business", "business", "world"]},
    {"classes": ["business"], "weights": [[1.0, 0.0, 0.0]], "intercepts": [0.0]},
    {"weights": [[1.0, 0.0], [0.0, 1.0]]},
    {"intercepts": [0.0, 0.0]},
    {"min_probability": 1.5},
    {"weights": [[float("nan"), 0.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, 5.0]]},
    {"embedding": {}},
], ids=["unknown-section", "duplicate-class", "one-class", "weights-rows", "intercepts", "threshold",
        "not-finite", "no-embedding-name"])
def test_a_broken_model_is_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        section_model_from_dict(_model(**changes))


def test_the_best_class_answers_only_when_likely_enough() -> None:
    model = section_model_from_dict(_model())
    vectors = [(1.0, 0.0, 0.0), (0.0, 0.0, 1.0), (0.6, 0.6, 0.0), None, (0.0, 0.0, 0.0), ()]
    assert classify_embeddings(vectors, model) == ["business", "world", None, None, None, None]
    assert classify_embeddings(vectors, model, min_probability=0.4) == \
        ["business", "world", "business", None, None, None]  # a tie goes to the first class


def test_probabilities_are_a_distribution_and_order_free() -> None:
    model = section_model_from_dict(_model())
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(20, 3))
    p = section_probabilities(list(vectors), model)
    assert np.allclose(p.sum(axis=1), 1.0) and (p >= 0).all()
    assert np.allclose(section_probabilities(list(vectors[::-1]), model), p[::-1])


def test_a_vector_of_another_dimension_is_an_error() -> None:
    with pytest.raises(ValueError, match="dimensions"):
        classify_embeddings([(1.0, 0.0)], section_model_from_dict(_model()))


def test_a_guess_votes_beside_the_hint_and_the_category() -> None:
    assert article_section_votes(["Top Stories", "Sport", None], [None, ["Economy"], ["Markets"]],
                                 [None, "sports", "weather"]) == [[], ["sports", "business", "sports"], ["business"]]
    assert set(SECTIONS) == {"world", "politics", "business", "technology", "science", "health", "sports",
                             "entertainment"}


def test_a_hint_longer_than_any_section_name_is_not_matched() -> None:
    from transforms.sections import SECTION_HINT_MAX_CHARS, canonical_section

    assert canonical_section("Sport") == "sports"
    assert canonical_section("Sport" + " " * SECTION_HINT_MAX_CHARS) is None
