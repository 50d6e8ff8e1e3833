"""Articles that carry a sentence embedding, with or without a body, for the clustering tests of
issue 14 (written for these tests): random unit directions stand for what an event's articles
say, and an article's embedding is a noisy copy of its event's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from transforms.clustering import ClusterParams
from transforms.features import ArticleFeatures, features_from_text

T0 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
# An online pass that joins everything: a story fed two events.
MIXING = ClusterParams(join_threshold=0.0, date_conflict_penalty=0.0, year_conflict_penalty=0.0)

SBARRO = ["Sbarro files for bankruptcy protection for the second time",
          "Pizza chain Sbarro back in bankruptcy court",
          "Sbarro seeks Chapter 11 again as mall traffic slumps"]
# Shares one word with the Sbarro headlines, and says the same in other words.
SBARRO_OTHER_WORDS = "Mall pizza seller Sbarro goes under again"


def direction(seed: int) -> np.ndarray:
    """A random unit vector in 512 dimensions (two of them are nearly orthogonal)."""
    vector = np.random.default_rng(seed).normal(size=512)
    return vector / np.linalg.norm(vector)


def near(base: np.ndarray, seed: int, noise: float = 0.3) -> tuple[float, ...]:
    """A unit vector close to ``base`` (cosine about 0.96 at the default noise)."""
    vector = base + noise * direction(seed)
    return tuple(float(x) for x in vector / np.linalg.norm(vector))


def headline(aid: str, title: str, minutes: float, embedding: tuple[float, ...] | None,
             publisher: str | None = None) -> ArticleFeatures:
    """An article known by its title alone (a title-only feed item): no body of its own."""
    return features_from_text(aid, title, "", "en", T0 + timedelta(minutes=minutes), publisher or f"pub-{aid}",
                              embedding=embedding)


def bodied(aid: str, text: str, minutes: float, embedding: tuple[float, ...] | None = None,
           publisher: str | None = None) -> ArticleFeatures:
    """An article with a body; its title is the body's first sentence."""
    return features_from_text(aid, text.split(". ")[0][:80], text, "en", T0 + timedelta(minutes=minutes),
                              publisher or f"pub-{aid}", embedding=embedding)
