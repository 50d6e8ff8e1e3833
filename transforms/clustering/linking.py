"""Cross-language story links: stories of different languages that report the same event.

Linked where both stories have sentence embeddings by two signals at once: the cosine of their
mean embeddings plus a share of the IDF-weighted cosine of their language-neutral tokens (names,
acronyms, numbers), each story the other's best match in its language (issue 33); else by the
token profiles alone. Groups are joined with union-find. Runs over a window's stories, after
clustering.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from transforms.clustering.params import ClusterParams
from transforms.clustering.story import Assignment
from transforms.embedding import mean_direction
from transforms.features import DATE_TERM_PREFIX, ArticleFeatures

_LATIN_TOKEN_RE = re.compile(r"^[a-z\u00c0-\u024f][a-z\u00c0-\u024f0-9'\-]*$")


def language_neutral_tokens(features: ArticleFeatures) -> list[str]:
    """Tokens that read the same in every language: names, acronyms and numbers (see
    :func:`neutral_tokens`)."""
    return neutral_tokens(features.entities, features.terms)


def neutral_tokens(entities: Sequence[str], terms: Sequence[str]) -> list[str]:
    """Tokens that read the same in every language: names, acronyms and numbers.

    Words of the article's entities (Latin-script names, which Malay and English share and
    Chinese newswires give in brackets), Latin-script terms of CJK articles, and numbers of
    two or more digits (amounts, ages, dates), plus the dateline year.

    >>> neutral_tokens(["anwar ibrahim"], ["perdana", "2024", "date:2024"])
    ['anwar', 'ibrahim', '2024', 'date:2024']
    """
    out: dict[str, None] = {}
    for name in entities:
        for word in name.split():
            word = word.strip("'-")
            if len(word) > 2 and _LATIN_TOKEN_RE.match(word):
                out[word] = None
    cjk = any("\u4e00" <= ch <= "\u9fff" for t in terms[:10] for ch in t)
    for term in terms:
        if term.isdigit() and len(term) >= 2:
            out[term] = None
        elif term.startswith(DATE_TERM_PREFIX):
            out[term] = None
        elif cjk and len(term) > 2 and _LATIN_TOKEN_RE.match(term):
            out[term] = None
    return list(out)


def link_languages(
    articles: Sequence[ArticleFeatures], assignments: Sequence[Assignment], params: ClusterParams | None = None
) -> dict[str, str]:
    """Link stories of different languages that report the same event.

    Two rules, by what the stories carry:

    - **Embeddings** (both stories have articles with a sentence embedding, see
      :mod:`transforms.embedding`): the stories' mean embeddings are compared across languages;
      a pair is linked when its cosine is at least ``params.link_embedding_threshold`` and each
      story is the other's best match in that language (mutual best: one event is usually one
      story per language, and a near-miss second best is the usual false link).
    - **Language-neutral tokens** otherwise: a profile of :func:`language_neutral_tokens`
      counted over the story's articles, compared by IDF-weighted cosine (IDF over the stories
      given, i.e. the active window); pairs at or above ``params.link_threshold`` sharing at
      least ``params.link_min_shared`` tokens are linked.

    Links are joined with union-find. Only stories of different languages are linked directly;
    a group can still hold two stories of one language through a third.

    Args:
        articles: Features of the articles of the window, any languages.
        assignments: Their assignments (same order or not; matched by article id).
        params: Parameters (``link_embedding_threshold``, ``link_threshold``, ``link_min_shared``).

    Returns:
        Story id → linked group id (the smallest story id of the group), only for stories
        linked to at least one other story.
    """
    params = params or ClusterParams()
    story_of = {a.article_id: a.story_id for a in assignments}
    profiles: dict[str, dict[str, float]] = {}
    language_of: dict[str, str] = {}
    embeddings: dict[str, list[Sequence[float]]] = defaultdict(list)
    for features in articles:
        sid = story_of.get(features.article_id)
        if sid is None:
            continue
        language_of[sid] = features.language
        profile = profiles.setdefault(sid, {})
        for token in language_neutral_tokens(features):
            profile[token] = profile.get(token, 0.0) + 1.0
        if features.embedding:
            embeddings[sid].append(features.embedding)
    return link_story_profiles(language_of, profiles, embeddings, params)


def _mutual_best_pairs(left: npt.NDArray[np.float64], right: npt.NDArray[np.float64], threshold: float,
                       chunk: int = 1024, *, left_tokens: Any = None, right_tokens: Any = None,
                       token_weight: float = 0.0, floor: float = -1.0) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)`` where row ``i`` of ``left`` and row ``j`` of ``right`` are each other's
    most similar and similar enough.

    The similarity is the dot product of the rows, plus ``token_weight`` times the dot product of
    the rows' token profiles when given (``left_tokens``, ``right_tokens``: sparse matrices, one row
    per story, over one vocabulary); a pair is kept when that similarity is at least ``threshold``
    and the rows' own dot product at least ``floor`` (first index on ties). Computed in row chunks,
    so memory stays ``chunk × len(right)`` however many stories a snapshot lists.

    >>> eye = np.eye(3)
    >>> _mutual_best_pairs(eye, eye[[2, 0]], 0.5)
    [(0, 1), (2, 0)]
    """
    best_right = np.empty(len(left), dtype=np.int64)
    best_right_score = np.empty(len(left))
    best_right_dot = np.empty(len(left))
    col_best = np.full(len(right), -1, dtype=np.int64)
    col_score = np.full(len(right), -np.inf)
    tokens_t = right_tokens.T.tocsc() if token_weight and right_tokens is not None else None
    for start in range(0, len(left), chunk):
        dots = left[start : start + chunk] @ right.T
        sims = dots
        if tokens_t is not None:
            sims = dots + token_weight * (left_tokens[start : start + chunk] @ tokens_t).toarray()
        rows_best = np.argmax(sims, axis=1)
        best_right[start : start + len(sims)] = rows_best
        best_right_score[start : start + len(sims)] = sims[np.arange(len(sims)), rows_best]
        best_right_dot[start : start + len(sims)] = dots[np.arange(len(sims)), rows_best]
        rows = np.argmax(sims, axis=0)
        scores = sims[rows, np.arange(len(right))]
        better = scores > col_score  # strictly: an earlier row keeps a tie
        col_best[better] = rows[better] + start
        col_score[better] = scores[better]
    return [(i, int(j)) for i, j in enumerate(best_right.tolist())
            if col_best[j] == i and best_right_score[i] >= threshold and best_right_dot[i] >= floor]


def _token_vectors(ordered: Sequence[str], token_counts: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Each story's language-neutral tokens, IDF-weighted over the stories given, L2-normalised."""
    df: dict[str, int] = defaultdict(int)
    for sid in ordered:
        for token in token_counts.get(sid, {}):
            df[token] += 1
    n = len(ordered)
    vectors: dict[str, dict[str, float]] = {}
    for sid in ordered:
        raw = {t: (1.0 + math.log(c)) * math.log((n + 1) / (df[t] + 0.5)) for t, c in token_counts.get(sid, {}).items()}
        norm = math.sqrt(sum(v * v for v in raw.values()))
        vectors[sid] = {t: v / norm for t, v in raw.items()} if norm > 0 else {}
    return vectors


def _token_matrix(ids: Sequence[str], vectors: Mapping[str, Mapping[str, float]], columns: Mapping[str, int]) -> Any:
    """The token vectors of ``ids`` as a sparse matrix (one row per story, ``columns`` its vocabulary)."""
    from scipy import sparse

    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    for row, sid in enumerate(ids):
        for token, weight in vectors[sid].items():
            rows.append(row)
            cols.append(columns[token])
            values.append(weight)
    return sparse.csr_matrix((np.asarray(values, dtype=np.float64), (rows, cols)), shape=(len(ids), max(1, len(columns))))


def link_story_profiles(
    language_of: Mapping[str, str],
    token_counts: Mapping[str, Mapping[str, float]],
    embeddings: Mapping[str, Sequence[Sequence[float]]],
    params: ClusterParams | None = None,
) -> dict[str, str]:
    """The linking of :func:`link_languages`, from per-story profiles.

    Args:
        language_of: Story id → language, for every story to consider.
        token_counts: Story id → language-neutral token → count.
        embeddings: Story id → the sentence embeddings of its articles (may be missing).
        params: Parameters.

    Returns:
        Story id → linked group id (the smallest story id of the group), only for linked stories.
    """
    params = params or ClusterParams()
    parent = {sid: sid for sid in language_of}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        a, b = find(a), find(b)
        if a != b:
            parent[max(a, b)] = min(a, b)

    ordered = sorted(language_of)
    vectors = _token_vectors(ordered, token_counts)
    columns = {token: i for i, token in enumerate(sorted({t for v in vectors.values() for t in v}))}
    directions = {sid: d for sid in ordered if (d := mean_direction(embeddings.get(sid) or ())) is not None}
    by_language: dict[str, list[str]] = defaultdict(list)
    for sid in ordered:
        if sid in directions:
            by_language[language_of[sid]].append(sid)
    languages = sorted(by_language)
    for i, first in enumerate(languages):
        for second in languages[i + 1 :]:
            a_ids, b_ids = by_language[first], by_language[second]
            # Two signals: the embeddings' cosine, and the names and numbers both stories print
            # (issue 33): each story's best match is chosen on both, and a link whose cosine alone
            # falls short of link_score_threshold needs shared names or numbers to make it up.
            for a, b in _mutual_best_pairs(np.vstack([directions[s] for s in a_ids]),
                                           np.vstack([directions[s] for s in b_ids]),
                                           params.link_score_threshold,
                                           left_tokens=_token_matrix(a_ids, vectors, columns),
                                           right_tokens=_token_matrix(b_ids, vectors, columns),
                                           token_weight=params.link_token_weight,
                                           floor=params.link_embedding_threshold):
                union(a_ids[a], b_ids[b])

    # Token profiles alone, for the pairs the embeddings cannot judge (a story without embeddings).
    index: dict[str, list[str]] = defaultdict(list)
    for sid in ordered:
        for token in vectors[sid]:
            index[token].append(sid)
    for sid in ordered:
        dots: dict[str, float] = defaultdict(float)
        shared: dict[str, int] = defaultdict(int)
        for token, weight in vectors[sid].items():
            for other in index[token]:
                if other > sid:
                    dots[other] += weight * vectors[other][token]
                    shared[other] += 1
        for other in sorted(dots):
            same = language_of[other] == language_of[sid]
            if not same and sid in directions and other in directions:
                continue  # judged by the embeddings above
            threshold = params.link_same_language_threshold if same else params.link_threshold
            if threshold is not None and dots[other] >= threshold and shared[other] >= params.link_min_shared:
                union(sid, other)
    groups: dict[str, list[str]] = defaultdict(list)
    for sid in ordered:
        groups[find(sid)].append(sid)
    return {sid: min(members) for members in groups.values() if len(members) > 1 for sid in members}
