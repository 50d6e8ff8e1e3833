"""For you: re-rank an edition's candidate pool for one reader. Pure: no I/O, no clock.

score = importance × (1 + affinity), where importance is the story's published score and
affinity adds, each in [0, 1]: a followed topic (1), a followed keyword (1: the story matches a
query the reader follows, issue 30), a followed source (1), the reader's decayed topic weight and
source weight (relative to their strongest), and the overlap of the story's title terms with the
reader's interest vector (half weight). Hidden stories, stories whose every
source is hidden, and stories already read (unless updated since) are dropped. No topic appears
more than ``max_run`` times in a row. A section filter (``only``) ranks the stories of one section
as if the pool held only them. The order is made lazily (``Ranking.iter_order``): a page needs its
first stories, so only the best scores are sorted unless paging goes past them.

This lives in ``serving`` because it runs on every For-you request and ``serving`` must not
import ``transforms``. Story titles are split into terms by ``warehouse.profiles.title_terms``, the
one function the profiles flow keys the interest vector with.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from newsroom.times import parse_iso_datetime
from serving.profiles import Profile
from warehouse.profiles import title_terms
from warehouse.search_index import SearchQuery, SearchQueryError, parse_query, story_tokens

MAX_RUN = 2
TOP_STORIES_REASON = "Top story in your edition"
TERM_WEIGHT = 0.5
KEYWORD_WEIGHT = 1.0
"""A story matching a followed keyword counts as much as one in a followed topic."""
MAX_KEYWORD_MASKS = 4096
"""Keywords whose matches a pool remembers (shared by every reader following them)."""


def section_label(slug: str) -> str:
    """``"climate-tech"`` → ``"Climate tech"``."""
    text = re.sub(r"[-_]+", " ", slug).strip()
    return text[:1].upper() + text[1:]


def _epoch(iso: object) -> float:
    parsed = parse_iso_datetime(iso)
    return 0.0 if parsed is None else parsed.timestamp()


@dataclass(frozen=True, slots=True)
class Candidate:
    """One pool story with the features the re-rank needs, computed once per snapshot version."""

    story_id: str
    importance: float
    topic: str
    topics: tuple[str, ...]
    topic_labels: tuple[str, ...]
    publisher_ids: frozenset[str]
    publisher_names: Mapping[str, str]
    terms: frozenset[str]
    updated_at: float
    story: Mapping[str, Any]
    sorted_publishers: tuple[str, ...] = ()


class Pick(NamedTuple):
    """A ranked story and why it is there. (A NamedTuple: a thousand are made per request.)"""

    candidate: Candidate
    score: float
    reason: str


def candidate_of(story: Mapping[str, Any]) -> Candidate:
    sources = story.get("sources") or []
    topics = tuple(str(s) for s in (story.get("sections") or []))
    entities = story.get("entities") or []
    topics = topics + tuple(str(e).lower() for e in entities if isinstance(e, str))
    rank = story.get("rank")
    score = story.get("score")
    if isinstance(score, int | float):
        importance = float(score)
    elif isinstance(rank, int) and rank > 0:
        importance = 1.0 / rank
    else:
        importance = 0.0
    return Candidate(
        story_id=str(story["story_id"]),
        importance=max(importance, 0.0),
        topic=topics[0] if topics else f"story:{story['story_id']}",
        topics=topics,
        topic_labels=tuple(section_label(t) for t in topics),
        publisher_ids=frozenset(str(s["publisher_id"]) for s in sources),
        publisher_names={str(s["publisher_id"]): str(s.get("publisher") or s["publisher_id"]) for s in sources},
        terms=frozenset(title_terms(str(story.get("title") or ""))),
        updated_at=_epoch(story.get("updated_at")),
        story=story,
        sorted_publishers=tuple(sorted({str(s["publisher_id"]) for s in sources})),
    )


class _Incidence:
    """Which stories carry which keys (topics, publishers or terms), as COO arrays."""

    __slots__ = ("ids", "rows", "cols")

    def __init__(self, per_story: Sequence[Iterable[str]]) -> None:
        ids: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        for row, keys in enumerate(per_story):
            for key in keys:
                rows.append(row)
                cols.append(ids.setdefault(key, len(ids)))
        self.ids = ids
        self.rows = np.asarray(rows, dtype=np.int64)
        self.cols = np.asarray(cols, dtype=np.int64)

    def vector(self, weights: Mapping[str, float]) -> np.ndarray:
        """A per-key weight vector from ``{key: weight}``; unknown keys are ignored."""
        out = np.zeros(len(self.ids) + 1)
        for key, w in weights.items():
            i = self.ids.get(key)
            if i is not None:
                out[i] = w
        return out

    def per_story_sum(self, vector: np.ndarray, n: int) -> np.ndarray:
        return np.bincount(self.rows, weights=vector[self.cols], minlength=n)

    def per_story_max(self, vector: np.ndarray, n: int) -> np.ndarray:
        out = np.zeros(n)
        np.maximum.at(out, self.rows, vector[self.cols])
        return out


class CandidatePool:
    """An edition's candidates, with the arrays the re-rank needs built once per page version.

    Candidates are ordered by importance, then story id, which is also the no-profile order.
    """

    def __init__(self, candidates: Sequence[Candidate]) -> None:
        self.candidates = tuple(sorted(candidates, key=lambda c: (-c.importance, c.story_id)))
        n = len(self.candidates)
        self.n = n
        self.index = {c.story_id: i for i, c in enumerate(self.candidates)}
        self.importance = np.asarray([c.importance for c in self.candidates], dtype=np.float64)
        self.updated_at = np.asarray([c.updated_at for c in self.candidates], dtype=np.float64)
        # Tie-break equal scores by story id: candidates are sorted by id within equal importance
        # only, so rank the ids separately.
        order = sorted(range(n), key=lambda i: self.candidates[i].story_id)
        self.id_rank = np.empty(n, dtype=np.int64)
        self.id_rank[order] = np.arange(n)
        self.topics = _Incidence([c.topics for c in self.candidates])
        self.publishers = _Incidence([sorted(c.publisher_ids) for c in self.candidates])
        self.terms = _Incidence([sorted(c.terms) for c in self.candidates])
        topic_ids: dict[str, int] = {}
        self.run_topic = np.asarray([topic_ids.setdefault(c.topic, len(topic_ids)) for c in self.candidates],
                                    dtype=np.int64)
        self.run_topics = self.run_topic.tolist()
        self.source_count = np.bincount(self.publishers.rows, minlength=n)
        self._sections: dict[str, np.ndarray] = {}
        self._tokens: list[tuple[list[str], frozenset[str]]] | None = None
        self._keywords: dict[str, np.ndarray] = {}

    def keyword_mask(self, query: SearchQuery) -> np.ndarray:
        """Which candidates match ``query`` (headline, source headlines, snippet, publishers, sections,
        entities, cut by the search index's own analyzer); memoised per pool for every reader."""
        found = self._keywords.get(query.text)
        if found is None:
            if self._tokens is None:
                self._tokens = [(t, frozenset(t)) for t in (_candidate_tokens(c) for c in self.candidates)]
            found = np.fromiter((query.matches(t, present) for t, present in self._tokens), dtype=bool, count=self.n)
            if len(self._keywords) >= MAX_KEYWORD_MASKS:
                self._keywords.clear()
            self._keywords[query.text] = found  # a race computes it twice: harmless
        return found

    def in_section(self, section: str) -> np.ndarray:
        """Which candidates list ``section`` among their sections (a boolean mask, memoised per pool)."""
        found = self._sections.get(section)
        if found is None:
            found = np.asarray([section in (c.story.get("sections") or ()) for c in self.candidates], dtype=bool)
            self._sections[section] = found  # a race computes the same mask twice: harmless
        return found

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[Candidate]:
        return iter(self.candidates)


def _candidate_tokens(c: Candidate) -> list[str]:
    story = c.story
    sources = [s for s in story.get("sources") or [] if isinstance(s, Mapping)]
    return story_tokens(str(story.get("title") or ""), [str(s.get("title") or "") for s in sources],
                        str(story.get("snippet") or ""),
                        [*sorted(set(c.publisher_names.values())), *c.topics])


def _keyword_queries(profile: Profile) -> list[tuple[str, SearchQuery]]:
    """The reader's keywords, parsed (one stored by an older release and no longer valid is left out)."""
    out = []
    for text in sorted(profile.followed_keywords):
        try:
            out.append((text, parse_query(text)))
        except SearchQueryError:
            continue
    return out


def build_pool(pages: Iterable[Sequence[Mapping[str, Any]]]) -> CandidatePool:
    """One candidate per story over the given pages; a story on several pages keeps its best score."""
    best: dict[str, Candidate] = {}
    for stories in pages:
        for story in stories:
            c = candidate_of(story)
            old = best.get(c.story_id)
            if old is None or c.importance > old.importance:
                best[c.story_id] = c
    return CandidatePool(list(best.values()))


def _relative(weights: Mapping[str, float]) -> dict[str, float]:
    top = max(weights.values(), default=0.0)
    if top <= 0:
        return {}
    return {k: v / top for k, v in weights.items() if v > 0}


def _limit_runs(order: Iterable[int], topics: list[int], max_run: int) -> list[int]:
    """Reorder greedily so that no topic appears more than ``max_run`` times in a row."""
    return list(_runs_limited(order, topics, max_run))


def _runs_limited(order: Iterable[int], topics: list[int], max_run: int) -> Iterator[int]:
    """``_limit_runs`` as it goes: each pick is yielded as soon as it is placed.

    One pass: a pick that would extend a full run waits in ``deferred`` and goes in as soon as
    the run is broken, so the result stays as close to score order as the rule allows. What has
    been yielded never depends on the input not yet read, so a page can stop reading early.
    """
    deferred: deque[int] = deque()
    last, run = -1, 0
    for i in order:
        while deferred and not (run >= max_run and topics[deferred[0]] == last):
            j = deferred.popleft()
            run, last = (run + 1 if topics[j] == last else 1), topics[j]
            yield j
        if run >= max_run and topics[i] == last:
            deferred.append(i)
        else:
            run, last = (run + 1 if topics[i] == last else 1), topics[i]
            yield i
    while deferred:  # only one topic is left: nothing can break the run
        j = deferred.popleft()
        run, last = (run + 1 if topics[j] == last else 1), topics[j]
        yield j


SORTED_FIRST = 128
"""How many of the best scores are sorted first; the rest only when paging reads past them."""


def _by_score(kept: np.ndarray, scores: np.ndarray, id_rank: np.ndarray) -> Iterator[int]:
    """``kept`` by score, best first, ties by story id: the best ``SORTED_FIRST`` (and every tie with
    the last of them) sorted at once, the rest only if asked for."""
    def ordered(ix: np.ndarray) -> list[int]:
        return ix[np.lexsort((id_rank[ix], -scores[ix]))].tolist()  # type: ignore[no-any-return]

    if len(kept) <= 2 * SORTED_FIRST:
        yield from ordered(kept)
        return
    values = scores[kept]
    cut = np.partition(values, len(values) - SORTED_FIRST)[len(values) - SORTED_FIRST]
    best = values >= cut  # every score above the cut and every tie at it: nothing below can come first
    yield from ordered(kept[best])
    yield from ordered(kept[~best])


class Ranking:
    """A reader's order over a pool, made as it is read. Reasons are worded only for the picks a page shows."""

    __slots__ = ("pool", "profile", "scores", "topic_w", "source_w", "keywords", "_kept", "_max_run", "_order")

    def __init__(self, pool: CandidatePool, profile: Profile, scores: np.ndarray, kept: np.ndarray, max_run: int,
                 topic_w: Mapping[str, float], source_w: Mapping[str, float],
                 keywords: Sequence[tuple[str, np.ndarray]] = ()) -> None:
        self.pool = pool
        self.profile = profile
        self.scores = scores
        self.topic_w = topic_w
        """The reader's relative topic weights, worked out once for every reason (and ``source_w``)."""
        self.source_w = source_w
        self.keywords = keywords
        """The reader's keywords and which candidates match each, for the reasons."""
        self._kept = kept
        self._max_run = max_run
        self._order: tuple[int, ...] | None = None

    def iter_order(self) -> Iterator[int]:
        """Pool positions, best first: a page reads what it needs and stops."""
        if self._order is not None:
            return iter(self._order)
        return _runs_limited(_by_score(self._kept, self.scores, self.pool.id_rank), self.pool.run_topics,
                             self._max_run)

    @property
    def order(self) -> tuple[int, ...]:
        """The whole order."""
        if self._order is None:
            self._order = tuple(self.iter_order())
        return self._order

    def __len__(self) -> int:
        return len(self._kept)

    def pick(self, i: int) -> Pick:
        """Pool candidate ``i`` with this reader's score and reason."""
        c = self.pool.candidates[i]
        return Pick(c, float(self.scores[i]), self.reason(i))

    def reason(self, i: int) -> str:
        """Why pool candidate ``i`` is in this reader's For you."""
        matched = [text for text, mask in self.keywords if mask[i]]
        return _reason(self.pool.candidates[i], self.profile, self.topic_w, self.source_w, matched)

    def picks(self, start: int = 0, stop: int | None = None) -> list[Pick]:
        return [self.pick(i) for i in self.order[start:stop]]


def reason_for(c: Candidate, profile: Profile) -> str:
    """Why ``c`` is in this reader's For you, in the order the re-rank weighs things."""
    tokens = _candidate_tokens(c)
    present = frozenset(tokens)
    keywords = [text for text, q in _keyword_queries(profile) if q.matches(tokens, present)]
    return _reason(c, profile, _relative(profile.topic_weights), _relative(profile.source_weights), keywords)


def _reason(c: Candidate, profile: Profile, topic_w: Mapping[str, float], source_w: Mapping[str, float],
            keywords: Sequence[str] = ()) -> str:
    for t, label in zip(c.topics, c.topic_labels, strict=True):
        if t in profile.followed_topics:
            return f"Because you follow {label}"
    if keywords:
        return f"Because you follow \u201c{keywords[0]}\u201d"
    if profile.followed_sources:
        for p in c.sorted_publishers or sorted(c.publisher_ids):
            if p in profile.followed_sources:
                return f"Because you follow {c.publisher_names[p]}"
    for t, label in zip(c.topics, c.topic_labels, strict=True):
        if topic_w.get(t, 0.0) >= 0.5:
            return f"Because you read about {label}"
    if not source_w:
        return TOP_STORIES_REASON
    strong = [p for p in c.publisher_ids if source_w.get(p, 0.0) >= 0.5]
    if strong:
        best = max(strong, key=lambda p: (source_w[p], p))
        return f"Because you read {c.publisher_names[best]}"
    return TOP_STORIES_REASON


def rank_for_you(
    pool: CandidatePool, profile: Profile, *, max_run: int = MAX_RUN, only: np.ndarray | None = None
) -> Ranking:
    """The pool ordered for ``profile``. Deterministic for equal inputs; vectorised over the pool.

    Args:
        pool: The edition's candidates.
        profile: The reader's profile.
        max_run: Most stories of one topic in a row.
        only: A boolean mask over the pool (a section filter): the other candidates are left out
            before ranking, so the run limit applies among the ones shown.
    """
    n = pool.n
    topic_w = _relative(profile.topic_weights)
    source_w = _relative(profile.source_weights)
    if n == 0:
        return Ranking(pool, profile, np.zeros(0), np.zeros(0, dtype=np.int64), max_run, topic_w, source_w)
    topic_vec = pool.topics.vector(topic_w)
    topic_vec += pool.topics.vector(dict.fromkeys(profile.followed_topics, 1.0))
    affinity = pool.topics.per_story_sum(topic_vec, n)
    if profile.followed_sources:
        affinity += pool.publishers.per_story_sum(
            pool.publishers.vector(dict.fromkeys(profile.followed_sources, 1.0)), n
        )
    if profile.source_weights:
        affinity += pool.publishers.per_story_max(pool.publishers.vector(source_w), n)
    if profile.term_weights:
        overlap = pool.terms.per_story_sum(pool.terms.vector(_relative(profile.term_weights)), n)
        affinity += TERM_WEIGHT * np.minimum(overlap, 1.0)
    keywords = [(text, pool.keyword_mask(query)) for text, query in _keyword_queries(profile)]
    if keywords:
        affinity += KEYWORD_WEIGHT * np.logical_or.reduce([mask for _, mask in keywords])
    scores = pool.importance * (1.0 + affinity)

    keep = np.ones(n, dtype=bool) if only is None else only.copy()
    for sid in profile.hidden_stories:
        i = pool.index.get(sid)
        if i is not None:
            keep[i] = False
    if profile.hidden_sources:
        hidden = pool.publishers.vector(dict.fromkeys(profile.hidden_sources, 1.0))
        keep &= pool.publishers.per_story_sum(hidden, n) < pool.source_count
    for sid, read_at in profile.reads.items():
        i = pool.index.get(sid)
        if i is not None and pool.updated_at[i] <= read_at:
            keep[i] = False

    return Ranking(pool, profile, scores, np.flatnonzero(keep), max_run, topic_w, source_w, keywords)


def rerank_for_you(pool: CandidatePool, profile: Profile, *, max_run: int = MAX_RUN) -> list[Pick]:
    """Every pick of ``rank_for_you``, each with its reason."""
    return rank_for_you(pool, profile, max_run=max_run).picks()
