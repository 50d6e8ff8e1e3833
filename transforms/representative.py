"""Which article stands for a story on an edition's page, and which four support it.

Pure: member rows (dicts from ``story_members.sql``) in, member rows out. Every choice has an
explicit tie-breaker, and the hourly rotation between near-ties uses blake2b, never ``hash()``.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from transforms.text import is_dateline

Member = Mapping[str, Any]

CLICKBAIT_PATTERNS = re.compile(
    r"you won't believe|you will not believe|what happened next|shocking|this one trick|"
    r"will blow your mind|number \d+ will|here's why|here is why|find out|must see|jaw-dropping|"
    r"\?\!|!!", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RepresentativeWeights:
    centrality: float = 1.0
    authority: float = 1.0
    freshness: float = 0.5
    headline: float = 0.5
    first_report: float = 0.2
    local: float = 0.3
    half_life_hours: float = 4.0
    window_hours: float = 6.0
    tie_margin: float = 0.05
    daily_share_cap: float = 0.10
    supporting: int = 4
    mmr_lambda: float = 0.7
    cap_min_total: float = 30.0
    """Early in a day the cap reads as a share of at least this many impressions (one full page)."""
    impression_minutes: float = 1.0
    """What one listing on the top page adds to the daily count: the rank cadence, in minutes."""


def has_title(member: Member) -> bool:
    """Whether an article has a headline to show: an untitled article never stands for a story,
    nor one whose "headline" is only a date line ("4 August 2013 Last updated at 19:47 GMT",
    which some pages put where the headline goes; issue 14).

    >>> has_title({"title": "Budget passes"}), has_title({"title": "  "}), has_title({"title": None})
    (True, False, False)
    >>> has_title({"title": "4 August 2013 Last updated at 19:47 GMT"})
    False
    """
    title = (member.get("title") or "").strip()
    return bool(title) and not is_dateline(title)


def term_vector(member: Member) -> dict[str, float]:
    """An article's sparse term vector from ``terms`` / ``term_weights`` (empty when absent)."""
    terms = member.get("terms") or []
    weights = member.get("term_weights") or []
    return {t: float(w) for t, w in zip(terms, weights, strict=False)}


def centroid(vectors: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean of sparse vectors, L2-normalised (empty for no input)."""
    total: dict[str, float] = {}
    for v in vectors:
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        for t, x in v.items():
            total[t] = total.get(t, 0.0) + x / norm
    norm = math.sqrt(sum(x * x for x in total.values()))
    return {t: x / norm for t, x in total.items()} if norm else {}


def cosine(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Cosine of two sparse vectors; 0 when either is empty.

    >>> round(cosine({"a": 1.0, "b": 1.0}, {"a": 1.0}), 4)
    0.7071
    """
    if not a or not b:
        return 0.0
    if len(a) > len(b):
        a, b = b, a
    dot = sum(x * b.get(t, 0.0) for t, x in a.items())
    na = math.sqrt(sum(x * x for x in a.values()))
    nb = math.sqrt(sum(x * x for x in b.values()))
    return dot / (na * nb) if na and nb else 0.0


def headline_quality(title: str | None) -> float:
    """1 for a plain, informative headline; less when it is short, long, shouting or clickbait.

    >>> headline_quality("Parliament passes the budget after a night of debate")
    1.0
    >>> headline_quality("YOU WON'T BELIEVE THIS") < 0.5
    True
    """
    if not title:
        return 0.0
    words = title.split()
    score = 1.0
    if len(words) < 4 or len(title) > 120:
        score -= 0.3
    letters = [c for c in title if c.isalpha()]
    if letters and sum(c.isupper() for c in letters) / len(letters) > 0.6 and len(letters) > 8:
        score -= 0.4
    if CLICKBAIT_PATTERNS.search(title):
        score -= 0.4
    return max(score, 0.0)


def rotation_index(story_id: str, edition: str, hour: datetime, count: int) -> int:
    """A stable pick among ``count`` near-ties that changes every hour, per story and edition."""
    key = f"{story_id}|{edition}|{hour:%Y-%m-%dT%H}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") % count


def score_candidates(members: Sequence[Member], story_centroid: Mapping[str, float], *, region: str,
                     is_local_story: bool, now: datetime, weights: RepresentativeWeights
                     ) -> list[tuple[float, Member]]:
    """Titled originals from the last ``window_hours`` (all titled originals when none; titled
    copies when no original has a title), best first. Empty when no member has a title.

    Each scores on centrality, authority, freshness, headline quality, a boost for the first report
    and one for local publishers on local stories.
    """
    titled = [m for m in members if has_title(m)]
    if not titled:
        return []
    originals = [m for m in titled if not m["is_copy"]] or titled
    recent = [m for m in originals if (now - m["first_seen_at"]).total_seconds() <= weights.window_hours * 3600]
    pool = recent or originals
    first = min(pool, key=lambda m: (m["first_seen_at"], m["article_id"]))["article_id"]
    scored = []
    for m in pool:
        age_hours = max((now - m["first_seen_at"]).total_seconds(), 0.0) / 3600
        score = (weights.centrality * cosine(term_vector(m), story_centroid)
                 + weights.authority * float(m["authority"] or 0)
                 + weights.freshness * 0.5 ** (age_hours / weights.half_life_hours)
                 + weights.headline * headline_quality(m["title"])
                 + (weights.first_report if m["article_id"] == first else 0.0)
                 + (weights.local if is_local_story and m["region"] == region else 0.0))
        scored.append((score, m))
    scored.sort(key=lambda sm: (-sm[0], sm[1]["first_seen_at"], sm[1]["article_id"]))
    return scored


class ChoiceSummary(TypedDict):
    """How a representative was chosen, as a page card carries it (``representative_choice``)."""

    candidates: int
    near_ties: list[str]
    stepped_aside: list[str]


@dataclass(frozen=True, slots=True)
class RepresentativeChoice:
    """How one story's representative was chosen on one edition (``newsroom explain``, issue 18).

    ``candidates`` are the scored candidates, best first; ``stepped_aside`` the publishers whose
    daily share of representative impressions would pass the cap (they gave way to the others);
    ``near_ties`` the candidates within ``tie_margin`` of the best allowed one (free ones only, when
    any is free), in score order; ``chosen`` is ``near_ties[rotation]``, the hourly rotation.
    """

    chosen: Member
    candidates: tuple[tuple[float, Member], ...]
    stepped_aside: tuple[str, ...]
    near_ties: tuple[tuple[float, Member], ...]
    rotation: int
    budget_minutes: float

    def summary(self) -> ChoiceSummary:
        """The compact form a page carries for each story (the reader page's "Why this story?")."""
        return ChoiceSummary(candidates=len(self.candidates), near_ties=[m["article_id"] for _, m in self.near_ties],
                             stepped_aside=list(self.stepped_aside))


def explain_edition_representative(story_id: str, members: Sequence[Member], story_centroid: Mapping[str, float],
                                   *, edition: str, region: str, is_local_story: bool, now: datetime,
                                   impressions: Mapping[str, float], weights: RepresentativeWeights
                                   ) -> RepresentativeChoice:
    """The representative for one story on one edition, with every step of the choice.

    Publishers that would pass ``daily_share_cap`` of the edition's representative impressions today
    (counted against at least ``cap_min_total``) step aside when another candidate exists; near-ties (within ``tie_margin``) prefer free
    articles and rotate by hash(story, edition, hour). Only a titled article is chosen.

    Raises:
        ValueError: No member has a title (page assembly skips such a story).
    """
    candidates = score_candidates(members, story_centroid, region=region, is_local_story=is_local_story, now=now,
                                  weights=weights)
    if not candidates:
        raise ValueError(f"story {story_id} has no titled article to stand for it")
    w = weights.impression_minutes
    budget = weights.daily_share_cap * max(sum(impressions.values()) + w, weights.cap_min_total * w)
    allowed = [sm for sm in candidates if impressions.get(sm[1]["publisher_id"], 0.0) + w <= budget]
    stepped_aside = sorted({m["publisher_id"] for _, m in candidates} - {m["publisher_id"] for _, m in allowed}) \
        if allowed else []
    scored = allowed or candidates
    best = scored[0][0]
    ties = [sm for sm in scored if sm[0] >= best - abs(best) * weights.tie_margin]
    free = [sm for sm in ties if not sm[1]["is_paywalled"]]
    ties = free or ties
    rotation = rotation_index(story_id, edition, now.replace(minute=0, second=0, microsecond=0), len(ties))
    return RepresentativeChoice(chosen=ties[rotation][1], candidates=tuple(candidates),
                                stepped_aside=tuple(stepped_aside), near_ties=tuple(ties), rotation=rotation,
                                budget_minutes=budget)


def choose_edition_representative(story_id: str, members: Sequence[Member], story_centroid: Mapping[str, float],
                                  *, edition: str, region: str, is_local_story: bool, now: datetime,
                                  impressions: Mapping[str, float], weights: RepresentativeWeights) -> Member:
    """The representative for one story on one edition (:func:`explain_edition_representative`'s choice).

    Raises:
        ValueError: No member has a title (page assembly skips such a story).
    """
    return explain_edition_representative(story_id, members, story_centroid, edition=edition, region=region,
                                          is_local_story=is_local_story, now=now, impressions=impressions,
                                          weights=weights).chosen


def supporting_links(representative: Member, members: Sequence[Member], *, count: int, mmr_lambda: float,
                     authority_first: bool = True) -> list[Member]:
    """Up to ``count`` originals by maximal marginal relevance, at most one per publisher (its first
    report), never the representative's publisher; then at most one copy of any wire story.

    Relevance is authority (free articles first among equals); redundancy is the cosine to the
    links already chosen.
    """
    first_per_publisher: dict[str, Member] = {}
    for m in sorted((m for m in members if not m["is_copy"]), key=lambda m: (m["first_seen_at"], m["article_id"])):
        first_per_publisher.setdefault(m["publisher_id"], m)
    pool = [m for p, m in sorted(first_per_publisher.items()) if p != representative["publisher_id"]]
    vectors = {m["article_id"]: term_vector(m) for m in pool}
    chosen: list[Member] = []
    chosen_vectors = [term_vector(representative)]
    while pool and len(chosen) < count:
        def value(m: Member) -> tuple[float, bool, datetime, str]:
            redundancy = max((cosine(vectors[m["article_id"]], v) for v in chosen_vectors), default=0.0)
            mmr = mmr_lambda * float(m["authority"] or 0) - (1 - mmr_lambda) * redundancy
            return (-round(mmr, 9), bool(m["is_paywalled"]), m["first_seen_at"], m["article_id"])
        pick = min(pool, key=value)
        chosen.append(pick)
        chosen_vectors.append(vectors[pick["article_id"]])
        pool.remove(pick)
    copies: dict[str, Member] = {}
    for m in sorted((m for m in members if m["is_copy"]), key=lambda m: (m["first_seen_at"], m["article_id"])):
        copies.setdefault(str(m.get("copy_of")), m)
    return chosen + sorted(copies.values(), key=lambda m: (m["first_seen_at"], m["article_id"]))
