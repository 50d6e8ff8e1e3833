"""How well an article fits a candidate story: the score the join decision compares.

``cosine(article, centroid) + entity_bonus × shared-entity share − year/date conflict penalties
− time_penalty_per_hour × hours since the story's last article + w × (embedding cosine − o)``
(plus, when ``member_weight`` is set, a share from the article's mean cosine to the story's
latest members, and a margin for young stories). The embedding cosine is the article's sentence
embedding against the mean of the story's; ``w`` and ``o`` are the body or the headline ones
(:meth:`ClusterParams.embedding_terms`): an article known by its headline alone leans on it
(issue 14). Everything the score reads arrives as an argument: the candidates' dots from the
term index, the IDF, the stream time.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from itertools import chain, repeat

import numpy as np
import numpy.typing as npt

from transforms.clustering.idf import ENTITY_PREFIX, Idf
from transforms.clustering.params import ClusterParams
from transforms.clustering.story import Story, embedding_direction, story_years
from transforms.features import DATE_TERM_PREFIX


def weighted_vector(terms: Sequence[str], weights: Sequence[float], idf: Idf) -> dict[str, float]:
    """Terms weighted by ``idf``, L2-normalised (empty if all weights are zero).

    >>> weighted_vector(("x", "y"), (3.0, 4.0), Idf({}, 0.0, math.e - 1.0))
    {'x': 0.6, 'y': 0.8}
    >>> weighted_vector(("x", "y", "x"), (1.0, 4.0, 3.0), Idf({}, 0.0, math.e - 1.0))
    {'x': 0.6, 'y': 0.8}
    """
    if len(terms) != len(weights):
        raise ValueError(f"{len(terms)} terms with {len(weights)} weights")
    raw = np.fromiter(weights, np.float64, len(weights)) * idf.weights(terms, memoise=True)
    vector = dict(zip(terms, raw.tolist(), strict=True))
    if len(vector) < len(terms):  # a term listed twice counts once, with its last weight
        raw = np.fromiter(vector.values(), np.float64, len(vector))
    norm = math.sqrt(float(raw @ raw))
    return dict(zip(vector, (raw / norm).tolist(), strict=True)) if norm > 0 else {}


def entity_weights(words: Sequence[str], idf: Idf) -> dict[str, float]:
    """Entity words → their IDF (counted as ``e:<word>``).

    >>> entity_weights(["reid"], Idf({"e:reid": 1.0}, 0.0, 2.0))
    {'reid': 0.4054651081081644}
    """
    return dict(zip(words, idf.weights([ENTITY_PREFIX + word for word in words]).tolist(), strict=True))


def least_joinable_cosine(params: ClusterParams, has_body: bool = True, has_embedding: bool = False) -> float:
    """Least centroid cosine with which a story could still reach ``join_threshold``; for an
    article with an embedding, the most the embedding can add (with or without a body) counts too.

    >>> least_joinable_cosine(ClusterParams(join_threshold=0.3, entity_bonus=0.1))
    0.19999999999999998
    >>> round(least_joinable_cosine(ClusterParams(join_threshold=0.3, entity_bonus=0.1), has_embedding=True), 6)
    0.1
    """
    if params.member_weight >= 1.0:
        return 0.0
    weight, offset = params.embedding_terms(has_body)
    most = params.entity_bonus + params.member_weight + (weight * (1.0 - offset) if has_embedding else 0.0)
    return (params.join_threshold - most) / (1.0 - params.member_weight)


def embedding_cosines(stories: Sequence[Story], embedding: Sequence[float] | None) -> list[float | None]:
    """The cosine of an article's embedding with each story's mean embedding (None where either
    has none)."""
    if not embedding:
        return [None] * len(stories)
    vector = np.asarray(embedding, dtype=np.float64)
    directions = [embedding_direction(story) for story in stories]
    return [None if d is None else float(d @ vector) for d in directions]


def story_norms(story: Story, idf: Idf, n_docs: float, tolerance: float) -> tuple[float, float]:
    """IDF-weighted norms of a story's centroid and entity counts, cached on the story.

    Recomputing them for every candidate of every article costs more than the rest of an
    assignment; they are kept until the centroid changes or the IDF's document count
    (``n_docs``) has moved by more than ``tolerance`` (relative), so they are at most that
    stale. The cache is part of the checkpoint, so a resumed writer decides exactly as before.
    """
    cached = story.norms
    if cached is not None and abs(n_docs - cached[2]) <= tolerance * cached[2]:
        return cached[0], cached[1]
    centroid, entities = story.centroid, story.entities
    # The centroid's terms and the entity words weighed in one IDF step (an IDF moved past the
    # tolerance has every active story's norms recomputed within minutes: issue 15).
    keys = [*centroid, *[ENTITY_PREFIX + e for e in entities]]
    values = np.fromiter(chain(centroid.values(), entities.values()), np.float64, len(keys)) * idf.weights(keys)
    norm = _norm(values[:len(centroid)])
    entity_norm = _norm(values[len(centroid):])
    story.norms = (norm, entity_norm, n_docs)
    return norm, entity_norm


def _norm(values: npt.NDArray[np.float64]) -> float:
    """The L2 norm of ``values`` (copied first: a dot product of its own array, as ever)."""
    values = values.copy()
    return math.sqrt(float(values @ values))


def member_mean(story: Story, vector: Mapping[str, float], idf: Idf, sample: int) -> float:
    """Mean IDF-weighted cosine of the article to the story's latest ``sample`` original members."""
    originals = [m for m in story.members if m.copy_of is None][-sample:]
    if not originals:
        return 0.0
    total = 0.0
    for member in originals:
        values = np.fromiter(member.weights, np.float64, len(member.weights)) * idf.weights(member.terms)
        norm = float(values @ values)
        if norm > 0:
            shared = np.fromiter(map(vector.get, member.terms, repeat(0.0)), np.float64, len(member.terms))
            total += float(values @ shared) / math.sqrt(norm)
    return total / len(originals)


def shortlist(dots: Mapping[str, float], keep: int) -> list[str]:
    """The ``keep`` stories of the highest dots, best first (ties by story id).

    >>> shortlist({"b": 0.5, "a": 0.5, "c": 0.1}, 2)
    ['a', 'b']
    """
    if len(dots) > keep:
        cut = heapq.nlargest(keep, dots.values())[-1]
        return sorted((s for s, v in dots.items() if v >= cut), key=lambda s: (-dots[s], s))[:keep]
    return sorted(dots, key=lambda s: (-dots[s], s))


def complete_dots(dots: dict[str, float], stories: Mapping[str, Story], candidates: Sequence[str],
                  rest: Sequence[tuple[str, float]]) -> None:
    """Add to ``dots`` of ``candidates`` the terms the postings search left unread (``rest``)."""
    if not rest:
        return
    rest_weights = dict(rest)
    for sid in candidates:
        centroid = stories[sid].centroid
        # Only the shared terms count (a C-level key intersection); fsum is exact, so
        # the set's iteration order cannot change the result.
        shared_terms = rest_weights.keys() & centroid.keys()
        if shared_terms:
            dots[sid] += math.fsum([rest_weights[t] * centroid[t] for t in shared_terms])


def best_candidate(
    candidates: Sequence[Story],
    dots: Mapping[str, float],
    terms: Sequence[str],
    vector: Mapping[str, float],
    entity_weights: Mapping[str, float],
    idf: Idf,
    n_docs: float,
    now_ms: int,
    params: ClusterParams,
    embedding: Sequence[float] | None = None,
    has_body: bool = True,
) -> tuple[Story, float]:
    """Score each candidate story for an article and return the best (ties by story id).

    Args:
        candidates: The shortlisted stories (at least one).
        dots: Story id → the article's IDF-weighted dot with the story's centroid.
        terms: The article's terms (for its years and dateline years).
        vector: The article's unit-length IDF-weighted term vector.
        entity_weights: The article's entity words → their IDF.
        idf: Term weights.
        n_docs: The IDF's document count (for the stories' cached norms).
        now_ms: Stream time of the article.
        params: Weights and penalties.
        embedding: The article's sentence embedding, if any.
        has_body: Whether the article has a body of its own (else its headline is all there is).

    Returns:
        ``(story, score)``.
    """
    all_years = set(story_years(terms))
    article_dates = {y for y in all_years if y.startswith(DATE_TERM_PREFIX)}
    article_years = all_years - article_dates
    entity_norm = math.sqrt(sum(w * w for w in entity_weights.values()))
    embedding_weight, embedding_offset = params.embedding_terms(has_body)
    cosines = embedding_cosines(candidates, embedding if embedding_weight > 0 else None)
    scored: list[tuple[float, str]] = []
    by_id: dict[str, Story] = {}
    for story, embedding_cosine in zip(candidates, cosines, strict=True):
        sid = story.story_id
        by_id[sid] = story
        norm, story_norm = story_norms(story, idf, n_docs, params.norm_tolerance)
        cosine = dots[sid] / norm if norm > 0 else 0.0
        score = cosine
        if entity_norm > 0 and story_norm > 0:
            shared = sum(w * story.entities.get(e, 0.0) * w for e, w in entity_weights.items())
            score += params.entity_bonus * shared / (entity_norm * story_norm)
        if all_years and story.years:  # (most articles name no year: nothing to compare)
            story_dates = {y for y in story.years if y.startswith(DATE_TERM_PREFIX)}
            story_years_ = set(story.years) - story_dates
            if article_years and story_years_ and not article_years & story_years_:
                score -= params.year_conflict_penalty
            if article_dates and story_dates and not article_dates & story_dates:
                score -= params.date_conflict_penalty
        hours = max(0, now_ms - story.last_seen_ms) / 3_600_000
        score -= params.time_penalty_per_hour * hours
        if embedding_cosine is not None:
            score += embedding_weight * (embedding_cosine - embedding_offset)
        if params.member_weight > 0:
            score += params.member_weight * (member_mean(story, vector, idf, params.member_sample) - cosine)
        if story.size <= params.young_story_size:
            score -= params.young_story_margin
        scored.append((score, sid))
    score, sid = min(scored, key=lambda x: (-x[0], x[1]))
    return by_id[sid], score
