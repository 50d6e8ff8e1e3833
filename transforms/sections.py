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
from dataclasses import dataclass, field
from typing import Any, TypedDict

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


SECTION_LEARNING_RATE = 0.5
"""Step of each folded example (:func:`guess_and_learn`). On Google News dev, stories split in two
by a hash and each half streamed with 70% of its headlines naming their section, the headlines
naming none went from 0.867-0.937 accuracy at 0.81 coverage (the cold start, fitted without that
half) to 0.952-0.967 at 0.91-0.92 with 0.5; 1.0 did a little better there, but the captured real
feeds, whose blog tags are noisier labels, gained no more from it (docs/measurements.md)."""
LEARNED_SECTIONS_VERSION = 1
FOLDED_RUNS_KEPT = 720
"""Runs remembered as folded: twelve hours of minute runs, far longer than a rerun takes to come."""


@dataclass(slots=True)
class LanguageSections:
    """What the stream taught the model for one language: a change to its weights and intercepts."""

    weights: npt.NDArray[np.float64]  # (classes, dim), added to the model's
    intercepts: npt.NDArray[np.float64]  # (classes,)
    examples: int = 0


@dataclass(slots=True)
class LearnedSections:
    """The section model as the stream taught it, per language (issue 33).

    Real feeds name the section of most articles (the feed's hint, the page's ``article:section``,
    an RSS category). Each such article, as it arrives, is one step of stochastic gradient descent
    on the multinomial logistic loss, from the shipped model (the cold start) for its language: the
    model an article naming no section is classified by has seen the stories of the day, in that
    language, and no other language's. Held for one shipped model and one embedding model: either
    changing starts it again from the cold start.

    ``folded_runs`` names the runs (their instants, ISO) whose articles were folded, the last
    :data:`FOLDED_RUNS_KEPT`: a run rerun after a crash folds nothing twice, and runs that store out
    of order each fold theirs.
    """

    model_version: str
    embedding_model: str
    languages: dict[str, LanguageSections]
    folded_runs: list[str] = field(default_factory=list)

    def note_run(self, run: str) -> None:
        """Record ``run`` as folded (the oldest forgotten past :data:`FOLDED_RUNS_KEPT`)."""
        if run not in self.folded_runs:
            self.folded_runs = sorted([*self.folded_runs, run])[-FOLDED_RUNS_KEPT:]


def empty_learned(model: SectionModel, embedding_model: str) -> LearnedSections:
    """The cold start: nothing taught yet."""
    return LearnedSections(model.version, embedding_model, {})


def learned_probabilities(vectors: Sequence[Sequence[float] | None], languages: Sequence[str], model: SectionModel,
                          learned: LearnedSections | None) -> npt.NDArray[np.float64]:
    """:func:`section_probabilities` with each vector's language's taught changes added to the model."""
    if learned is None or not learned.languages:
        return section_probabilities(vectors, model)
    if len(vectors) != len(languages):
        raise ValueError("vectors and languages must have the same length")
    out = np.zeros((len(vectors), len(model.classes)), dtype=np.float64)
    for i, (vector, language) in enumerate(zip(vectors, languages, strict=True)):
        taught = learned.languages.get(language)
        out[i] = section_probabilities([vector], model if taught is None else _taught_model(model, taught))[0]
    return out


def _taught_model(model: SectionModel, taught: LanguageSections) -> SectionModel:
    return SectionModel(model.classes, model.weights + taught.weights, model.intercepts + taught.intercepts,
                        model.min_probability, model.embedding_model, model.version)


def guess_and_learn(items: Sequence[tuple[str, str | None, Sequence[float] | None]], model: SectionModel,
                    learned: LearnedSections, rate: float = SECTION_LEARNING_RATE) -> list[str | None]:
    """Classify articles in arrival order, folding each one that names its section into ``learned``
    after it is classified (an article is never classified by a model it taught).

    Args:
        items: ``(language, the section its feed or page names or None, embedding or None)`` per
            article, in arrival order.
        model: The shipped model (the cold start).
        learned: What the stream taught so far; changed in place.
        rate: Step of each example.

    Returns:
        Each article's guess (``classify_embeddings``'s rule, at the model's threshold).

    >>> toy = section_model_from_dict({"classes": ["sports", "business"], "weights": [[1, 0], [0, 1]],
    ...     "intercepts": [0, 0], "min_probability": 0.6, "embedding": {"model": "toy"}, "version": "t"})
    >>> learned = empty_learned(toy, "toy")
    >>> guess_and_learn([("en", None, (0.3, 0.7))], toy, learned)
    [None]
    >>> guesses = guess_and_learn([("en", "business", (0.3, 0.7))] * 5 + [("en", None, (0.3, 0.7)),
    ...                            ("ms", None, (0.3, 0.7))], toy, learned)
    >>> guesses[-2:], learned.languages["en"].examples, sorted(learned.languages)
    (['business', None], 5, ['en'])
    """
    out: list[str | None] = []
    for language, section, vector in items:
        usable = vector is not None and len(vector) == model.dim and bool(np.any(np.asarray(vector) != 0))
        taught = learned.languages.get(language)
        current = model if taught is None else _taught_model(model, taught)
        out.append(classify_embeddings([vector if usable else None], current)[0])
        if not usable or section not in model.classes:
            continue
        x = np.asarray(vector, dtype=np.float64)
        p = section_probabilities([x], current)[0]
        p[model.classes.index(str(section))] -= 1.0  # the gradient of the log loss: p - onehot
        if taught is None:
            taught = learned.languages[language] = LanguageSections(np.zeros_like(model.weights),
                                                                    np.zeros_like(model.intercepts))
        taught.weights -= rate * np.outer(p, x)
        taught.intercepts -= rate * p
        taught.examples += 1
    return out


class LanguageSectionsJson(TypedDict):
    """One language's taught changes in :func:`learned_to_dict`'s form."""

    weights: list[list[float]]
    intercepts: list[float]
    examples: int


class LearnedSectionsJson(TypedDict):
    """:class:`LearnedSections` as stored (``LEARNED_SECTIONS_KEY``)."""

    version: int
    model_version: str
    embedding_model: str
    folded_runs: list[str]
    languages: dict[str, LanguageSectionsJson]


def learned_to_dict(learned: LearnedSections) -> LearnedSectionsJson:
    """A JSON-serialisable form of ``learned`` (floats round-trip exactly)."""
    return {"version": LEARNED_SECTIONS_VERSION, "model_version": learned.model_version,
            "embedding_model": learned.embedding_model, "folded_runs": list(learned.folded_runs),
            "languages": {lang: {"weights": t.weights.tolist(), "intercepts": t.intercepts.tolist(),
                                 "examples": t.examples} for lang, t in sorted(learned.languages.items())}}


def learned_from_dict(data: Mapping[str, Any], model: SectionModel, embedding_model: str) -> LearnedSections:
    """Read :func:`learned_to_dict`'s form; the cold start when it was taught another shipped model
    or on another embedding model (its changes mean nothing to this one).

    Raises:
        ValueError: The data is malformed or its shapes are not the model's.
    """
    try:
        if (data["version"] != LEARNED_SECTIONS_VERSION or data["model_version"] != model.version
                or data["embedding_model"] != embedding_model):
            return empty_learned(model, embedding_model)
        languages = {}
        for language, raw in dict(data["languages"]).items():
            weights = np.asarray(raw["weights"], dtype=np.float64)
            intercepts = np.asarray(raw["intercepts"], dtype=np.float64)
            if weights.shape != model.weights.shape or intercepts.shape != model.intercepts.shape:
                raise ValueError(f"taught changes for {language!r} have shapes {weights.shape}, {intercepts.shape}")
            if not (np.isfinite(weights).all() and np.isfinite(intercepts).all()):
                raise ValueError(f"taught changes for {language!r} are not finite")
            languages[str(language)] = LanguageSections(weights, intercepts, int(raw["examples"]))
        return LearnedSections(model.version, embedding_model, languages, [str(r) for r in data.get("folded_runs", [])])
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"learned sections are missing a field: {e}") from e


def named_section(hint: str | None, categories: Sequence[str] | None) -> str | None:
    """The section an article's feed or page names (its hint, else its first usable category), if any.

    >>> named_section(None, ["Tech", "Apple"]), named_section("Opinion", None)
    ('technology', None)
    """
    return canonical_section(hint) or _first_category(categories)


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
