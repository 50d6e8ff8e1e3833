"""Story repair: merge two stories about one event, split a story fed two events (issue 4).

The online pass decides each article once, from what it has seen so far; its errors come
from early mixing (the 2nd or 3rd article of a story comes from another event of the same
kind, and the mixed centroid then absorbs the rest). The repair pass looks again, over the
stories active in the last ``lookback_hours``, with every member at hand:

- **split**: the members with a body of their own are cut in two (a spectral cut of their
  IDF-weighted cosines, refined by average link; see :func:`split_members`); the cut is kept when
  the halves are well apart (mean within-half cosine minus mean across cosine at least
  ``split_margin``, by at least ``split_min_separation`` standard errors; across at most
  ``split_max_across``) and each half has at least ``split_min_sources`` sources. Headlines alone
  say too little to cut a story by their words: members known by their headline follow the half
  whose mean embedding theirs is closer to (issue 14). The half holding the representative (the
  headline the pages show; see :func:`story_representative`) keeps the story id; the other half
  gets a new id.
- **adoption**: a story of one article whose article would now join another, larger story by
  the online rule (the same score, the same ``join_threshold``; the story it missed may have
  grown, and the IDF settled, since it was placed) is merged into that story, which keeps its id.
- **merge**: stories whose members are close on average (mean cross cosine at least
  ``merge_threshold``, or at least ``merge_low_threshold`` when their summed sentence embeddings
  agree at ``merge_embedding_threshold``: two signals, issue 33), that share an entity word, whose dateline years do not conflict and
  whose times overlap within ``merge_gap_hours``, are agglomerated by average link (see
  :func:`plan_merges`): one pass can fold several fragments of one event into the oldest of
  them, which survives; the others become its aliases. Two stories the split rule would cut
  apart again are never merged, so a split story does not flap between one and two.

A story is repaired at most once per ``cooldown_minutes`` (a merge of several fragments in one
pass is one repair of each). Everything is pure: the clock is an
argument, candidates and ties are ordered by story id.

This module runs the pass; the split cut lives in ``transforms.clustering.splits``, the merge plan
in ``transforms.clustering.merges``, their bars (:class:`RepairParams`) in ``transforms.clustering.params``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from transforms.clustering.clusterer import LanguageClusterer
from transforms.clustering.idf import Idf
from transforms.clustering.merges import plan_merges
from transforms.clustering.params import ClusterParams, RepairParams
from transforms.clustering.splits import count_sources, passes_split, split_members
from transforms.clustering.story import Assignment, Member, code_vector
from transforms.features import ArticleFeatures
from transforms.pages import choose_representative

RepairKind = Literal["merge", "split"]


@dataclass(frozen=True, slots=True)
class StoryRepair:
    """One applied repair.

    ``story_id`` keeps its id (the survivor of a merge, the half holding the representative of
    a split); ``other_story_id`` is the merged-away story or the new half; ``moved`` are the
    articles that changed story, each with its ``copy_of``.
    """

    kind: RepairKind
    story_id: str
    other_story_id: str
    moved: tuple[tuple[str, str | None], ...]
    score: float


def _follow_embeddings(heads: Sequence[Member], body: Mapping[str, Member], half_a: list[str],
                       half_b: list[str]) -> tuple[list[str], list[str]]:
    """Members known by their headline alone, added to the half whose mean embedding theirs is
    closer to (one without an embedding, or with no half to compare with, stays in ``half_a``)."""

    def direction(half: Sequence[str]) -> npt.NDArray[np.float64] | None:
        codes = [code_vector(c) for c in (body[a].embedding for a in half) if c is not None]
        if not codes:
            return None
        total = np.sum(codes, axis=0).astype(np.float64)
        norm = float(np.linalg.norm(total))
        return total / norm if norm > 0 else None

    a_dir, b_dir = direction(half_a), direction(half_b)
    half_a, half_b = list(half_a), list(half_b)
    for member in heads:
        if member.embedding is not None and a_dir is not None and b_dir is not None:
            code = code_vector(member.embedding).astype(np.float64)
            if float(code @ b_dir) > float(code @ a_dir):
                half_b.append(member.article_id)
                continue
        half_a.append(member.article_id)
    return half_a, half_b


def story_representative(
    members: Sequence[Member],
    first_article_id: str,
    published: str | None = None,
    authority: Mapping[str, float] | None = None,
) -> str:
    """The article whose half keeps the story id when a story is split: its representative.

    In order: ``published``, the representative of the live story snapshot, when it is still a
    member (a copy stands for its original); else, when ``authority`` is given, the one the
    story snapshot would choose for these members (:func:`transforms.pages.choose_representative`:
    the original of the highest authority, then the first seen, then the id; only members whose
    publisher has an authority, as the pages list no others); else ``first_article_id``, the
    article that started the story (the rule before representatives were published).

    Args:
        members: The story's members, oldest first.
        first_article_id: The article that started the story.
        published: Representative article id of the published story, if any.
        authority: Publisher id → authority (the registry's), if known.

    Returns:
        An article id; the original's id when the representative is a copy.

    >>> m = [Member("a", 0, "p1", None, (), (), ()), Member("b", 1, "p2", None, (), (), ())]
    >>> story_representative(m, "a"), story_representative(m, "a", authority={"p1": 0.2, "p2": 0.9})
    ('a', 'b')
    >>> story_representative(m, "a", published="a", authority={"p2": 0.9})
    'a'
    """
    roots = {m.article_id: m.copy_of or m.article_id for m in members}
    if published is not None and published in roots:
        return roots[published]
    authority = authority or {}
    rows: list[Mapping[str, Any]] = [
        {"article_id": m.article_id, "is_copy": m.copy_of is not None, "authority": authority[m.publisher_id],
         "first_seen_at": m.seen_ms}
        for m in members if m.publisher_id is not None and m.publisher_id in authority
    ]
    return roots[str(choose_representative(rows)["article_id"])] if rows else first_article_id


def _cooling(repaired_ms: int | None, now_ms: int, params: RepairParams) -> bool:
    return repaired_ms is not None and now_ms - repaired_ms < params.cooldown_minutes * 60_000


def repair_stories(
    clusterer: LanguageClusterer,
    now: datetime,
    params: RepairParams | None = None,
    representatives: Mapping[str, str] | None = None,
    authority: Mapping[str, float] | None = None,
) -> list[StoryRepair]:
    """Plan and apply splits, then merges, over the clusterer's recently active stories.

    Args:
        clusterer: The language writer's clusterer; changed in place.
        now: Stream time of the repair (timezone-aware).
        params: Repair bars; the defaults if omitted.
        representatives: Story id → representative article id of the published story (the
            headline the pages show). A split keeps the id with the half holding it.
        authority: Publisher id → authority. For a story with no published representative
            (or one that left it), the representative the story snapshot would choose from
            these; without it, the story's first article. See :func:`story_representative`.

    Returns:
        The repairs applied, in order.
    """
    params = params or RepairParams()
    representatives = representatives or {}
    now_ms = int(now.timestamp() * 1000)
    since_ms = now_ms - int(params.lookback_hours * 3_600_000)
    idf = clusterer.idf()
    out: list[StoryRepair] = []
    touched: set[str] = set()

    def eligible(sid: str) -> bool:
        _, last_ms, repaired_ms = clusterer.story_times(sid)
        return sid not in touched and last_ms >= since_ms and not _cooling(repaired_ms, now_ms, params)

    for sid in clusterer.story_ids():
        if not eligible(sid):
            continue
        members = clusterer.story_members(sid)
        originals = [m for m in members if m.copy_of is None][-params.max_split_members :]
        bodies = [m for m in originals if m.has_body]
        if count_sources(bodies) < 2 * params.split_min_sources:
            continue
        cut = split_members(bodies, idf)
        by_id = {m.article_id: m for m in bodies}
        if cut is None or not passes_split(cut, by_id, params):
            continue
        heads = [m for m in originals if not m.has_body]
        half_a, half_b = _follow_embeddings(heads, by_id, cut.half_a, cut.half_b)
        rep = story_representative(members, clusterer.story_first_article(sid), representatives.get(sid), authority)
        moving = half_b if rep in half_a or rep not in half_b else half_a
        new_id, moved = clusterer.apply_split(sid, moving, now)
        touched.update((sid, new_id))
        out.append(StoryRepair("split", sid, new_id, tuple((m.article_id, m.copy_of) for m in moved),
                               round(cut.margin, 6)))

    if params.adopt:
        for sid in clusterer.story_ids():
            adoption = _adoption(clusterer, sid, now, eligible, idf)
            if adoption is not None:
                target, score = adoption
                moved = clusterer.apply_merge(target, sid, now)
                touched.add(target)
                out.append(StoryRepair("merge", target, sid, tuple((m.article_id, m.copy_of) for m in moved),
                                       round(score, 6)))

    for survivor, merged, mean in plan_merges(clusterer, [sid for sid in clusterer.story_ids() if eligible(sid)], idf, params):
        moved = clusterer.apply_merge(survivor, merged, now)
        out.append(StoryRepair("merge", survivor, merged, tuple((m.article_id, m.copy_of) for m in moved), round(mean, 6)))
    return out


def _adoption(clusterer: LanguageClusterer, sid: str, now: datetime, eligible: Callable[[str], bool],
              idf: Idf) -> tuple[str, float] | None:
    """The larger story a one-article story's article would now join by the online rule, with its
    score; None when it would join none (or its story is not up for repair)."""
    if sid not in clusterer.stories or not eligible(sid):
        return None
    originals = [m for m in clusterer.story_members(sid) if m.copy_of is None]
    if len(originals) != 1:
        return None
    best = clusterer.best_story_for_member(originals[0], sid, now, idf)
    if best is None or best[1] < clusterer.params.join_threshold or not eligible(best[0]):
        return None
    if sum(1 for m in clusterer.story_members(best[0]) if m.copy_of is None) < 2:
        return None  # two fragments of one article each: the merge pass's to judge
    return best


def repair_due(last_repair_at: datetime | None, now: datetime, interval: timedelta = timedelta(minutes=10)) -> bool:
    """Whether a periodic repair is due at stream time ``now``.

    >>> from datetime import UTC
    >>> repair_due(None, datetime(2024, 1, 1, tzinfo=UTC))
    True
    """
    return last_repair_at is None or now - last_repair_at >= interval


REPAIR_INTERVAL = timedelta(minutes=10)


def cluster_and_repair(
    articles: Iterable[ArticleFeatures],
    params: ClusterParams | None = None,
    repair_params: RepairParams | None = None,
    interval: timedelta = REPAIR_INTERVAL,
) -> list[Assignment]:
    """The pipeline in one pass: online clustering per language, with the repair pass run every
    ``interval`` of stream time (as the repair flow runs every 10 minutes) and once more
    ``interval`` after the last article.

    Returns:
        One assignment per article, in input order, with the story each article is in after
        every repair (``is_new_story``/``score`` are the online decision's).
    """
    params = params or ClusterParams()
    clusterers: dict[str, LanguageClusterer] = {}
    decided: dict[str, Assignment] = {}
    story_of: dict[str, str] = {}
    order: list[str] = []
    started: datetime | None = None
    last_repair: datetime | None = None

    def repair_all(at: datetime) -> None:
        for language in sorted(clusterers):
            for r in repair_stories(clusterers[language], at, repair_params):
                target = r.story_id if r.kind == "merge" else r.other_story_id
                for article_id, _ in r.moved:
                    story_of[article_id] = target

    for features in articles:
        at = features.first_seen_at
        started = started or at
        if last_repair is None and at - started >= interval or last_repair is not None and repair_due(last_repair, at, interval):
            repair_all(at)
            last_repair = at
        clusterer = clusterers.get(features.language)
        if clusterer is None:
            clusterer = clusterers[features.language] = LanguageClusterer(features.language, params)
        a = clusterer.assign(features)
        decided[a.article_id] = a
        story_of[a.article_id] = a.story_id
        order.append(a.article_id)
    if order:
        end = max(d for d in (last_repair, *(c.clock for c in clusterers.values())) if d is not None)
        repair_all(end + interval)
    return [Assignment(aid, story_of[aid], decided[aid].copy_of, decided[aid].is_new_story, decided[aid].score)
            for aid in order]
