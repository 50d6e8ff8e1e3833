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
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from transforms.clustering.clusterer import LanguageClusterer
from transforms.clustering.idf import Idf
from transforms.clustering.params import ClusterParams
from transforms.clustering.scoring import weighted_vector
from transforms.clustering.story import Assignment, Member, code_vector, story_years
from transforms.features import DATE_TERM_PREFIX, ArticleFeatures
from transforms.pages import choose_representative

RepairKind = Literal["merge", "split"]
MERGE_NEIGHBOURS = 10


@dataclass(frozen=True, slots=True)
class RepairParams:
    """Bars of the repair pass.

    Attributes:
        lookback_hours: Only stories with an article in this window are looked at.
        cooldown_minutes: A story repaired less than this long ago is left alone.
        merge_threshold: Least mean cross-story member cosine for a merge.
        merge_low_threshold: A pair below ``merge_threshold`` but at or above this is merged
            when a second signal agrees: the cosine of the two groups' summed member embeddings is
            at least ``merge_embedding_threshold`` (issue 33: fragments of one event told in other
            words; None: words alone decide).
        merge_embedding_threshold: See ``merge_low_threshold``.
        merge_min_shared_entities: Least entity words the two stories share.
        merge_gap_hours: Most hours between the two stories' spans.
        split_margin: Least (within-half mean cosine − across mean cosine) for a split.
        split_min_separation: Least such difference in standard errors (Welch's t over the
            within-half and across pair cosines) for a split: a few pairs apart by chance are no
            two events; many pairs apart by a little are (issue 14).
        split_max_across: Most mean across cosine for a split.
        split_min_sources: Least sources (publishers; articles when unknown) per half.
        max_split_members: Stories larger than this are split on their latest members only.
        adopt: Whether a story of one article is merged into the larger story its article would
            now join by the online rule.
    """

    lookback_hours: float = 6.0
    cooldown_minutes: float = 30.0
    merge_threshold: float = 0.30
    merge_min_shared_entities: int = 1
    merge_gap_hours: float = 6.0
    split_margin: float = 0.05
    split_min_separation: float = 6.0
    split_max_across: float = 0.40
    split_min_sources: int = 4
    max_split_members: int = 200
    adopt: bool = True
    merge_low_threshold: float | None = 0.15
    merge_embedding_threshold: float = 0.75

    def __post_init__(self) -> None:
        if self.merge_low_threshold is not None and not 0.0 <= self.merge_low_threshold <= 1.0:
            raise ValueError(f"merge_low_threshold must be in [0, 1], got {self.merge_low_threshold}")
        for name in ("merge_threshold", "split_margin", "split_max_across", "merge_embedding_threshold"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if self.lookback_hours <= 0 or self.cooldown_minutes < 0 or self.merge_gap_hours < 0 or self.split_min_separation < 0:
            raise ValueError("lookback_hours must be > 0, cooldown_minutes, merge_gap_hours and split_min_separation >= 0")
        if self.split_min_sources < 1 or self.merge_min_shared_entities < 0 or self.max_split_members < 4:
            raise ValueError("split_min_sources >= 1, merge_min_shared_entities >= 0, max_split_members >= 4")


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


def member_vector(member: Member, idf: Idf) -> dict[str, float]:
    """A member's terms weighted by ``idf``, L2-normalised (empty if it has no terms).

    >>> member_vector(Member("a", 0, None, None, ("x", "y"), (3.0, 4.0), ()), Idf({}, 0.0, math.e - 1.0))
    {'x': 0.6, 'y': 0.8}
    """
    return weighted_vector(member.terms, member.weights, idf)


def _dot(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """``a · b`` summed in ``a``'s term order, starting from 0.0 (the order merge neighbours are ranked by)."""
    total = 0.0
    for term, weight in a.items():
        other = b.get(term)
        if other is not None:
            total = total + weight * other
    return total


def _cosine(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """The dot product of two unit vectors, summed over the shorter one's terms."""
    return _dot(a, b) if len(a) <= len(b) else _dot(b, a)


def _sources(members: Sequence[Member]) -> int:
    return len({m.publisher_id or f"article:{m.article_id}" for m in members})


@dataclass(frozen=True, slots=True)
class SplitCut:
    """A story's members cut in two (see :func:`split_members`).

    ``half_a`` holds the oldest member; ``within`` and ``across`` are the mean cosines of the
    pairs inside a half and across the halves; ``separation`` is their difference in standard
    errors (Welch's t).
    """

    half_a: list[str]
    half_b: list[str]
    within: float
    across: float
    separation: float

    @property
    def margin(self) -> float:
        """``within − across``."""
        return self.within - self.across


def _cosine_matrix(vectors: Sequence[Mapping[str, float]]) -> npt.NDArray[np.float64]:
    """Pairwise dot products of sparse unit vectors (their cosines)."""
    vocab: dict[str, int] = {}
    for v in vectors:
        for t in v:
            vocab.setdefault(t, len(vocab))
    matrix = np.zeros((len(vectors), len(vocab)))
    for i, v in enumerate(vectors):
        matrix[i, [vocab[t] for t in v]] = list(v.values())
    out: npt.NDArray[np.float64] = matrix @ matrix.T
    return out


def _spectral_sides(sim: npt.NDArray[np.float64]) -> npt.NDArray[np.int64] | None:
    """The sign cut of the Fiedler vector of the cosine graph's normalised Laplacian (a
    deterministic starting cut that follows the graph's weakest seam, not one outlier)."""
    weights = np.clip(sim, 0.0, None)
    np.fill_diagonal(weights, 0.0)
    degree = weights.sum(axis=1)
    if sim.shape[0] < 3 or np.any(degree <= 0):
        return None
    scale = 1.0 / np.sqrt(degree)
    laplacian = np.eye(sim.shape[0]) - scale[:, None] * weights * scale[None, :]
    _, vectors = np.linalg.eigh(laplacian)
    fiedler = vectors[:, 1] * scale
    return np.where(fiedler >= 0, 0, 1)


def cut_statistics(sim: npt.NDArray[np.float64], side: npt.NDArray[np.int64]) -> tuple[float, float, float] | None:
    """``(within, across, separation)`` of a two-sided cut of a cosine matrix (None when a side
    has no pair or there is no pair across).

    >>> sim = np.array([[1.0, 0.9, 0.1], [0.9, 1.0, 0.2], [0.1, 0.2, 1.0]])
    >>> [round(x, 3) for x in cut_statistics(sim, np.array([0, 0, 1]))]
    [0.9, 0.15, 21.213]
    """
    upper = np.triu_indices(sim.shape[0], 1)
    same = (side[:, None] == side[None, :])[upper]
    within, across = sim[upper][same], sim[upper][~same]
    if not within.size or not across.size:
        return None
    error = math.sqrt(within.var() / within.size + across.var() / across.size)
    difference = float(within.mean() - across.mean())
    separation = difference / error if error > 0 else (math.inf if difference > 0 else 0.0)
    return float(within.mean()), float(across.mean()), separation


def split_members(members: Sequence[Member], idf: Idf) -> SplitCut | None:
    """Cut the original members of a story in two.

    The cut starts from the spectral cut of the members' cosine graph (falling back to the two
    members farthest apart as seeds) and is refined by average link: each member in turn moves
    to the half it is closer to on average, until none moves. The separation is Welch's t of
    the within-half against the across pair cosines.

    Args:
        members: Original (non-copy) members, oldest first.
        idf: Term weights.

    Returns:
        The cut; None when fewer than two members have terms or a half has no pair.
    """
    vectors = [(m.article_id, member_vector(m, idf)) for m in members]
    vectors = [(aid, v) for aid, v in vectors if v]
    n = len(vectors)
    if n < 2:
        return None
    sim = _cosine_matrix([v for _, v in vectors])
    np.fill_diagonal(sim, 1.0)
    side = _spectral_sides(sim)
    if side is None:
        # Seeds: the pair farthest apart (ties by position, so the result is deterministic).
        upper = np.triu_indices(n, 1)
        k = int(np.lexsort((upper[1], upper[0], sim[upper]))[0])
        seed_a, seed_b = int(upper[0][k]), int(upper[1][k])
        side = np.where(sim[:, seed_a] >= sim[:, seed_b], 0, 1)
    others = sim - np.eye(n)  # a member is not its own neighbour
    for _ in range(20):
        changed = False
        for i in range(n):
            means = []
            for s_ in (0, 1):
                mask = side == s_
                count = int(mask.sum()) - (1 if side[i] == s_ else 0)
                means.append(float(others[i][mask].sum()) / count if count else -1.0)
            best = 0 if means[0] >= means[1] else 1
            if best != side[i] and int((side == side[i]).sum()) > 1:
                side[i] = best
                changed = True
        if not changed:
            break
    stats = cut_statistics(sim, side)
    if stats is None:
        return None
    if side[0] != 0:
        side = 1 - side
    return SplitCut([vectors[i][0] for i in range(n) if side[i] == 0],
                    [vectors[i][0] for i in range(n) if side[i] == 1], *stats)


def passes_split(cut: SplitCut, members: Mapping[str, Member], params: RepairParams) -> bool:
    """Whether a cut is a split: halves apart enough, and each told by enough sources."""
    return (cut.margin >= params.split_margin and cut.separation >= params.split_min_separation
            and cut.across <= params.split_max_across
            and _sources([members[a] for a in cut.half_a]) >= params.split_min_sources
            and _sources([members[b] for b in cut.half_b]) >= params.split_min_sources)


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


def _dates(members: Sequence[Member]) -> set[str]:
    return {y for y in story_years(t for m in members for t in m.terms) if y.startswith(DATE_TERM_PREFIX)}


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
        if _sources(bodies) < 2 * params.split_min_sources:
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


NEIGHBOUR_BLOCK_ROWS = 256
"""Stories whose centroid dot products are computed at once (the block's products are held in memory)."""
NEIGHBOUR_SHORTLIST_SLACK = 1e-9
"""How far below the ``count``-th best block product a story stays on the shortlist whose exact dot
products decide: far above the rounding of a sum of a few hundred products of unit-vector weights."""


def centroid_neighbours(candidates: Sequence[str], centroids: Mapping[str, Mapping[str, float]], count: int,
                        budget: int | None = None) -> dict[str, list[str]]:
    """Each candidate's ``count`` other candidates with the largest centroid dot products (the ones
    sharing no term are never neighbours), best first, ties broken by id.

    The dot products of every pair come from one sparse matrix product, computed a block of
    stories at a time, so the cost follows the shared terms, not a Python loop over every posting
    of every term (at 40,000 stories in a repair's lookback that loop ran for tens of minutes).
    Which neighbours win is then decided by the exact dot products of a shortlist (every story
    within :data:`NEIGHBOUR_SHORTLIST_SLACK` of the ``count``-th best product): computed together
    for a block, and summed term by term in a fixed order for a story whose shortlist holds two
    within the slack of each other, so the choice does not depend on how the products round.

    Each story looks for its neighbours through at most ``budget`` postings, as the online search
    reads at most ``ClusterParams.max_postings`` per article: its terms are read heaviest first,
    and a term held by more candidates than the budget has left is not read (on a busy stream the
    common words are in most centroids, and reading them made the product nearly dense, a
    quadratic in the lookback's stories). A term not read still counts in the exact dot products
    that rank the shortlist; a story sharing only such terms is not found. ``None``: every term.

    >>> centroids = {"a": {"x": 0.8, "y": 0.6}, "b": {"x": 1.0}, "c": {"y": 1.0}, "d": {"z": 1.0}}
    >>> centroid_neighbours(["a", "b", "c", "d"], centroids, 1)
    {'a': ['b'], 'b': ['a'], 'c': ['a'], 'd': []}
    >>> centroid_neighbours(["a", "b", "c", "d"], centroids, 1, budget=2)  # a reads x, not y as well
    {'a': ['b'], 'b': ['a'], 'c': ['a'], 'd': []}
    >>> centroid_neighbours(["a", "b", "c", "d"], centroids, 1, budget=1)  # x, y held by two: none read
    {'a': [], 'b': [], 'c': [], 'd': []}
    """
    from scipy import sparse

    if not candidates:
        return {}
    holders: dict[str, int] = {}
    for sid in candidates:
        for term in centroids[sid]:
            holders[term] = holders.get(term, 0) + 1
    columns = {term: col for col, term in enumerate(holders)}
    held: tuple[list[int], list[int], list[float]] = ([], [], [])
    read: tuple[list[int], list[int], list[float]] = ([], [], [])
    for row, sid in enumerate(candidates):
        centroid = centroids[sid]
        within = centroid
        if budget is not None and sum(holders[term] for term in centroid) > budget:
            within, left = {}, budget
            for term, weight in sorted(centroid.items(), key=lambda kv: (-abs(kv[1]), kv[0])):
                if holders[term] <= left:
                    left -= holders[term]
                    within[term] = weight
        for part, terms in ((held, centroid), (read, within)):
            part[0].extend([row] * len(terms))
            part[1].extend(columns[term] for term in terms)
            part[2].extend(terms.values())
    shape = (len(candidates), max(1, len(columns)))
    matrix = sparse.csr_matrix((np.asarray(read[2], dtype=np.float64), (read[0], read[1])), shape=shape)
    whole = sparse.csr_matrix((np.asarray(held[2], dtype=np.float64), (held[0], held[1])), shape=shape)
    transposed = whole.T.tocsr()
    out: dict[str, list[str]] = {}
    for start in range(0, len(candidates), NEIGHBOUR_BLOCK_ROWS):
        block = (matrix[start:start + NEIGHBOUR_BLOCK_ROWS] @ transposed).tocsr()
        shortlists: list[npt.NDArray[np.int64]] = []
        for offset in range(block.shape[0]):
            lo, hi = block.indptr[offset], block.indptr[offset + 1]
            others, products = block.indices[lo:hi], block.data[lo:hi]
            keep = others != start + offset
            others, products = others[keep], products[keep]
            if len(others) > count:
                bar = np.partition(products, len(products) - count)[len(products) - count]
                others = others[products >= bar - NEIGHBOUR_SHORTLIST_SLACK]
            shortlists.append(others)
        # The shortlists' dot products over every term, in one vector operation; a row with two of
        # them within the slack of each other is ranked by the exact sums instead.
        sizes = np.fromiter((len(o) for o in shortlists), dtype=np.int64, count=len(shortlists))
        pairs_row = np.repeat(np.arange(start, start + len(shortlists)), sizes)
        pairs_other = np.concatenate(shortlists) if shortlists else np.empty(0, dtype=np.int64)
        dots = np.asarray(whole[pairs_row].multiply(whole[pairs_other]).sum(axis=1)).ravel()
        ends = np.cumsum(sizes)
        for offset, others in enumerate(shortlists):
            sid = candidates[start + offset]
            near = dots[ends[offset] - len(others):ends[offset]]
            order = np.argsort(-near, kind="stable")
            if np.all(np.diff(near[order]) < -NEIGHBOUR_SHORTLIST_SLACK):
                out[sid] = [candidates[o] for o in others[order[:count]].tolist()]
                continue
            mine = centroids[sid]
            ranked = sorted((-_dot(mine, centroids[candidates[o]]), candidates[o]) for o in others.tolist())
            out[sid] = [other for _, other in ranked[:count]]
    return out


def plan_merges(
    clusterer: LanguageClusterer, candidates: Sequence[str], idf: Idf, params: RepairParams
) -> list[tuple[str, str, float]]:
    """Average-link agglomeration of ``candidates``: which stories to merge into which.

    Candidate pairs come from :func:`centroid_neighbours` (each story's ``MERGE_NEIGHBOURS`` best
    centroid dot products, found through at most ``max_postings`` postings as the online search).
    A pair qualifies when the stories share enough entity words, their spans are within
    ``merge_gap_hours`` and their dateline years do not conflict. The best qualifying pair of
    groups whose mean cross-member cosine (average link over every pair of original members) is at
    least ``merge_threshold`` is merged, and the merged group is scored again against its
    neighbours, until no pair reaches the bar.
    Average link over all members, not a running centroid, so a chain of weakly related
    stories never snowballs into one.

    Returns:
        ``(survivor, merged, mean cosine)`` in the order to apply them: within each group the
        oldest story survives, and the others merge into it oldest first.
    """
    if len(candidates) < 2:
        return []
    vectors = {sid: [member_vector(m, idf) for m in clusterer.story_members(sid) if m.copy_of is None] for sid in candidates}
    entity_sets = {sid: {e for m in clusterer.story_members(sid) for e in m.entities} for sid in candidates}
    dates = {sid: _dates(clusterer.story_members(sid)) for sid in candidates}
    times = {sid: clusterer.story_times(sid)[:2] for sid in candidates}
    centroids = {sid: clusterer.centroid_vector(sid, idf) for sid in candidates}

    def compatible(a: str, b: str) -> bool:
        if len(entity_sets[a] & entity_sets[b]) < params.merge_min_shared_entities:
            return False
        gap_ms = max(times[a][0], times[b][0]) - min(times[a][1], times[b][1])
        if gap_ms > params.merge_gap_hours * 3_600_000:
            return False
        return not (dates[a] and dates[b] and not dates[a] & dates[b])

    # The sum of the cross cosines of two stories' unit member vectors is the dot product of their
    # summed member vectors: each story is kept as one summed vector.
    sums: dict[str, dict[str, float]] = {}
    for sid in candidates:
        total: dict[str, float] = {}
        for v in vectors[sid]:
            for t, w in v.items():
                total[t] = total.get(t, 0.0) + w
        sums[sid] = total
    cross: dict[tuple[str, str], float] = {}
    nearest_of = centroid_neighbours(candidates, centroids, MERGE_NEIGHBOURS, clusterer.params.max_postings)
    for sid, nearest in nearest_of.items():
        for other in nearest:
            pair = (sid, other) if sid < other else (other, sid)
            if pair not in cross and compatible(*pair):
                cross[pair] = _cosine(sums[sid], sums[other])
    groups = {sid: [sid] for sid in candidates}
    neighbours: dict[str, dict[str, float]] = {sid: {} for sid in candidates}
    for (a, b), total_ in cross.items():
        neighbours[a][b] = neighbours[b][a] = total_

    def cross_sum(xs: Sequence[str], ys: Sequence[str]) -> float:
        return sum(_cosine(sums[s], sums[t]) for s in xs for t in ys)

    def mean(a: str, b: str) -> float:
        n = sum(len(vectors[s]) for s in groups[a]) * sum(len(vectors[t]) for t in groups[b])
        return neighbours[a][b] / n if n else 0.0

    def would_split(a: str, b: str) -> bool:
        """Whether the split rule would cut the union of groups ``a`` and ``b`` back into them."""
        members = {sid: [m for m in clusterer.story_members(sid) if m.copy_of is None and m.has_body]
                   for sid in groups[a] + groups[b]}
        side_a = [m for sid in groups[a] for m in members[sid]]
        side_b = [m for sid in groups[b] for m in members[sid]]
        if min(_sources(side_a), _sources(side_b)) < params.split_min_sources:
            return False
        both = [(m, member_vector(m, idf)) for m in side_a + side_b]
        kept = [(i, v) for i, (_, v) in enumerate(both) if v]
        sim = _cosine_matrix([v for _, v in kept])
        side = np.array([0 if i < len(side_a) else 1 for i, _ in kept])
        stats = cut_statistics(sim, side)
        if stats is None:
            return False
        by_id = {m.article_id: m for m, _ in both}
        cut = SplitCut([both[i][0].article_id for i, _ in kept if i < len(side_a)],
                       [both[i][0].article_id for i, _ in kept if i >= len(side_a)], *stats)
        return passes_split(cut, by_id, params)

    # The best pair first: the highest mean, ties to the larger ids (a < b). A pair's entry goes
    # stale when a merge changes its groups or the pair is dropped; a stale entry is skipped when
    # it comes up, as every live pair has an entry with its current mean.
    rank = {sid: i for i, sid in enumerate(sorted(candidates))}
    heap: list[tuple[float, int, int, str, str]] = []

    codes: dict[str, npt.NDArray[np.float64] | None] = {}

    def code_sum(sid: str) -> npt.NDArray[np.float64] | None:
        """A story's summed member embeddings (computed when a pair first needs them)."""
        if sid not in codes:
            held = [code_vector(m.embedding) for m in clusterer.story_members(sid) if m.copy_of is None
                    and m.embedding is not None]
            codes[sid] = np.sum(held, axis=0).astype(np.float64) if held else None
        return codes[sid]

    def embedding_cosine(a: str, b: str) -> float:
        left = [c for s in groups[a] if (c := code_sum(s)) is not None]
        right = [c for s in groups[b] if (c := code_sum(s)) is not None]
        if not left or not right:
            return -1.0
        x, y = np.sum(left, axis=0), np.sum(right, axis=0)
        norm = float(np.linalg.norm(x) * np.linalg.norm(y))
        return float(x @ y) / norm if norm > 0 else -1.0

    def qualifies(a: str, b: str, score: float) -> bool:
        if score >= params.merge_threshold:
            return True
        low = params.merge_low_threshold
        return low is not None and score >= low and embedding_cosine(a, b) >= params.merge_embedding_threshold

    def push(a: str, b: str) -> None:
        a, b = (a, b) if a < b else (b, a)
        score = mean(a, b)
        if qualifies(a, b, score):
            heapq.heappush(heap, (-score, -rank[a], -rank[b], a, b))

    for (a, b) in cross:
        push(a, b)
    while heap:
        negative, _, _, a, b = heapq.heappop(heap)
        if b not in neighbours.get(a, ()) or mean(a, b) != -negative:
            continue
        if would_split(a, b):
            del neighbours[a][b], neighbours[b][a]
            continue
        # b joins a. Average link over the union: a neighbour of either part is kept only if
        # every story of the union is compatible with every story of it; its cross sum with the
        # union is the sum of the parts' sums, computed only for the part that had not met it.
        part_a, part_b = groups[a], groups.pop(b)
        from_a, from_b = neighbours[a], neighbours.pop(b)
        groups[a] = part_a + part_b
        neighbours[a] = {}
        for c in sorted((set(from_a) | set(from_b)) - {a, b}):
            neighbours[c].pop(a, None)
            neighbours[c].pop(b, None)
            if all(compatible(*sorted((s, t))) for s in groups[a] for t in groups[c]):
                total = (from_a[c] if c in from_a else cross_sum(part_a, groups[c])) + (
                    from_b[c] if c in from_b else cross_sum(part_b, groups[c]))
                neighbours[a][c] = neighbours[c][a] = total
                push(a, c)
    plan: list[tuple[str, str, float]] = []
    for members in groups.values():
        if len(members) < 2:
            continue
        ordered = sorted(members, key=lambda s: (times[s][0], s))
        for merged in ordered[1:]:
            rest = [sid for sid in members if sid != merged]
            pairs = len(vectors[merged]) * sum(len(vectors[sid]) for sid in rest)
            plan.append((ordered[0], merged, cross_sum([merged], rest) / pairs if pairs else 0.0))
    return plan


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
