"""Shingle-overlap metric of the Zyte article-extraction benchmark.

Reimplements the metric described in /work/shared/corpus/README.md ("pages/"): texts are
tokenised with ``\\w+``, each text becomes a multiset of 4-token shingles, and per page the
true-positive / false-positive / false-negative shingle counts are normalised to sum to 1 so
long pages do not outweigh short ones. Precision and recall are averaged over pages (pages
with an empty prediction are left out of the precision average) and F1 is the harmonic mean
of the two averages.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

SHINGLE_SIZE = 4
_TOKEN_RE = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class PageScore:
    """Normalised shingle overlap of one page: tp + fp + fn == 1 unless all are 0."""

    tp: float
    fp: float
    fn: float

    @property
    def precision(self) -> float:
        if self.fp == 0 and self.fn == 0:
            return 1.0
        if self.tp + self.fp == 0:
            return 0.0
        return self.tp / (self.tp + self.fp)

    @property
    def recall(self) -> float:
        if self.fp == 0 and self.fn == 0:
            return 1.0
        if self.tp + self.fn == 0:
            return 0.0
        return self.tp / (self.tp + self.fn)


@dataclass(frozen=True, slots=True)
class CorpusScore:
    precision: float
    recall: float
    f1: float
    pages: int


def shingle_counts(text: str, size: int = SHINGLE_SIZE) -> Counter[tuple[str, ...]]:
    """Multiset of ``size``-token shingles of ``text``; a shorter text is one short shingle.

    >>> sorted(shingle_counts("a b c d e", 4).items())
    [(('a', 'b', 'c', 'd'), 1), (('b', 'c', 'd', 'e'), 1)]
    >>> shingle_counts("", 4)
    Counter()
    """
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    tokens = _TOKEN_RE.findall(text or "")
    if not tokens:
        return Counter()
    if len(tokens) < size:
        return Counter([tuple(tokens)])
    return Counter(tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1))


def score_page(true: str, pred: str, size: int = SHINGLE_SIZE) -> PageScore:
    """Normalised tp/fp/fn of the predicted text against the true text.

    >>> score_page("the cat sat on the mat", "the cat sat on the mat").precision
    1.0
    >>> score_page("the cat sat on the mat", "dogs bark at night loudly").recall
    0.0
    """
    true_counts = shingle_counts(true, size)
    pred_counts = shingle_counts(pred, size)
    tp = float(sum((true_counts & pred_counts).values()))
    fp = float(sum((pred_counts - true_counts).values()))
    fn = float(sum((true_counts - pred_counts).values()))
    total = tp + fp + fn
    if total > 0:
        tp, fp, fn = tp / total, fp / total, fn / total
    return PageScore(tp=tp, fp=fp, fn=fn)


def score_corpus(pairs: Iterable[tuple[str, str]], size: int = SHINGLE_SIZE) -> CorpusScore:
    """Mean precision, mean recall and their harmonic mean over (true, pred) pairs.

    >>> s = score_corpus([("a b c d e", "a b c d e"), ("a b c d e", "")])
    >>> (s.precision, s.recall, round(s.f1, 3))
    (1.0, 0.5, 0.667)
    """
    scores = [score_page(t, p, size) for t, p in pairs]
    if not scores:
        raise ValueError("no pages to score")
    precisions = [s.precision for s in scores if s.tp + s.fp > 0]
    recalls = [s.recall for s in scores if s.tp + s.fn > 0]
    precision = sum(precisions) / len(precisions) if precisions else 0.0
    recall = sum(recalls) / len(recalls) if recalls else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return CorpusScore(precision=precision, recall=recall, f1=f1, pages=len(scores))
