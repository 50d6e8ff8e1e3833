"""Story repair: merge two stories about one event, split a story fed two events (issue 4).

The online pass decides each article once, from what it has seen so far; its errors come
from early mixing (the 2nd or 3rd article of a story comes from another event of the same
kind, and the mixed centroid then absorbs the rest). The repair pass looks again, over the
stories active in the last ``lookback_hours``, with every member at hand:

- **split**: the members are cut in two by 2-medoid average-link refinement over the
  IDF-weighted member cosines; the cut is kept when both halves are cohesive and well apart
  (mean within-half cosine minus mean across cosine at least ``split_margin``, across at most
  ``split_max_across``) and each half has at least ``split_min_sources`` sources. The half
  holding the representative (the headline the pages show; see :func:`story_representative`)
  keeps the story id; the other half gets a new id.
- **merge**: stories whose members are close on average (mean cross cosine at least
  ``merge_threshold``), that share an entity word, whose dateline years do not conflict and
  whose times overlap within ``merge_gap_hours``, are agglomerated by average link (see
  :func:`plan_merges`): one pass can fold several fragments of one event into the oldest of
  them, which survives; the others become its aliases.

A story is repaired at most once per ``cooldown_minutes`` (a merge of several fragments in one
pass is one repair of each). Everything is pure: the clock is an
argument, candidates and ties are ordered by story id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from transforms.clustering.clusterer import LanguageClusterer
from transforms.clustering.params import ClusterParams
from transforms.clustering.scoring import weighted_vector
from transforms.clustering.story import Assignment, Member, story_years
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
        merge_min_shared_entities: Least entity words the two stories share.
        merge_gap_hours: Most hours between the two stories' spans.
        split_margin: Least (within-half mean cosine − across mean cosine) for a split.
        split_max_across: Most mean across cosine for a split.
        split_min_sources: Least sources (publishers; articles when unknown) per half.
        max_split_members: Stories larger than this are split on their latest members only.
    """

    lookback_hours: float = 6.0
    cooldown_minutes: float = 30.0
    merge_threshold: float = 0.30
    merge_min_shared_entities: int = 1
    merge_gap_hours: float = 6.0
    split_margin: float = 0.10
    split_max_across: float = 0.40
    split_min_sources: int = 3
    max_split_members: int = 200

    def __post_init__(self) -> None:
        for name in ("merge_threshold", "split_margin", "split_max_across"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if self.lookback_hours <= 0 or self.cooldown_minutes < 0 or self.merge_gap_hours < 0:
            raise ValueError("lookback_hours must be > 0, cooldown_minutes and merge_gap_hours >= 0")
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


def member_vector(member: Member, idf: Callable[[str], float]) -> dict[str, float]:
    """A member's terms weighted by ``idf``, L2-normalised (empty if it has no terms).

    >>> member_vector(Member("a", 0, None, None, ("x", "y"), (3.0, 4.0), ()), lambda t: 1.0)
    {'x': 0.6, 'y': 0.8}
    """
    return weighted_vector(member.terms, member.weights, idf)


def _cosine(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(w * b.get(t, 0.0) for t, w in a.items())


def _sources(members: Sequence[Member]) -> int:
    return len({m.publisher_id or f"article:{m.article_id}" for m in members})


def split_members(
    members: Sequence[Member], idf: Callable[[str], float]
) -> tuple[list[str], list[str], float, float] | None:
    """Cut the original members of a story in two (2-medoid average-link refinement).

    Args:
        members: Original (non-copy) members, oldest first.
        idf: Term weights.

    Returns:
        ``(half_a_ids, half_b_ids, within, across)``: the two halves (``half_a`` holds the
        oldest member), the mean within-half cosine and the mean across cosine; None when
        fewer than two members have terms.
    """
    vectors = [(m.article_id, member_vector(m, idf)) for m in members]
    vectors = [(aid, v) for aid, v in vectors if v]
    n = len(vectors)
    if n < 2:
        return None
    sim = [[_cosine(vectors[i][1], vectors[j][1]) if i != j else 1.0 for j in range(n)] for i in range(n)]
    # Seeds: the pair farthest apart (ties by position, so the result is deterministic).
    seed_a, seed_b = min(((i, j) for i in range(n) for j in range(i + 1, n)), key=lambda p: (sim[p[0]][p[1]], p))
    side = [0 if sim[i][seed_a] >= sim[i][seed_b] else 1 for i in range(n)]
    for _ in range(20):
        changed = False
        for i in range(n):
            scores = []
            for s in (0, 1):
                others = [j for j in range(n) if side[j] == s and j != i]
                scores.append(sum(sim[i][j] for j in others) / len(others) if others else -1.0)
            best = 0 if scores[0] >= scores[1] else 1
            if best != side[i] and sum(1 for x in side if x == side[i]) > 1:
                side[i] = best
                changed = True
        if not changed:
            break
    within_pairs = [sim[i][j] for i in range(n) for j in range(i + 1, n) if side[i] == side[j]]
    across_pairs = [sim[i][j] for i in range(n) for j in range(i + 1, n) if side[i] != side[j]]
    if not across_pairs or not within_pairs:
        return None
    if side[0] != 0:
        side = [1 - x for x in side]
    half_a = [vectors[i][0] for i in range(n) if side[i] == 0]
    half_b = [vectors[i][0] for i in range(n) if side[i] == 1]
    return half_a, half_b, sum(within_pairs) / len(within_pairs), sum(across_pairs) / len(across_pairs)


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
        if _sources(originals) < 2 * params.split_min_sources:
            continue
        cut = split_members(originals, idf)
        if cut is None:
            continue
        half_a, half_b, within, across = cut
        by_id = {m.article_id: m for m in originals}
        if (within - across < params.split_margin or across > params.split_max_across
                or _sources([by_id[a] for a in half_a]) < params.split_min_sources
                or _sources([by_id[b] for b in half_b]) < params.split_min_sources):
            continue
        rep = story_representative(members, clusterer.story_first_article(sid), representatives.get(sid), authority)
        moving = half_b if rep in half_a or rep not in half_b else half_a
        new_id, moved = clusterer.apply_split(sid, moving, now)
        touched.update((sid, new_id))
        out.append(StoryRepair("split", sid, new_id, tuple((m.article_id, m.copy_of) for m in moved),
                               round(within - across, 6)))

    for survivor, merged, mean in plan_merges(clusterer, [sid for sid in clusterer.story_ids() if eligible(sid)], idf, params):
        moved = clusterer.apply_merge(survivor, merged, now)
        out.append(StoryRepair("merge", survivor, merged, tuple((m.article_id, m.copy_of) for m in moved), round(mean, 6)))
    return out


def plan_merges(
    clusterer: LanguageClusterer, candidates: Sequence[str], idf: Callable[[str], float], params: RepairParams
) -> list[tuple[str, str, float]]:
    """Average-link agglomeration of ``candidates``: which stories to merge into which.

    Candidate pairs come from an inverted index over the stories' centroids (each story's
    ``MERGE_NEIGHBOURS`` best centroid dot products). A pair qualifies when the stories share
    enough entity words, their spans are within ``merge_gap_hours`` and their dateline years do
    not conflict. The best qualifying pair of groups whose mean cross-member cosine (average
    link over every pair of original members) is at least ``merge_threshold`` is merged, and
    the merged group is scored again against its neighbours, until no pair reaches the bar.
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
    centroids = {sid: clusterer.centroid_vector(sid) for sid in candidates}
    index: dict[str, list[str]] = {}
    for sid in candidates:
        for term in centroids[sid]:
            index.setdefault(term, []).append(sid)

    def compatible(a: str, b: str) -> bool:
        if len(entity_sets[a] & entity_sets[b]) < params.merge_min_shared_entities:
            return False
        gap_ms = max(times[a][0], times[b][0]) - min(times[a][1], times[b][1])
        if gap_ms > params.merge_gap_hours * 3_600_000:
            return False
        return not (dates[a] and dates[b] and not dates[a] & dates[b])

    # Cross sums of member cosines between compatible neighbouring stories.
    cross: dict[tuple[str, str], float] = {}
    for sid in candidates:
        partial: dict[str, float] = {}
        for term, weight in centroids[sid].items():
            for other in index.get(term, ()):
                if other != sid:
                    partial[other] = partial.get(other, 0.0) + weight * centroids[other][term]
        for other in sorted(partial, key=lambda o: (-partial[o], o))[:MERGE_NEIGHBOURS]:
            pair = (sid, other) if sid < other else (other, sid)
            if pair not in cross and compatible(*pair):
                cross[pair] = sum(_cosine(a, b) for a in vectors[sid] for b in vectors[other])
    groups = {sid: [sid] for sid in candidates}
    neighbours: dict[str, dict[str, float]] = {sid: {} for sid in candidates}
    for (a, b), total in cross.items():
        neighbours[a][b] = neighbours[b][a] = total

    def cross_sum(xs: Sequence[str], ys: Sequence[str]) -> float:
        return sum(_cosine(u, v) for s in xs for u in vectors[s] for t in ys for v in vectors[t])

    def mean(a: str, b: str) -> float:
        n = sum(len(vectors[s]) for s in groups[a]) * sum(len(vectors[t]) for t in groups[b])
        return neighbours[a][b] / n if n else 0.0

    while True:
        best: tuple[float, str, str] | None = None
        for a in sorted(neighbours):
            for b in neighbours[a]:
                if a < b:
                    score = mean(a, b)
                    if score >= params.merge_threshold and (best is None or (score, a, b) > best):
                        best = (score, a, b)
        if best is None:
            break
        _, a, b = best
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
