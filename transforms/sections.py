"""Sections of an article and of a story: feed hints, RSS categories, then a text classifier.

The classifier reads the multilingual sentence embedding ingest already computes for each article
(title and lede, ``transforms.embedding``): a logistic regression trained on labelled English
headlines (``training/sections/``), which carries over to Chinese and Malay because the embedding
puts a headline and its translation close together. It abstains when its best class is not likely
enough. Measured on Google News headlines of stories it never saw, and on Chinese and Malay
headlines and articles, in docs/measurements.md (issue 21). A story takes the sections most of its
articles' votes agree on (issue 5).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

SECTIONS = ("world", "politics", "business", "technology", "science", "health", "sports", "entertainment")
"""The canonical sections every edition may have, besides ``top``."""

SECTION_ALIASES = {
    "sport": "sports", "tech": "technology", "science-tech": "technology", "sci-tech": "technology",
    "economy": "business", "finance": "business", "markets": "business", "money": "business",
    "international": "world", "world-news": "world", "global": "world", "foreign": "world",
    "elections": "politics", "government": "politics", "culture": "entertainment", "arts": "entertainment",
    "showbiz": "entertainment", "film": "entertainment", "music": "entertainment", "football": "sports",
    "soccer": "sports", "wellness": "health", "medicine": "health", "environment": "science",
    "climate": "science", "space": "science",
}

_SLUG = re.compile(r"[^a-z0-9]+")
SECTION_HINT_MAX_CHARS = 100
"""A longer hint or category names no section; it is not matched (issue 32: every text a regular
expression sees is capped)."""
GENERIC_HINTS = frozenset({"top", "top-stories", "news", "home", "latest", "general", "headlines", "all",
                           "opinion", "local", "lifestyle"})
"""Hints that name no topic section (opinion is a label on the article, local a region)."""


def canonical_section(raw: str | None) -> str | None:
    """A hint or category mapped onto SECTIONS, or None.

    >>> canonical_section("Sport"), canonical_section("Science & Tech"), canonical_section("Opinion")
    ('sports', 'technology', None)
    """
    if not raw or len(raw) > SECTION_HINT_MAX_CHARS:
        return None
    slug = _SLUG.sub("-", raw.lower()).strip("-")
    slug = SECTION_ALIASES.get(slug, slug)
    return slug if slug in SECTIONS else None


@dataclass(frozen=True, slots=True)
class SectionModel:
    """A multinomial logistic regression over an article's sentence embedding (issue 21).

    Trained on labelled headlines by ``scripts/train_section_model.py`` and shipped as package data
    (``tasks/data/section_model.json``); the task layer reads the file and passes the model in.
    ``embedding_model`` names the embedding the weights were fitted on: vectors from any other model
    mean nothing to them.
    """

    classes: tuple[str, ...]
    weights: npt.NDArray[np.float64]  # (len(classes), dim)
    intercepts: npt.NDArray[np.float64]  # (len(classes),)
    min_probability: float
    embedding_model: str
    version: str

    @property
    def dim(self) -> int:
        return int(self.weights.shape[1])


def section_model_from_dict(data: Mapping[str, Any]) -> SectionModel:
    """Parse and check a model as written by the training script.

    Raises:
        ValueError: A class outside SECTIONS, shapes that disagree, or a threshold outside [0, 1].
    """
    try:
        classes = tuple(str(c) for c in data["classes"])
        weights = np.asarray(data["weights"], dtype=np.float64)
        intercepts = np.asarray(data["intercepts"], dtype=np.float64)
        min_probability = float(data["min_probability"])
        embedding_model = str(data["embedding"]["model"])
        version = str(data["version"])
    except (KeyError, TypeError) as e:
        raise ValueError(f"section model is missing a field: {e}") from e
    unknown = [c for c in classes if c not in SECTIONS]
    if unknown or len(set(classes)) != len(classes) or len(classes) < 2:
        raise ValueError(f"section model classes must be distinct canonical sections, got {classes}")
    if weights.ndim != 2 or weights.shape[0] != len(classes) or intercepts.shape != (len(classes),):
        raise ValueError(f"section model shapes disagree: weights {weights.shape}, intercepts {intercepts.shape}")
    if not 0 <= min_probability <= 1:
        raise ValueError(f"min_probability must be in [0, 1], got {min_probability}")
    if not (np.isfinite(weights).all() and np.isfinite(intercepts).all()):
        raise ValueError("section model weights must be finite")
    return SectionModel(classes, weights, intercepts, min_probability, embedding_model, version)


def section_probabilities(vectors: Sequence[Sequence[float] | None], model: SectionModel
                          ) -> npt.NDArray[np.float64]:
    """Each vector's probability per class (rows of zeros where there is no usable vector).

    Raises:
        ValueError: A vector whose length is not the model's dimension.
    """
    out = np.zeros((len(vectors), len(model.classes)), dtype=np.float64)
    usable = [i for i, v in enumerate(vectors) if v is not None and len(v) and np.any(np.asarray(v) != 0)]
    if not usable:
        return out
    matrix = np.asarray([vectors[i] for i in usable], dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] != model.dim:
        raise ValueError(f"embeddings have {matrix.shape[-1]} dimensions, the section model {model.dim}")
    logits = matrix @ model.weights.T + model.intercepts
    logits -= logits.max(axis=1, keepdims=True)
    exp = np.exp(logits)
    out[usable] = exp / exp.sum(axis=1, keepdims=True)
    return out


def classify_embeddings(vectors: Sequence[Sequence[float] | None], model: SectionModel,
                        min_probability: float | None = None) -> list[str | None]:
    """The section each embedding suggests, or None where the model is unsure or there is no vector.

    This is the whole of what an article's text says about its section; ingest stores it as
    ``section_guess`` and ``newsroom classify-sections`` prints it.

    Args:
        vectors: Sentence embeddings of title and lede (``transforms.embedding``), None where missing.
        model: The trained model.
        min_probability: The least class probability that counts as an answer; the model's own
            threshold (chosen in training for the coverage it was measured at) by default.

    Returns:
        One section or None per vector, in input order.

    >>> toy = section_model_from_dict({"classes": ["sports", "business"], "weights": [[4, 0], [0, 4]],
    ...     "intercepts": [0, 0], "min_probability": 0.9, "embedding": {"model": "toy"}, "version": "t"})
    >>> classify_embeddings([(1.0, 0.0), (0.0, 1.0), (0.7, 0.7), None], toy)
    ['sports', 'business', None, None]
    """
    threshold = model.min_probability if min_probability is None else min_probability
    if not 0 <= threshold <= 1:
        raise ValueError(f"min_probability must be in [0, 1], got {threshold}")
    probabilities = section_probabilities(vectors, model)
    best = probabilities.argmax(axis=1)
    return [model.classes[b] if probabilities[i, b] > 0 and probabilities[i, b] >= threshold else None
            for i, b in enumerate(best)]


def _first_category(categories: Sequence[str] | None) -> str | None:
    return next((c for c in map(canonical_section, categories or ()) if c), None)


def article_sections(hints: Sequence[str | None], categories: Sequence[Sequence[str] | None],
                     guesses: Sequence[str | None]) -> list[str | None]:
    """One section per article: the feed hint, else an RSS category, else the text's guess.

    Args:
        hints: The feed's section hint per article (``articles.section``).
        categories: The item's RSS/Atom categories per article.
        guesses: The classifier's answer per article (``articles.section_guess``), None where it
            abstained or the article has no embedding.

    Returns:
        A section from SECTIONS or None, per article.

    >>> article_sections(["Sport", None, None], [None, ["Economy"], None], ["world", "health", None])
    ['sports', 'business', None]
    """
    if not len(hints) == len(categories) == len(guesses):
        raise ValueError("hints, categories and guesses must have the same length")
    return [canonical_section(hint) or _first_category(cats) or canonical_section(guess)
            for hint, cats, guess in zip(hints, categories, guesses, strict=True)]


def article_section_votes(hints: Sequence[str | None], categories: Sequence[Sequence[str] | None],
                          guesses: Sequence[str | None]) -> list[list[str]]:
    """Each article's votes: its feed hint, its first usable RSS category and the text's guess,
    each mapped onto SECTIONS. A feed's hint is the same for every item it carries, whatever the
    item is about; voting lets the text outvote a wrong hint across a story.

    >>> article_section_votes(["Sport"], [["Economy"]], ["business"])
    [['sports', 'business', 'business']]
    """
    if not len(hints) == len(categories) == len(guesses):
        raise ValueError("hints, categories and guesses must have the same length")
    votes = []
    for hint, cats, guess in zip(hints, categories, guesses, strict=True):
        mine = [s for s in (canonical_section(hint), _first_category(cats), canonical_section(guess)) if s]
        votes.append(mine)
    return votes


def story_sections_from_votes(sections: Iterable[str | None], min_share: float = 0.5) -> list[str]:
    """The sections most of a story's articles agree on: every section with at least ``min_share``
    of the votes, or the leaders when none reaches it.

    >>> story_sections_from_votes(["world", "world", "politics", None])
    ['world']
    >>> story_sections_from_votes(["world", "politics"])
    ['politics', 'world']
    """
    counts = Counter(s for s in sections if s)
    if not counts:
        return []
    total = sum(counts.values())
    chosen = [s for s, c in counts.items() if c / total >= min_share]
    if not chosen:
        best = max(counts.values())
        chosen = [s for s, c in counts.items() if c == best]
    return sorted(chosen)
