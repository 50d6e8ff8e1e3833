"""The online IDF: document frequencies of every article seen, decayed with a half-life.

Nothing is fitted on evaluation data: the IDF is just what the stream has shown so far, and it
forgets with a half-life (``idf_half_life_hours``) so it stays small and follows the news. Entity
words are counted as ``e:<word>`` beside the terms.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

ENTITY_PREFIX = "e:"
DF_FLOOR = 0.05
"""A decayed document frequency below this is dropped (the term weighs as unseen)."""
IDF_FLOOR = 0.1


class Idf(dict[str, float]):
    """Smoothed online IDF at one moment: ``ln((N + prior + 1) / (df + 1))``, at least ``IDF_FLOOR``.

    Called as a function of a term. Values are memoised in the mapping itself, so a term met
    again costs one C-level dict lookup (``__call__`` is ``dict.__getitem__``; a miss computes it
    in ``__missing__``): a writer asks for ~180 weights per article (issue 15). Build a new one
    whenever the frequencies change.

    >>> idf = Idf({"bridge": 9.0}, 0.0, 10.0)
    >>> round(idf("bridge"), 4), round(idf("unseen"), 4)
    (0.1, 2.3979)
    """

    __slots__ = ("_df", "_n")

    def __init__(self, df: Mapping[str, float], n_docs: float, prior_docs: float) -> None:
        super().__init__()
        self._df = df
        self._n = n_docs + prior_docs

    def __missing__(self, term: str) -> float:
        value = self[term] = max(math.log((self._n + 1.0) / (self._df.get(term, 0.0) + 1.0)), IDF_FLOOR)
        return value

    __call__ = dict.__getitem__


class OnlineIdf:
    """Decayed document frequencies of the terms and entity words of the articles seen.

    Attributes:
        df: Term (or ``e:<entity word>``) → decayed document frequency, in first-seen order.
        n_docs: Decayed number of documents counted.
    """

    __slots__ = ("df", "n_docs", "prior_docs", "half_life_hours")

    def __init__(self, prior_docs: float, half_life_hours: float, df: dict[str, float] | None = None,
                 n_docs: float = 0.0) -> None:
        self.prior_docs = prior_docs
        self.half_life_hours = half_life_hours
        self.df: dict[str, float] = {} if df is None else df
        self.n_docs = n_docs

    def function(self) -> Idf:
        """The IDF as it stands now (valid until the next :meth:`count` or :meth:`decay`)."""
        return Idf(self.df, self.n_docs, self.prior_docs)

    def count(self, terms: Iterable[str], entity_words: Iterable[str]) -> None:
        """Count one document with these terms and entity words."""
        self.n_docs += 1.0
        df = self.df
        for term in terms:
            df[term] = df.get(term, 0.0) + 1.0
        for word in entity_words:
            key = ENTITY_PREFIX + word
            df[key] = df.get(key, 0.0) + 1.0

    def decay(self, hours: float) -> None:
        """Age every frequency by ``hours`` of stream time, dropping those below ``DF_FLOOR``.

        >>> idf = OnlineIdf(10.0, 24.0, {"a": 1.0, "b": 0.08}, 1.0)
        >>> idf.decay(24.0)
        >>> idf.df, idf.n_docs
        ({'a': 0.5}, 0.5)
        """
        factor = 0.5 ** (hours / self.half_life_hours)
        self.n_docs *= factor
        self.df = {t: c * factor for t, c in self.df.items() if c * factor >= DF_FLOOR}
