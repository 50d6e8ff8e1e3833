"""The split cut of the repair pass (``transforms.clustering.repair``): a story's original members
cut in two by a spectral cut refined by average link, and the bar a cut must pass to be a split."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from transforms.clustering.idf import Idf
from transforms.clustering.params import RepairParams
from transforms.clustering.scoring import weighted_vector
from transforms.clustering.story import Member


def member_vector(member: Member, idf: Idf) -> dict[str, float]:
    """A member's terms weighted by ``idf``, L2-normalised (empty if it has no terms).

    >>> member_vector(Member("a", 0, None, None, ("x", "y"), (3.0, 4.0), ()), Idf({}, 0.0, math.e - 1.0))
    {'x': 0.6, 'y': 0.8}
    """
    return weighted_vector(member.terms, member.weights, idf)


def count_sources(members: Sequence[Member]) -> int:
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


def cosine_matrix(vectors: Sequence[Mapping[str, float]]) -> npt.NDArray[np.float64]:
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
    sim = cosine_matrix([v for _, v in vectors])
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
            and count_sources([members[a] for a in cut.half_a]) >= params.split_min_sources
            and count_sources([members[b] for b in cut.half_b]) >= params.split_min_sources)
