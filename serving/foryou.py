"""For you: re-rank an edition's candidate pool for one reader. Pure: no I/O, no clock.

score = importance × (1 + affinity), where importance is the story's published score and
affinity adds, each in [0, 1]: a followed topic (1), a followed source (1), the reader's decayed
topic weight and source weight (relative to their strongest), and the overlap of the story's
title terms with the reader's interest vector (half weight). Hidden stories, stories whose every
source is hidden, and stories already read (unless updated since) are dropped. No topic appears
more than ``max_run`` times in a row.

This lives in ``serving`` because it runs on every For-you request and ``serving`` must not
import ``transforms``; ``title_terms`` must stay equal to ``transforms.affinity.title_terms``
(a test checks), since the profiles flow builds the interest vector with that one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from serving.profiles import Profile

MAX_RUN = 2
TERM_WEIGHT = 0.5
_WORD = re.compile(r"[^\W\d_]{4,}")
_STOPWORDS = frozenset(
    "about after again against also amid among before being below between could during each from "
    "have into more most other over says said some such than that their them then there these they "
    "this those through under until very were what when where which while will with would your".split()
)


def title_terms(title: str) -> tuple[str, ...]:
    """Distinct lower-cased words of four or more letters, minus stopwords, in first-seen order.

    >>> title_terms("Rail operator orders 40 battery trains for the rail network")
    ('rail', 'operator', 'orders', 'battery', 'trains', 'network')
    """
    seen: dict[str, None] = {}
    for word in _WORD.findall(title.lower()):
        if word not in _STOPWORDS:
            seen.setdefault(word, None)
    return tuple(seen)


def section_label(slug: str) -> str:
    """``"climate-tech"`` → ``"Climate tech"``."""
    text = re.sub(r"[-_]+", " ", slug).strip()
    return text[:1].upper() + text[1:]


def _epoch(iso: object) -> float:
    if not isinstance(iso, str):
        return 0.0
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


@dataclass(frozen=True, slots=True)
class Candidate:
    """One pool story with the features the re-rank needs, computed once per snapshot version."""

    story_id: str
    importance: float
    topic: str
    topics: tuple[str, ...]
    publisher_ids: frozenset[str]
    publisher_names: Mapping[str, str]
    terms: tuple[str, ...]
    updated_at: float
    story: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Pick:
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
        publisher_ids=frozenset(str(s["publisher_id"]) for s in sources),
        publisher_names={str(s["publisher_id"]): str(s.get("publisher") or s["publisher_id"]) for s in sources},
        terms=title_terms(str(story.get("title") or "")),
        updated_at=_epoch(story.get("updated_at")),
        story=story,
    )


def build_pool(pages: Iterable[Sequence[Mapping[str, Any]]]) -> tuple[Candidate, ...]:
    """One candidate per story over the given pages; a story on several pages keeps its best score.

    The order is by importance, then story id, so the pool (and the no-profile answer) is stable.
    """
    best: dict[str, Candidate] = {}
    for stories in pages:
        for story in stories:
            c = candidate_of(story)
            old = best.get(c.story_id)
            if old is None or c.importance > old.importance:
                best[c.story_id] = c
    return tuple(sorted(best.values(), key=lambda c: (-c.importance, c.story_id)))


def _relative(weights: Mapping[str, float]) -> dict[str, float]:
    top = max(weights.values(), default=0.0)
    if top <= 0:
        return {}
    return {k: v / top for k, v in weights.items() if v > 0}


def _limit_runs(ranked: list[Pick], max_run: int) -> list[Pick]:
    """Reorder greedily so that no topic appears more than ``max_run`` times in a row."""
    out: list[Pick] = []
    queue = ranked
    while queue:
        banned = None
        if len(out) >= max_run:
            last = out[-1].candidate.topic
            if all(p.candidate.topic == last for p in out[-max_run:]):
                banned = last
        index = 0
        if banned is not None:
            index = next((i for i, p in enumerate(queue) if p.candidate.topic != banned), 0)
        out.append(queue.pop(index))
    return out


def rerank_for_you(
    pool: Sequence[Candidate], profile: Profile, *, max_run: int = MAX_RUN
) -> list[Pick]:
    """The pool ordered for ``profile``, with a reason per pick. Deterministic for equal inputs."""
    topic_w = _relative(profile.topic_weights)
    source_w = _relative(profile.source_weights)
    term_w = _relative(profile.term_weights)
    f_topics = profile.followed_topics
    f_sources = profile.followed_sources
    hidden_sources = profile.hidden_sources
    hidden_stories = profile.hidden_stories
    reads = profile.reads
    picks: list[Pick] = []
    for c in pool:
        sid = c.story_id
        if sid in hidden_stories:
            continue
        if hidden_sources and c.publisher_ids <= hidden_sources:
            continue
        read_at = reads.get(sid)
        if read_at is not None and c.updated_at <= read_at:
            continue
        affinity = 0.0
        reason = ""
        for t in c.topics:
            if t in f_topics:
                affinity += 1.0
                if not reason:
                    reason = f"Because you follow {section_label(t)}"
            w = topic_w.get(t)
            if w:
                affinity += w
                if not reason and w >= 0.5:
                    reason = f"Because you read about {section_label(t)}"
        if f_sources or source_w:
            best_source, best_publisher = 0.0, ""
            for p in sorted(c.publisher_ids) if source_w else c.publisher_ids:
                if p in f_sources:
                    affinity += 1.0
                    if not reason:
                        reason = f"Because you follow {c.publisher_names[p]}"
                w = source_w.get(p, 0.0)
                if w > best_source:
                    best_source, best_publisher = w, p
            affinity += best_source
            if not reason and best_source >= 0.5:
                reason = f"Because you read {c.publisher_names[best_publisher]}"
        if term_w:
            overlap = 0.0
            for term in c.terms:
                overlap += term_w.get(term, 0.0)
            if overlap:
                affinity += TERM_WEIGHT * min(overlap, 1.0)
        picks.append(Pick(c, c.importance * (1.0 + affinity), reason or "Top story in your edition"))
    picks.sort(key=lambda p: (-p.score, p.candidate.story_id))
    return _limit_runs(picks, max_run)
