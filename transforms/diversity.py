"""Page order: stability against the live page, then diversity, then a slot for a fresh story.

Pure functions over short ranked lists (a page's candidates, tens of rows), so plain Python.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DiversityRule:
    max_per_section_top10: int = 3
    max_centroid_cosine: float = 0.85
    fresh_slot_rank: int = 8


def stabilize_order(ranked: Sequence[str], scores: Mapping[str, float], previous: Sequence[str], *,
                    margin: float, pinned: frozenset[str] = frozenset()) -> list[str]:
    """Order stories by score, but keep two stories that were both on the live page in their old
    order unless the lower one now leads by more than ``margin`` (issue 5: swap only past a 10% gap).

    Pinned stories (Breaking) stay first, in the given order.

    >>> stabilize_order(["b", "a"], {"a": 1.0, "b": 1.05}, ["a", "b"], margin=0.1)
    ['a', 'b']
    >>> stabilize_order(["b", "a"], {"a": 1.0, "b": 1.2}, ["a", "b"], margin=0.1)
    ['b', 'a']
    """
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    was = {sid: i for i, sid in enumerate(previous)}
    head = [s for s in ranked if s in pinned]
    rest = [s for s in ranked if s not in pinned]
    order = sorted(rest, key=lambda s: (0, was[s]) if s in was else (1, -scores[s], s))
    # Insert newcomers by score, then bubble: old pairs swap only past the margin.
    olds = [s for s in order if s in was]
    for s in (s for s in order if s not in was):
        i = len(olds)
        while i > 0 and scores[s] > scores[olds[i - 1]]:
            i -= 1
        olds.insert(i, s)
    order = olds
    changed = True
    while changed:
        changed = False
        for i in range(len(order) - 1):
            a, b = order[i], order[i + 1]
            both_old = a in was and b in was
            if (both_old and scores[b] > scores[a] * (1 + margin)) or (not both_old and scores[b] > scores[a]):
                order[i], order[i + 1] = b, a
                changed = True
    return head + order


def diversify(order: Sequence[str], sections: Mapping[str, Sequence[str]], similarity: Callable[[str, str], float],
              *, rule: DiversityRule, fresh: Sequence[str], limit: int, cap_sections: bool) -> list[str]:
    """At most ``limit`` stories: no two with centroid cosine above the rule's, at most
    ``max_per_section_top10`` of the first ten from one section (when ``cap_sections``), and the
    ``fresh_slot_rank`` slot given to the best fresh story not already above it whose move there
    keeps that cap (none when no fresh story does).

    Args:
        order: Candidate story ids, best first.
        sections: Sections per story.
        similarity: Centroid cosine of two stories.
        rule: The diversity rule.
        fresh: Fresh unproven story ids, best first.
        limit: Page length.
        cap_sections: Apply the per-section cap (the top page; a section page is one section).
    """
    kept: list[str] = []
    enough = limit + 10 + (len(sections) and 10)  # room for deferrals; the rest can never show
    for s in order:
        if len(kept) >= enough:
            break
        if all(similarity(s, k) <= rule.max_centroid_cosine for k in kept):
            kept.append(s)
    page: list[str] = []
    deferred: list[str] = []
    counts: Counter[str] = Counter()
    for s in kept:
        secs = sections.get(s, ())
        if cap_sections and len(page) < 10 and any(counts[x] >= rule.max_per_section_top10 for x in secs):
            deferred.append(s)
            continue
        page.append(s)
        if len(page) <= 10:
            counts.update(secs)
        if len(page) == 10:
            page.extend(deferred)
            deferred = []
    page.extend(deferred)
    slot = rule.fresh_slot_rank
    if 0 < slot <= min(limit, len(page) + 1):
        above = set(page[: slot - 1])
        kept_set = set(kept)
        for s in fresh:
            if s in above or s not in kept_set:
                continue
            trial = [x for x in page if x != s]
            trial.insert(slot - 1, s)
            if cap_sections and _breaks_cap(trial, page, sections, s, rule.max_per_section_top10):
                continue
            page = trial
            break
    return page[:limit]


def _breaks_cap(trial: Sequence[str], page: Sequence[str], sections: Mapping[str, Sequence[str]], fresh: str,
               cap: int) -> bool:
    """Whether ``trial`` (the page with ``fresh`` moved into its slot) has more than ``cap`` stories
    of one of the fresh story's sections in its top ten (or more than ``page`` had, when too few
    candidates already left it over the cap). Only the fresh story's sections can grow."""
    def top10(ids: Sequence[str]) -> Counter[str]:
        return Counter(x for sid in ids[:10] for x in set(sections.get(sid, ())))

    after, before = top10(trial), top10(page)
    return any(after[x] > max(cap, before[x]) for x in sections.get(fresh, ()))
