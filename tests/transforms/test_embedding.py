"""Sentence embeddings (USE multilingual v3 from the wheel) and the cross-language link rule."""

from __future__ import annotations

import math

import numpy as np

from transforms.clustering import ClusterParams, link_story_profiles
from transforms.embedding import EMBEDDING_DIM, embed_articles, embed_texts, embedding_text


def test_embedding_text_is_title_and_lede_without_the_repeated_headline() -> None:
    body = "Quake hits Chile\n" + " ".join(f"w{i}" for i in range(200))
    text = embedding_text("Quake hits Chile", body, "en")
    assert text.startswith("Quake hits Chile. w0 w1") and text.endswith("w49")
    assert embedding_text("台风", "台风来袭" * 100, "zh") == "台风。" + ("台风来袭" * 30)


def test_embeddings_are_unit_float32_deterministic_and_zero_when_empty() -> None:
    first = embed_texts(["Typhoon Nanmadol hits Japan", ""])
    again = embed_texts(["Typhoon Nanmadol hits Japan"])
    assert first.shape == (2, EMBEDDING_DIM) and first.dtype == np.float32
    assert abs(float(np.linalg.norm(first[0])) - 1.0) < 1e-5 and not first[1].any()
    assert np.array_equal(first[0], again[0])
    # float32-exact: a row written to Parquet as float32 reads back to the same tuple.
    (as_tuple,) = embed_articles([("Typhoon Nanmadol hits Japan", "", "en")])
    assert np.array_equal(np.asarray(as_tuple, dtype=np.float32), np.asarray(as_tuple))


def test_translations_are_closer_than_other_news_across_languages() -> None:
    en, ms, zh, other = embed_texts([
        "Four feared dead after Typhoon Nanmadol hits Japan",
        "Empat maut taufan Nanmadol landa Jepun",
        "台风南玛都袭击日本 四人恐遇难",
        "Parliament passes long-awaited data protection law",
    ])
    assert float(en @ ms) > float(en @ other) + 0.2
    assert float(en @ zh) > float(zh @ other) + 0.2


def _unit(*values: float) -> list[float]:
    v = np.asarray(values, dtype=np.float64)
    return list(v / np.linalg.norm(v))


def test_links_need_mutual_best_above_the_bar_and_never_join_one_language() -> None:
    language_of = {"en1": "en", "en2": "en", "zh1": "zh", "ms1": "ms"}
    embeddings = {
        "en1": [_unit(1, 0, 0)],
        "en2": [_unit(0.9, 0.3, 0)],   # close to en1, but same language: never linked directly
        "zh1": [_unit(0.95, 0.1, 0)],  # en1's best zh match, and en1 is its best en match
        "ms1": [_unit(0, 0, 1)],       # far from everything
    }
    links = link_story_profiles(language_of, {}, embeddings, ClusterParams())
    assert links == {"en1": "en1", "zh1": "en1"}
    assert link_story_profiles(language_of, {}, embeddings, ClusterParams(link_embedding_threshold=0.999)) == {}


def test_stories_without_embeddings_fall_back_to_shared_names_and_numbers() -> None:
    language_of = {"a": "en", "b": "ms", "c": "ms"}
    tokens = {"a": {"leonard": 2.0, "francis": 1.0, "2022": 1.0}, "b": {"leonard": 1.0, "francis": 1.0},
              "c": {"bermuda": 1.0}}
    assert link_story_profiles(language_of, tokens, {}, ClusterParams()) == {"a": "a", "b": "a"}


def test_mutual_best_pairs_do_not_depend_on_the_chunk_size() -> None:
    from transforms.clustering.linking import _mutual_best_pairs

    rng = np.random.default_rng(3)
    left, right = rng.normal(size=(300, 16)), rng.normal(size=(120, 16))
    left /= np.linalg.norm(left, axis=1, keepdims=True)
    right /= np.linalg.norm(right, axis=1, keepdims=True)
    whole = _mutual_best_pairs(left, right, 0.3, chunk=10_000)
    assert whole and _mutual_best_pairs(left, right, 0.3, chunk=7) == whole
    sims = left @ right.T
    for i, j in whole:  # each pair is the row's best and the column's best
        assert sims[i].argmax() == j and sims[:, j].argmax() == i and sims[i, j] >= 0.3


def test_the_encoder_is_never_given_more_than_its_caps() -> None:
    """A 1 MB title or lede without a space once cost 44 s and 6 GB (issue 32): the text is cut to
    EMBED_TEXT_MAX_CHARS and each word to EMBED_WORD_MAX_CHARS, whatever the caller passes."""
    from transforms.embedding import EMBED_TEXT_MAX_CHARS, EMBED_WORD_MAX_CHARS

    text = embedding_text("Quake " + "T" * 1_000_000, "lede " * 100 + "x" * 1_000_000, "en")
    assert len(text) <= EMBED_TEXT_MAX_CHARS and max(len(w.rstrip(".")) for w in text.split()) <= EMBED_WORD_MAX_CHARS
    assert text.startswith("Quake " + "T" * EMBED_WORD_MAX_CHARS + ". lede lede")
    cjk = embedding_text("台风" * 10_000, "台风来袭" * 10_000, "zh")
    assert len(cjk) <= EMBED_TEXT_MAX_CHARS
    long, capped = embed_texts(["word " * 100_000, ("word " * 100_000)[:EMBED_TEXT_MAX_CHARS]])
    assert np.array_equal(long, capped)


def _at_cosine(base: list[float], other: list[float], cosine: float) -> list[float]:
    """A unit vector at ``cosine`` from unit ``base``, in the plane of ``base`` and ``other``."""
    b, o = np.asarray(base), np.asarray(other)
    o = o - (o @ b) * b
    o /= np.linalg.norm(o)
    return list(cosine * b + math.sqrt(1 - cosine**2) * o)


def test_a_cross_language_link_is_decided_on_names_and_numbers_as_well_as_the_embeddings() -> None:
    """Issue 33: a pair the embeddings alone put just over their bar needs shared names or
    numbers, and the story a link goes to is the best match on both signals."""
    zh = _unit(1, 0, 0, 0)
    language_of = {"en-court": "en", "en-forgery": "en", "zh-court": "zh"}
    embeddings = {"zh-court": [zh], "en-forgery": [_at_cosine(zh, _unit(0, 1, 0, 0), 0.54)],
                  "en-court": [_at_cosine(zh, _unit(0, 0, 1, 0), 0.53)]}
    # Only the embeddings: the forgery story is the closer, and it is linked.
    assert link_story_profiles(language_of, {}, embeddings, ClusterParams()) == {}
    assert link_story_profiles(language_of, {}, embeddings, ClusterParams(link_token_weight=0.0,
                                                                          link_score_threshold=0.5)) == {
        "en-forgery": "en-forgery", "zh-court": "en-forgery"}
    # The court story and the Chinese one both print the lawyer's name and the case number.
    tokens = {"zh-court": {"ravi": 2.0, "2022": 1.0}, "en-court": {"ravi": 3.0, "2022": 1.0, "sbs": 1.0},
              "en-forgery": {"courts": 1.0}}
    assert link_story_profiles(language_of, tokens, embeddings, ClusterParams()) == {
        "en-court": "en-court", "zh-court": "en-court"}
    # Below the embeddings' own floor, shared names are not enough.
    far = {**embeddings, "en-court": [_at_cosine(zh, _unit(0, 0, 1, 0), 0.45)]}
    assert link_story_profiles(language_of, tokens, far, ClusterParams()) == {}
