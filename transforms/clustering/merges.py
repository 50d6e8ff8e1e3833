"""The merge plan of the repair pass (``transforms.clustering.repair``): candidate pairs from
each story's nearest centroids, agglomerated by average link over their original members."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from transforms.clustering.clusterer import LanguageClusterer
from transforms.clustering.idf import Idf
from transforms.clustering.params import RepairParams
from transforms.clustering.splits import (
    SplitCut,
    cosine_matrix,
    count_sources,
    cut_statistics,
    member_vector,
    passes_split,
)
from transforms.clustering.story import Member, code_vector, story_years
from transforms.features import DATE_TERM_PREFIX

if TYPE_CHECKING:
    from scipy import sparse

MERGE_NEIGHBOURS = 10


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


def _dates(members: Sequence[Member]) -> set[str]:
    return {y for y in story_years(t for m in members for t in m.terms) if y.startswith(DATE_TERM_PREFIX)}


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
    if not candidates:
        return {}
    read, whole = _centroid_matrices(candidates, centroids, budget)
    transposed = whole.T.tocsr()
    out: dict[str, list[str]] = {}
    for start in range(0, len(candidates), NEIGHBOUR_BLOCK_ROWS):
        block = (read[start:start + NEIGHBOUR_BLOCK_ROWS] @ transposed).tocsr()
        shortlists = _shortlists(block, start, count)
        out.update(_rank_shortlists(candidates, centroids, whole, start, shortlists, count))
    return out


def _centroid_matrices(candidates: Sequence[str], centroids: Mapping[str, Mapping[str, float]], budget: int | None
                       ) -> tuple[sparse.csr_matrix, sparse.csr_matrix]:
    """The candidates' centroids as sparse rows over their terms: the terms each reads within
    ``budget`` postings (heaviest first), and every term."""
    from scipy import sparse

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
    return matrix, whole


def _shortlists(block: sparse.csr_matrix, start: int, count: int) -> list[npt.NDArray[np.int64]]:
    """For each row of a block of products (rows from ``start``), the other stories within
    :data:`NEIGHBOUR_SHORTLIST_SLACK` of its ``count``-th best product."""
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
    return shortlists


def _rank_shortlists(candidates: Sequence[str], centroids: Mapping[str, Mapping[str, float]], whole: sparse.csr_matrix,
                     start: int,
                     shortlists: list[npt.NDArray[np.int64]], count: int) -> dict[str, list[str]]:
    """Each shortlisted story's ``count`` best, by the shortlists' dot products over every term
    (one vector operation); a row with two of them within the slack of each other is ranked by
    the exact sums instead."""
    out: dict[str, list[str]] = {}
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
    groups = _Agglomeration(clusterer, candidates, idf, params)
    groups.link(centroid_neighbours(candidates, groups.centroids, MERGE_NEIGHBOURS, clusterer.params.max_postings))
    groups.agglomerate()
    return groups.plan()


class _Agglomeration:
    """The groups of one :func:`plan_merges` call, their neighbours, and the queue of pairs to merge.

    The sum of the cross cosines of two stories' unit member vectors is the dot product of their
    summed member vectors: each story is kept as one summed vector (``sums``).
    """

    def __init__(self, clusterer: LanguageClusterer, candidates: Sequence[str], idf: Idf,
                 params: RepairParams) -> None:
        self.clusterer, self.idf, self.params = clusterer, idf, params
        self.vectors = {sid: [member_vector(m, idf) for m in clusterer.story_members(sid) if m.copy_of is None]
                        for sid in candidates}
        self.entity_sets = {sid: {e for m in clusterer.story_members(sid) for e in m.entities} for sid in candidates}
        self.dates = {sid: _dates(clusterer.story_members(sid)) for sid in candidates}
        self.times = {sid: clusterer.story_times(sid)[:2] for sid in candidates}
        self.centroids = {sid: clusterer.centroid_vector(sid, idf) for sid in candidates}
        self.sums: dict[str, dict[str, float]] = {}
        for sid in candidates:
            total: dict[str, float] = {}
            for v in self.vectors[sid]:
                for t, w in v.items():
                    total[t] = total.get(t, 0.0) + w
            self.sums[sid] = total
        self.groups = {sid: [sid] for sid in candidates}
        self.neighbours: dict[str, dict[str, float]] = {sid: {} for sid in candidates}
        # The best pair first: the highest mean, ties to the larger ids (a < b). A pair's entry goes
        # stale when a merge changes its groups or the pair is dropped; a stale entry is skipped when
        # it comes up, as every live pair has an entry with its current mean.
        self.rank = {sid: i for i, sid in enumerate(sorted(candidates))}
        self.heap: list[tuple[float, int, int, str, str]] = []
        self.codes: dict[str, npt.NDArray[np.float64] | None] = {}

    def compatible(self, a: str, b: str) -> bool:
        """Whether two stories share enough entity words, are close enough in time, and their
        dateline years do not conflict."""
        if len(self.entity_sets[a] & self.entity_sets[b]) < self.params.merge_min_shared_entities:
            return False
        times = self.times
        gap_ms = max(times[a][0], times[b][0]) - min(times[a][1], times[b][1])
        if gap_ms > self.params.merge_gap_hours * 3_600_000:
            return False
        dates = self.dates
        return not (dates[a] and dates[b] and not dates[a] & dates[b])

    def link(self, nearest_of: Mapping[str, Sequence[str]]) -> None:
        """Make each compatible pair of nearest neighbours a candidate pair, queued by its mean."""
        cross: dict[tuple[str, str], float] = {}
        for sid, nearest in nearest_of.items():
            for other in nearest:
                pair = (sid, other) if sid < other else (other, sid)
                if pair not in cross and self.compatible(*pair):
                    cross[pair] = _cosine(self.sums[sid], self.sums[other])
        for (a, b), total in cross.items():
            self.neighbours[a][b] = self.neighbours[b][a] = total
        for (a, b) in cross:
            self.push(a, b)

    def cross_sum(self, xs: Sequence[str], ys: Sequence[str]) -> float:
        return sum(_cosine(self.sums[s], self.sums[t]) for s in xs for t in ys)

    def mean(self, a: str, b: str) -> float:
        """The mean cross cosine of groups ``a`` and ``b`` over every pair of original members."""
        n = sum(len(self.vectors[s]) for s in self.groups[a]) * sum(len(self.vectors[t]) for t in self.groups[b])
        return self.neighbours[a][b] / n if n else 0.0

    def would_split(self, a: str, b: str) -> bool:
        """Whether the split rule would cut the union of groups ``a`` and ``b`` back into them."""
        members = {sid: [m for m in self.clusterer.story_members(sid) if m.copy_of is None and m.has_body]
                   for sid in self.groups[a] + self.groups[b]}
        side_a = [m for sid in self.groups[a] for m in members[sid]]
        side_b = [m for sid in self.groups[b] for m in members[sid]]
        if min(count_sources(side_a), count_sources(side_b)) < self.params.split_min_sources:
            return False
        both = [(m, member_vector(m, self.idf)) for m in side_a + side_b]
        kept = [(i, v) for i, (_, v) in enumerate(both) if v]
        sim = cosine_matrix([v for _, v in kept])
        side = np.array([0 if i < len(side_a) else 1 for i, _ in kept])
        stats = cut_statistics(sim, side)
        if stats is None:
            return False
        by_id = {m.article_id: m for m, _ in both}
        cut = SplitCut([both[i][0].article_id for i, _ in kept if i < len(side_a)],
                       [both[i][0].article_id for i, _ in kept if i >= len(side_a)], *stats)
        return passes_split(cut, by_id, self.params)

    def code_sum(self, sid: str) -> npt.NDArray[np.float64] | None:
        """A story's summed member embeddings (computed when a pair first needs them)."""
        if sid not in self.codes:
            held = [code_vector(m.embedding) for m in self.clusterer.story_members(sid) if m.copy_of is None
                    and m.embedding is not None]
            self.codes[sid] = np.sum(held, axis=0).astype(np.float64) if held else None
        return self.codes[sid]

    def embedding_cosine(self, a: str, b: str) -> float:
        left = [c for s in self.groups[a] if (c := self.code_sum(s)) is not None]
        right = [c for s in self.groups[b] if (c := self.code_sum(s)) is not None]
        if not left or not right:
            return -1.0
        x, y = np.sum(left, axis=0), np.sum(right, axis=0)
        norm = float(np.linalg.norm(x) * np.linalg.norm(y))
        return float(x @ y) / norm if norm > 0 else -1.0

    def qualifies(self, a: str, b: str, score: float) -> bool:
        """Whether a pair's mean reaches the merge bar (or the low bar, with embeddings that agree)."""
        if score >= self.params.merge_threshold:
            return True
        low = self.params.merge_low_threshold
        return low is not None and score >= low and self.embedding_cosine(a, b) >= self.params.merge_embedding_threshold

    def push(self, a: str, b: str) -> None:
        a, b = (a, b) if a < b else (b, a)
        score = self.mean(a, b)
        if self.qualifies(a, b, score):
            heapq.heappush(self.heap, (-score, -self.rank[a], -self.rank[b], a, b))

    def agglomerate(self) -> None:
        """Merge the best live pair, again and again, until no pair reaches the bar."""
        neighbours = self.neighbours
        while self.heap:
            negative, _, _, a, b = heapq.heappop(self.heap)
            if b not in neighbours.get(a, ()) or self.mean(a, b) != -negative:
                continue
            if self.would_split(a, b):
                del neighbours[a][b], neighbours[b][a]
                continue
            self.join(a, b)

    def join(self, a: str, b: str) -> None:
        """Group ``b`` joins ``a``.

        Average link over the union: a neighbour of either part is kept only if every story of the
        union is compatible with every story of it; its cross sum with the union is the sum of the
        parts' sums, computed only for the part that had not met it.
        """
        groups, neighbours = self.groups, self.neighbours
        part_a, part_b = groups[a], groups.pop(b)
        from_a, from_b = neighbours[a], neighbours.pop(b)
        groups[a] = part_a + part_b
        neighbours[a] = {}
        for c in sorted((set(from_a) | set(from_b)) - {a, b}):
            neighbours[c].pop(a, None)
            neighbours[c].pop(b, None)
            if all(self.compatible(*sorted((s, t))) for s in groups[a] for t in groups[c]):
                total = (from_a[c] if c in from_a else self.cross_sum(part_a, groups[c])) + (
                    from_b[c] if c in from_b else self.cross_sum(part_b, groups[c]))
                neighbours[a][c] = neighbours[c][a] = total
                self.push(a, c)

    def plan(self) -> list[tuple[str, str, float]]:
        """``(survivor, merged, mean cosine)`` for every group of two or more, oldest first."""
        plan: list[tuple[str, str, float]] = []
        for members in self.groups.values():
            if len(members) < 2:
                continue
            ordered = sorted(members, key=lambda s: (self.times[s][0], s))
            for merged in ordered[1:]:
                rest = [sid for sid in members if sid != merged]
                pairs = len(self.vectors[merged]) * sum(len(self.vectors[sid]) for sid in rest)
                plan.append((ordered[0], merged, self.cross_sum([merged], rest) / pairs if pairs else 0.0))
        return plan
