"""Sections of an article and of a story: feed hints, RSS categories, then a small text classifier.

The classifier is trained on a seed vocabulary shipped here (no downloads): one short document of
typical words per section. It only speaks when the hint and the categories say nothing usable, and
only when it is confident. A story takes the sections most of its articles agree on (issue 5).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

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

SEED_VOCABULARY = {
    "world": "war ceasefire border refugees united nations embassy foreign minister summit treaty sanctions "
             "earthquake troops invasion diplomat international crisis humanitarian aid ministry abroad",
    "politics": "election vote parliament senate congress president prime minister party campaign ballot "
                "lawmakers bill legislation opposition coalition governor policy referendum candidate",
    "business": "market shares stocks company profit revenue earnings bank economy inflation interest rates "
                "merger acquisition investors trade deal ceo billion quarterly sales oil prices",
    "technology": "software app smartphone apple google microsoft artificial intelligence chip internet "
                  "cyber hackers data startup computer online platform digital robot semiconductor",
    "science": "scientists research study space nasa planet climate species discovery researchers "
               "telescope physics experiment fossil satellite emissions ocean",
    "health": "hospital patients doctors disease virus vaccine outbreak cancer health medical drug "
              "treatment covid infection surgery clinic symptoms",
    "sports": "match game team league season coach player goal championship cup tournament win score "
              "football soccer tennis olympic injury final victory boxing boxer heavyweight belts title "
              "nfl nba basketball baseball quarterback striker",
    "entertainment": "film movie actor actress music album singer concert festival award oscar star "
                     "celebrity television series premiere band show hollywood rehab actor singer reality "
                     "box office",
}

MIN_CLASSIFIER_PROBABILITY = 0.35
"""Below this the classifier's guess is no section rather than a wrong one."""

_SLUG = re.compile(r"[^a-z0-9]+")
GENERIC_HINTS = frozenset({"top", "top-stories", "news", "home", "latest", "general", "headlines", "all",
                           "opinion", "local", "lifestyle"})
"""Hints that name no topic section (opinion is a label on the article, local a region)."""


def canonical_section(raw: str | None) -> str | None:
    """A hint or category mapped onto SECTIONS, or None.

    >>> canonical_section("Sport"), canonical_section("Science & Tech"), canonical_section("Opinion")
    ('sports', 'technology', None)
    """
    if not raw:
        return None
    slug = _SLUG.sub("-", raw.lower()).strip("-")
    slug = SECTION_ALIASES.get(slug, slug)
    return slug if slug in SECTIONS else None


@lru_cache(maxsize=1)
def _classifier() -> tuple[TfidfVectorizer, LogisticRegression]:
    # Each seed word is also its own one-word document, so single strong words still decide.
    docs: list[str] = []
    labels: list[str] = []
    for section, words in sorted(SEED_VOCABULARY.items()):
        docs.append(words)
        labels.append(section)
        for word in words.split():
            docs.append(word)
            labels.append(section)
    vectorizer = TfidfVectorizer(lowercase=True, token_pattern=r"[a-z][a-z]+")
    model = LogisticRegression(C=10.0, max_iter=1000, random_state=0)
    model.fit(vectorizer.fit_transform(docs), labels)
    return vectorizer, model


def classify_texts(texts: Sequence[str], min_probability: float = MIN_CLASSIFIER_PROBABILITY) -> list[str | None]:
    """The seed-vocabulary classifier's section per text, or None where it is not confident.

    Args:
        texts: Headlines, snippets or term lists joined by spaces.
        min_probability: The least class probability that counts as an answer.

    Returns:
        One section or None per text, in input order.
    """
    if not 0 <= min_probability <= 1:
        raise ValueError(f"min_probability must be in [0, 1], got {min_probability}")
    if not texts:
        return []
    vectorizer, model = _classifier()
    matrix = vectorizer.transform([t.lower() for t in texts])
    probabilities = model.predict_proba(matrix)
    best = probabilities.argmax(axis=1)
    has_words = np.asarray(matrix.sum(axis=1)).ravel() > 0
    return [str(model.classes_[b]) if ok and probabilities[i, b] >= min_probability else None
            for i, (b, ok) in enumerate(zip(best, has_words, strict=True))]


def article_sections(hints: Sequence[str | None], categories: Sequence[Sequence[str] | None],
                     texts: Sequence[str]) -> list[str | None]:
    """One section per article: the feed hint, else an RSS category, else the classifier.

    Args:
        hints: The feed's section hint per article (``articles.section``).
        categories: The item's RSS/Atom categories per article.
        texts: Headline and snippet per article, for the classifier.

    Returns:
        A section from SECTIONS or None, per article.
    """
    if not len(hints) == len(categories) == len(texts):
        raise ValueError("hints, categories and texts must have the same length")
    found: list[str | None] = []
    for hint, cats in zip(hints, categories, strict=True):
        section = canonical_section(hint)
        for cat in cats or ():
            section = section or canonical_section(cat)
        found.append(section)
    unknown = [i for i, s in enumerate(found) if s is None]
    for i, guess in zip(unknown, classify_texts([texts[i] for i in unknown]), strict=True):
        found[i] = guess
    return found


def article_section_votes(hints: Sequence[str | None], categories: Sequence[Sequence[str] | None],
                          texts: Sequence[str]) -> list[list[str]]:
    """Each article's votes: its feed hint, its first usable RSS category and the classifier's guess
    (when confident), each mapped onto SECTIONS. A feed's hint is the same for every item it
    carries, whatever the item is about; voting lets the text outvote a wrong hint across a story.

    >>> article_section_votes(["Sport"], [["Economy"]], ["Stocks fall as inflation fears hit markets"])
    [['sports', 'business', 'business']]
    """
    if not len(hints) == len(categories) == len(texts):
        raise ValueError("hints, categories and texts must have the same length")
    guesses = classify_texts(list(texts))
    votes = []
    for hint, cats, guess in zip(hints, categories, guesses, strict=True):
        mine = [s for s in (canonical_section(hint),) if s]
        mine += [s for s in (next((c for c in map(canonical_section, cats or ()) if c), None),) if s]
        mine += [guess] if guess else []
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
