"""The story and member records, and how a story's centroid follows its members.

A story's centroid is the mean of its original members' term weights (a copy counts for
coverage only). Three paths change it and must agree: the running mean as articles join
(:func:`add_original`), a new version of a member swapping its share (:func:`replace_version`),
and the plain mean recomputed from the member rows by a merge or split (:func:`rebuild_story`).
They live here together; the indexes that point at a story are the clusterer's business.

A story also keeps the sum of its original members' sentence embeddings (issue 14), each member's
held as int8 codes (:func:`embedding_code`): the sum is exact integer arithmetic, so the running
sum, a version's swap and a merge's or split's recount always agree, and a checkpoint need not
store it (it is recounted from the members on load).

Members are trimmed (:func:`trim_members`) so a story that stays active for weeks does not carry
every article it ever had: a member seen before the active window leaves the story once the story
holds at least ``KEPT_ORIGINALS`` newer original members (issue 15). The rule keeps every
decision that reads members as it was: the running mean's weight of a new article is
``max(1 / originals, centroid_min_weight)``, the same for any count of 10 or more; a split looks
at the newest ``RepairParams.max_split_members`` (200) originals only; a new version of a
trimmed article is placed as a new article, as one of an expired story is. What changes is a
merge's or split's centroid, recomputed from the kept members only, and a merge's average link,
judged on them. ``Story.trimmed`` counts what left, so the story's size still counts it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np
import numpy.typing as npt

from transforms.features import DATE_TERM_PREFIX, ArticleFeatures
from transforms.signatures import is_empty_signature

ENTITY_LIMIT = 20
EMBEDDING_CODE_SCALE = 508.0
"""int8 code = round(component × 508), clipped to ±127: a unit 512-d embedding's components stay
within ±0.14 on the dev corpora, and cosines through the codes differ from the float ones by at
most 0.004 (docs/measurements.md)."""
KEPT_ORIGINALS = 200
"""Original members a story keeps however old they are (the repair's ``max_split_members``)."""
_YEAR_RE = re.compile(r"^(1[89]\d\d|20\d\d)$")


@dataclass(frozen=True, slots=True)
class Assignment:
    """The clusterer's decision for one article.

    ``is_new_version`` marks a new version of an article the clusterer already holds: it stays
    the same member of the same story (``story_id``, ``copy_of`` as before) with its features
    replaced, and ``score`` is the estimated Jaccard of the new text with the previous one (0.0
    when the previous signature has left the copy window).
    """

    article_id: str
    story_id: str
    copy_of: str | None
    is_new_story: bool
    score: float
    is_new_version: bool = False


@dataclass(frozen=True, slots=True)
class Member:
    """What a story keeps of each of its articles: enough to re-score, split and merge it.

    ``has_body`` is False for an article known by its headline alone (no body of its own: a
    title-only feed item, a paywalled or unfetchable page); ``embedding`` is its sentence
    embedding as int8 codes (:func:`embedding_code`), or None.
    """

    article_id: str
    seen_ms: int
    publisher_id: str | None
    copy_of: str | None
    terms: tuple[str, ...]
    weights: Sequence[float]  # a tuple, or an array of doubles for a member loaded from a state
    entities: tuple[str, ...]
    has_body: bool = True
    embedding: bytes | None = None


@dataclass(slots=True)
class Story:
    """An active story: its centroid, entity counts and years, and its members.

    ``norms`` caches the IDF-weighted norms of the centroid and of the entity counts, and the
    IDF's document count they were computed at (see :func:`transforms.clustering.scoring.story_norms`);
    None until the story is next scored (computed then, lazily, so a resumed writer computes them
    at the same point). ``trimmed`` counts the members :func:`trim_members` took out (``size``
    still counts them).

    ``embedding_sum`` is the sum of the embedding codes of the ``embedded`` original members that
    have one (None when none has); derived from the members, never stored. ``embedding_direction``
    caches its unit vector (None until the story is next scored after a change; see
    :func:`embedding_direction`).
    """

    story_id: str
    first_article_id: str
    first_seen_ms: int
    last_seen_ms: int
    size: int
    centroid: dict[str, float]
    entities: dict[str, float]
    years: list[str]
    members: list[Member] = field(default_factory=list)
    repaired_ms: int | None = None
    norms: tuple[float, float, float] | None = None
    embedding_sum: npt.NDArray[np.int32] | None = field(default=None, compare=False, repr=False)
    embedded: int = field(default=0, compare=False)
    embedding_direction: npt.NDArray[np.float64] | None = field(default=None, compare=False, repr=False)
    trimmed: int = 0


def story_years(terms: Iterable[str]) -> list[str]:
    """Years named in the text, and dateline years as ``date:<year>``.

    >>> story_years(["2024", "bridge", "date:2023", "1066"])
    ['2024', 'date:2023']
    """
    # A term is one word (no whitespace): only one of four characters can be a year.
    return sorted({t for t in terms if (len(t) == 4 and _YEAR_RE.match(t)) or t.startswith(DATE_TERM_PREFIX)})


def entity_words(entities: Sequence[str], limit: int = ENTITY_LIMIT) -> list[str]:
    """Distinct words of the article's leading entities: "tara reid" and "reid" meet on "reid".

    >>> entity_words(["tara reid", "reid", "a b"])
    ['tara', 'reid']
    """
    out: dict[str, None] = {}
    for name in entities[:limit]:
        for word in name.split():
            if len(word) > 1:
                out[word] = None
    return list(out)


def has_body(features: ArticleFeatures) -> bool:
    """Whether an article has a body of its own: one long enough to sign (a copy signature);
    else it is known by its headline alone (see :func:`transforms.features.features_from_text`)."""
    return not is_empty_signature(features.minhash)


def embedding_code(embedding: Sequence[float] | None) -> bytes | None:
    """A unit embedding as int8 codes (``EMBEDDING_CODE_SCALE``), or None for none or an empty one.

    >>> list(embedding_code([0.6, -0.8, 0.0]))
    [127, 129, 0]
    """
    if not embedding:
        return None
    codes = np.clip(np.rint(np.asarray(embedding, dtype=np.float64) * EMBEDDING_CODE_SCALE), -127, 127)
    return codes.astype(np.int8).tobytes()


def code_vector(code: bytes) -> npt.NDArray[np.int32]:
    """int8 codes as an int32 vector (to be summed exactly)."""
    return np.frombuffer(code, dtype=np.int8).astype(np.int32)


def make_member(features: ArticleFeatures, now_ms: int, copy_of: str | None, member_terms: int) -> Member:
    """The member row a story keeps of an article (its leading ``member_terms`` terms)."""
    return Member(
        article_id=features.article_id,
        seen_ms=now_ms,
        publisher_id=features.publisher_id,
        copy_of=copy_of,
        terms=features.terms[:member_terms],
        weights=features.term_weights[:member_terms],
        entities=tuple(entity_words(features.entities)),
        has_body=has_body(features),
        embedding=embedding_code(features.embedding),
    )


def count_embeddings(story: Story) -> None:
    """Recount a story's embedding sum from its original members."""
    codes = [code_vector(m.embedding) for m in story.members if m.copy_of is None and m.embedding is not None]
    story.embedding_sum = np.sum(codes, axis=0, dtype=np.int32) if codes else None
    story.embedded = len(codes)
    story.embedding_direction = None


def _add_embedding(story: Story, code: bytes | None, sign: int) -> None:
    if code is None:
        return
    vector = code_vector(code) * sign
    story.embedding_sum = vector if story.embedding_sum is None else story.embedding_sum + vector
    story.embedded += sign
    story.embedding_direction = None
    if story.embedded == 0:
        story.embedding_sum = None


def embedding_direction(story: Story) -> npt.NDArray[np.float64] | None:
    """The unit vector of a story's embedding sum (None without one), cached on the story until
    the sum changes: the mean's direction, as the codes' scale cancels out."""
    if story.embedding_direction is None and story.embedding_sum is not None:
        norm = float(np.linalg.norm(story.embedding_sum))
        if norm > 0:
            story.embedding_direction = story.embedding_sum / norm
    return story.embedding_direction


def _top(weights: Iterable[tuple[str, float]], limit: int) -> dict[str, float]:
    """The ``limit`` heaviest terms, ties by term.

    >>> _top([("b", 1.0), ("c", 2.0), ("a", 1.0)], 2)
    {'c': 2.0, 'a': 1.0}
    """
    # Two sorts at C speed instead of one with a Python key: by term, then (stably, which
    # ``reverse`` keeps) by weight.
    ranked = sorted(weights, key=itemgetter(0))
    ranked.sort(key=itemgetter(1), reverse=True)
    return dict(ranked[:limit])


def start_story(story_id: str, features: ArticleFeatures, member: Member, now_ms: int) -> Story:
    """A story of one article."""
    story = Story(
        story_id=story_id,
        first_article_id=features.article_id,
        first_seen_ms=now_ms,
        last_seen_ms=now_ms,
        size=1,
        centroid=dict(zip(features.terms, features.term_weights, strict=True)),
        entities={e: 1.0 for e in entity_words(features.entities)},
        years=story_years(features.terms),
        members=[member],
    )
    _add_embedding(story, member.embedding, 1)
    return story


def add_copy(story: Story, member: Member, now_ms: int) -> None:
    """A copy joins: it counts for coverage and leaves the centroid as it is."""
    story.last_seen_ms = max(story.last_seen_ms, now_ms)
    story.size += 1
    story.members.append(member)


def add_original(story: Story, features: ArticleFeatures, member: Member, now_ms: int,
                 centroid_min_weight: float, centroid_terms: int) -> None:
    """An original article joins: the running mean over the original members (copies count for
    coverage only), as :func:`rebuild_story` recomputes it from them, with the newest article
    weighing at least ``centroid_min_weight``."""
    story.size += 1
    originals = 1 + sum(1 for m in story.members if m.copy_of is None)
    alpha = max(1.0 / originals, centroid_min_weight)
    merged = {t: (1.0 - alpha) * w for t, w in story.centroid.items()}
    for term, weight in zip(features.terms, features.term_weights, strict=True):
        merged[term] = merged.get(term, 0.0) + alpha * weight
    story.centroid = _top(merged.items(), centroid_terms)
    story.norms = None
    for word in entity_words(features.entities):
        story.entities[word] = story.entities.get(word, 0.0) + 1.0
    story.years = sorted(set(story.years) | set(story_years(features.terms)))
    story.last_seen_ms = max(story.last_seen_ms, now_ms)
    story.members.append(member)
    _add_embedding(story, member.embedding, 1)


def replace_version(story: Story, index: int, new: Member, features: ArticleFeatures, centroid_terms: int) -> Member:
    """Put ``new`` (a member's next version, with ``features``) in place of member ``index``.

    An original member's share of the centroid (``1 / originals``, its weight in the plain mean
    :func:`rebuild_story` recomputes) moves from its old terms to its new ones, and its entities
    and years are swapped; a copy never weighed in the centroid.

    Returns:
        The replaced member.
    """
    old = story.members[index]
    story.members[index] = new
    if old.copy_of is not None:
        return old
    _add_embedding(story, old.embedding, -1)
    _add_embedding(story, new.embedding, 1)
    originals = [m for m in story.members if m.copy_of is None]
    if len(originals) == 1:
        centroid = dict(zip(features.terms, features.term_weights, strict=True))
    else:
        share = 1.0 / len(originals)
        centroid = dict(story.centroid)
        for term, weight in zip(old.terms, old.weights, strict=True):
            centroid[term] = centroid.get(term, 0.0) - share * weight
        for term, weight in zip(features.terms, features.term_weights, strict=True):
            centroid[term] = centroid.get(term, 0.0) + share * weight
    story.centroid = _top(((t, w) for t, w in centroid.items() if w > 1e-12), centroid_terms)
    story.norms = None
    for word in old.entities:
        count = story.entities.get(word, 0.0) - 1.0
        if count > 0:
            story.entities[word] = count
        else:
            story.entities.pop(word, None)
    for word in new.entities:
        story.entities[word] = story.entities.get(word, 0.0) + 1.0
    others = set(story_years(t for m in originals if m is not new for t in m.terms))
    gone = set(story_years(old.terms)) - others
    story.years = sorted((set(story.years) - gone) | set(story_years(features.terms)))
    return old


def rebuild_story(story: Story, members: Sequence[Member], now_ms: int, centroid_terms: int) -> None:
    """Recompute a story from its member rows (a merge or split): centroid (the plain mean of the
    originals), entities, years, counters; marks it repaired at ``now_ms``."""
    members = sorted(members, key=lambda m: (m.seen_ms, m.article_id))
    originals = [m for m in members if m.copy_of is None] or members
    summed: dict[str, float] = defaultdict(float)
    for member in originals:
        for term, weight in zip(member.terms, member.weights, strict=True):
            summed[term] += weight / len(originals)
    story.centroid = _top(summed.items(), centroid_terms)
    story.norms = None
    entities: dict[str, float] = defaultdict(float)
    for member in originals:
        for word in member.entities:
            entities[word] += 1.0
    story.entities = dict(entities)
    story.years = story_years(t for m in originals for t in m.terms)
    story.members = members
    count_embeddings(story)
    story.size = len(members) + story.trimmed
    if not story.trimmed:  # else its first members were trimmed: it keeps their time and article
        story.first_seen_ms = members[0].seen_ms
        story.first_article_id = members[0].article_id
    story.last_seen_ms = max(m.seen_ms for m in members)
    story.repaired_ms = now_ms


def trim_members(story: Story, cutoff_ms: int, kept_originals: int = KEPT_ORIGINALS) -> list[Member]:
    """Take out of ``story`` the members seen before ``cutoff_ms``, keeping its newest
    ``kept_originals`` original members and the copies of those (see the module doc).

    Returns:
        The members taken out (counted in ``story.trimmed``), oldest first.

    >>> m = [Member(f"a{i}", i, None, None, (), (), ()) for i in range(4)]
    >>> s = Story("s", "a0", 0, 3, 4, {}, {}, [], list(m))
    >>> [x.article_id for x in trim_members(s, 3, kept_originals=2)], s.size, s.trimmed
    (['a0', 'a1'], 4, 2)
    """
    if not story.members or story.members[0].seen_ms >= cutoff_ms:
        return []  # members are appended as they arrive: the first is the oldest (a merge sorts them)
    originals = [m.article_id for m in story.members if m.copy_of is None]
    kept = set(originals[-kept_originals:]) if kept_originals > 0 else set()
    keep: list[Member] = []
    dropped: list[Member] = []
    for member in story.members:
        if member.seen_ms >= cutoff_ms or member.article_id in kept or member.copy_of in kept:
            keep.append(member)
        else:
            dropped.append(member)
    if dropped:
        story.members = keep
        story.trimmed += len(dropped)
        # The embedding sum is derived from the kept members (a loaded state recounts it from them).
        for member in dropped:
            if member.copy_of is None:
                _add_embedding(story, member.embedding, -1)
    return dropped


@dataclass(slots=True)
class Journal:
    """What a writer's last commit stored of each story: its fingerprint and its cached norms
    (``transforms.clustering.columns`` makes and reads it; here so the clusterer that holds one
    needs no import of the columns)."""

    stories: dict[str, tuple[tuple[object, ...], tuple[float, float, float] | None]] = field(default_factory=dict)
