"""The online IDF: document frequencies of every article seen, decayed with a half-life.

Nothing is fitted on evaluation data: the IDF is just what the stream has shown so far, and it
forgets with a half-life (``idf_half_life_hours``) so it stays small and follows the news. Entity
words are counted as ``e:<word>`` beside the terms.

The decay is one global scale (issue 15): a term's decayed frequency is its stored count times
:attr:`OnlineIdf.scale`, so an hour's decay changes one number instead of every entry, and a
writer's per-run delta holds only the terms its articles counted. The counts are folded into the
scale (and the faded ones dropped) once the scale falls below ``RESCALE_BELOW``: about once per
half-life, the one time every entry changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat

import numpy as np
import numpy.typing as npt

ENTITY_PREFIX = "e:"
DF_FLOOR = 0.05
"""A decayed document frequency below this is dropped (the term weighs as unseen)."""
IDF_FLOOR = 0.1
RESCALE_BELOW = 0.5
"""The counts are folded into the scale when it falls below this (once per half-life)."""


class Idf(dict[str, float]):
    """Smoothed online IDF at one moment: ``ln((N + prior + 1) / (df + 1))``, at least ``IDF_FLOOR``.

    :meth:`weights` gives the weights of many terms as one numpy computation: a writer asks for
    the ~100 terms of each article and the ~90 of each story whose cached norms are out of date
    (issue 15). Called as a function of one term, the IDF is memoised in the mapping itself, so
    a term met again costs one C-level dict lookup (``__call__`` is ``dict.__getitem__``; a
    miss computes it through :meth:`weights` too, so a term weighs the same whichever way it
    was asked). Build a new one whenever the frequencies change.

    >>> idf = Idf({"bridge": 9.0}, 0.0, 10.0)
    >>> round(idf("bridge"), 4), round(idf("unseen"), 4)
    (0.1, 2.3979)
    >>> idf.weights(["unseen", "bridge"]).round(4).tolist()
    [2.3979, 0.1]
    """

    __slots__ = ("_df", "_n1", "_scale", "_unseen")

    def __init__(self, df: Mapping[str, float], n_docs: float, prior_docs: float, scale: float = 1.0) -> None:
        super().__init__()
        self._df = df
        self._n1 = n_docs + prior_docs + 1.0
        self._scale = scale
        self._unseen = max(float(np.log(self._n1)), IDF_FLOOR)  # the weight at frequency 0

    def weights(self, terms: Sequence[str], *, memoise: bool = False) -> npt.NDArray[np.float64]:
        """The weights of ``terms``, in order (``memoise``: kept for terms that will be asked
        for one by one, as an article's are by the candidate search)."""
        frequencies = np.fromiter(map(self._df.get, terms, repeat(0.0)), np.float64, len(terms))
        frequencies *= self._scale
        values = np.log(self._n1 / (frequencies + 1.0))
        np.maximum(values, IDF_FLOOR, out=values)
        # A faded frequency weighs as unseen, as if it had been dropped.
        values[frequencies < DF_FLOOR] = self._unseen
        if memoise:
            self.update(zip(terms, values.tolist(), strict=True))
        return values

    def __missing__(self, term: str) -> float:
        return float(self.weights((term,), memoise=True)[0])

    __call__ = dict.__getitem__


class OnlineIdf:
    """Decayed document frequencies of the terms and entity words of the articles seen.

    Attributes:
        df: Term (or ``e:<entity word>``) → its count; the decayed document frequency is the
            count times ``scale`` (below ``DF_FLOOR``: faded, weighs as unseen).
        n_docs: Decayed number of documents counted.
        scale: The decay every count has undergone since it was last folded in.
        changed: Terms counted since :meth:`forget_changes` (what a writer's delta holds).
        rescaled: Whether every count changed since then (the scale was folded in).
    """

    __slots__ = ("df", "n_docs", "prior_docs", "half_life_hours", "scale", "changed", "rescaled")

    def __init__(self, prior_docs: float, half_life_hours: float, df: dict[str, float] | None = None,
                 n_docs: float = 0.0, scale: float = 1.0) -> None:
        self.prior_docs = prior_docs
        self.half_life_hours = half_life_hours
        self.df: dict[str, float] = {} if df is None else df
        self.n_docs = n_docs
        self.scale = scale
        self.changed: set[str] = set()
        self.rescaled = False

    def function(self) -> Idf:
        """The IDF as it stands now (valid until the next :meth:`count` or :meth:`decay`)."""
        return Idf(self.df, self.n_docs, self.prior_docs, self.scale)

    def frequencies(self) -> dict[str, float]:
        """Term → decayed document frequency, the faded left out.

        >>> idf = OnlineIdf(10.0, 24.0, {"a": 4.0, "b": 0.08}, 1.0, scale=0.5)
        >>> idf.frequencies()
        {'a': 2.0}
        """
        scale = self.scale
        return {t: c * scale for t, c in self.df.items() if c * scale >= DF_FLOOR}

    def count(self, terms: Iterable[str], entity_words: Iterable[str]) -> None:
        """Count one document with these terms and entity words."""
        self.n_docs += 1.0
        df, scale = self.df, self.scale
        keys = [*terms, *[ENTITY_PREFIX + word for word in entity_words]]
        self.changed.update(keys)
        if scale == 1.0:  # nothing decayed since the counts were folded in: none has faded
            for key in keys:
                df[key] = df.get(key, 0.0) + 1.0
            return
        step = 1.0 / scale
        for key in keys:
            count = df.get(key)
            # A faded count starts again from nothing, as if it had been dropped.
            df[key] = step if count is None or count * scale < DF_FLOOR else count + step

    def decay(self, hours: float) -> None:
        """Age every frequency by ``hours`` of stream time: one change to the scale. Once the
        scale falls below ``RESCALE_BELOW`` it is folded into the counts and the faded ones
        (below ``DF_FLOOR``) are dropped.

        >>> idf = OnlineIdf(10.0, 24.0, {"a": 1.0, "b": 0.16}, 1.0)
        >>> idf.decay(24.0)
        >>> idf.df, idf.scale, idf.frequencies()
        ({'a': 1.0, 'b': 0.16}, 0.5, {'a': 0.5, 'b': 0.08})
        >>> idf.decay(24.0)
        >>> idf.df, idf.scale, idf.n_docs
        ({'a': 0.25}, 1.0, 0.25)
        """
        factor = 0.5 ** (hours / self.half_life_hours)
        self.n_docs *= factor
        self.scale *= factor
        if self.scale < RESCALE_BELOW:
            self.df = self.frequencies()
            self.scale = 1.0
            self.rescaled = True

    def forget_changes(self) -> None:
        """Start counting changes afresh (a writer committed the ones so far)."""
        self.changed = set()
        self.rescaled = False
