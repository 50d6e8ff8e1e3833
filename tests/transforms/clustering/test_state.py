"""The checkpoint codec (transforms/clustering/state.py): states written before keep loading and
deciding as the writer that wrote them would have."""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from embedded_articles import direction, near

from transforms.clustering import LanguageClusterer, repair_stories
from transforms.clustering.state import (
    READABLE_STATE_VERSIONS,
    STATE_VERSION,
    decode_minhash,
    encode_minhash,
    member_from_json,
    member_to_json,
    story_from_json,
    story_to_json,
)
from transforms.clustering.story import Member, Story, embedding_code
from transforms.embedding import EMBEDDING_MODEL_ID
from transforms.features import ArticleFeatures

# Written by scripts/make_clustering_state_fixture.py at commit 47422e0, the last one with
# transforms/clustering.py as one module: a checkpoint after 300 ECB+ dev articles and a repair,
# then the next 196 articles' features (no text), the decisions and repairs that code made for
# them, and a hash of its final checkpoint.
_FIXTURE = Path(__file__).resolve().parents[2] / "data" / "clustering" / "state_v3_ecbplus.json.gz"


@pytest.fixture(scope="module")
def written_before() -> dict[str, Any]:
    return json.loads(gzip.decompress(_FIXTURE.read_bytes()))  # type: ignore[no-any-return]


def _features(raw: dict[str, Any]) -> ArticleFeatures:
    return ArticleFeatures(
        article_id=raw["article_id"], language="en", first_seen_at=datetime.fromisoformat(raw["first_seen_at"]),
        publisher_id=raw["publisher_id"], title="", simhash=0, minhash=tuple(raw["minhash"]),
        terms=tuple(raw["terms"]), term_weights=tuple(raw["term_weights"]), entities=tuple(raw["entities"]),
        embedding=None, signature_version=raw["signature_version"],
    )


def _as_version_4(state: dict[str, Any]) -> dict[str, Any]:
    """A version 3 state as version 4 writes it: each member with a body and no embedding."""
    stories = [[*raw[:8], [[*m, True, None] for m in raw[8]], *raw[9:]] for raw in state["stories"]]
    return {**state, "version": 4, "stories": stories}


def test_a_state_written_before_loads_and_is_written_back_as_version_4(written_before: dict[str, Any]) -> None:
    state = written_before["state"]
    assert state["version"] == 3 and STATE_VERSION == 4
    written = json.loads(json.dumps(LanguageClusterer.from_state(state).to_state()))
    assert written == {**_as_version_4(state), "params": written["params"], "embedding_model": EMBEDDING_MODEL_ID}
    assert {k: v for k, v in written["params"].items() if k in state["params"]} == state["params"]
    assert json.loads(json.dumps(LanguageClusterer.from_state(written).to_state())) == written


def test_a_state_written_before_goes_on_with_the_same_decisions(written_before: dict[str, Any]) -> None:
    """The online decisions, for articles without embeddings, are those of the code that wrote the
    state, their scores within rounding: the IDF weights are now computed with numpy's vectorised
    log and dot products (issue 15), which can differ from the scalar ones in the last bit. The
    repair pass decides by the rules of issue 14 (its adoptions and splits differ from that
    code's), and what it leaves loads back unchanged."""
    clusterer = LanguageClusterer.from_state(written_before["state"])
    articles = [_features(raw) for raw in written_before["articles"]]
    decisions = [(a.article_id, a.story_id, a.copy_of, a.is_new_story, a.is_new_version, a.score)
                 for a in (clusterer.assign(f) for f in articles)]
    expected = [(*d[:4], d[5], d[4]) for d in written_before["decisions"]]
    assert [d[:5] for d in decisions] == [d[:5] for d in expected]
    assert [d[5] for d in decisions] == pytest.approx([d[5] for d in expected], rel=0, abs=1e-12)
    assert repair_stories(clusterer, articles[-1].first_seen_at + timedelta(minutes=10))
    final = json.loads(json.dumps(clusterer.to_state()))
    assert json.loads(json.dumps(LanguageClusterer.from_state(final).to_state())) == final


@pytest.mark.parametrize("bad", [{"version": 1}, {"version": 99}, {"signature_version": "minhash-v0"}],
                         ids=["too-old", "too-new", "other-signatures"])
def test_a_state_of_another_version_is_refused(written_before: dict[str, Any], bad: dict[str, object]) -> None:
    assert 1 not in READABLE_STATE_VERSIONS
    with pytest.raises(ValueError, match="version"):
        LanguageClusterer.from_state({**written_before["state"], **bad})


def test_parameters_this_version_does_not_know_are_ignored(written_before: dict[str, Any]) -> None:
    state = written_before["state"]
    resumed = LanguageClusterer.from_state({**state, "params": {**state["params"], "retired_knob": 3}})
    assert resumed.to_state() == LanguageClusterer.from_state(state).to_state()


def test_signatures_round_trip_in_both_encodings() -> None:
    signature = np.array([0, 1, 2**32 - 1, 123456789], dtype=np.uint32)
    assert np.array_equal(decode_minhash(encode_minhash(signature)), signature)
    assert np.array_equal(decode_minhash(signature.tolist()), signature)  # a version 2 checkpoint
    assert decode_minhash(encode_minhash(signature)).dtype == np.uint32


def test_records_round_trip_through_json() -> None:
    member = Member("a", 5, None, "b", ("x", "y"), (0.6, 0.8), ("anwar",))
    story = Story("00000000000000ff", "a", 5, 9, 2, {"x": 0.1 + 0.2}, {"anwar": 2.0}, ["2024"], [member], 7,
                  (1.0, 0.5, 12.25))
    assert member_from_json(json.loads(json.dumps(member_to_json(member)))) == member
    assert story_from_json(json.loads(json.dumps(story_to_json(story)))) == story
    assert story_from_json(story_to_json(story)[:10]).norms is None  # written before the norm cache


def test_member_rows_round_trip_and_older_rows_have_a_body_and_no_embedding() -> None:
    """Version 4 rows carry whether a member has a body and its embedding codes (issue 14)."""
    member = Member("a", 5, "p", None, ("x",), (1.0,), ("anwar",), has_body=False,
                    embedding=embedding_code(near(direction(7), 8)))
    assert member_from_json(json.loads(json.dumps(member_to_json(member)))) == member
    older = member_from_json(["a", 5, "p", None, ["x"], [1.0], ["anwar"]])  # a version 3 row
    assert older.has_body and older.embedding is None
