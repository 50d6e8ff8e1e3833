"""Assemble edition pages and Full Coverage from scored stories and their member articles.

Pure: rows in, JSON-ready dicts out. Every ordering has an explicit tie-breaker, so the same inputs
give the same bytes.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

TOP_SECTION = "top"
PAGE_SOURCES = 6
_SLUG = re.compile(r"[^a-z0-9]+")
GENERIC_SECTIONS = frozenset({"top", "top-stories", "news", "home", "latest", "general", "headlines", "all"})
"""Feed hints that name no topic: they never become a section page."""


@dataclass(frozen=True, slots=True)
class PageLimits:
    top_stories: int = 30
    section_stories: int = 20
    min_section_stories: int = 3


def section_slug(raw: str | None) -> str | None:
    """A section name as a URL-safe slug; generic hints ("Top Stories", "News") are no section.

    >>> section_slug("World News"), section_slug("  "), section_slug(None), section_slug("Top Stories")
    ('world-news', None, None, None)
    """
    if not raw:
        return None
    slug = _SLUG.sub("-", raw.lower()).strip("-")[:48]
    return slug if slug and slug not in GENERIC_SECTIONS else None


def iso(ts: datetime | None) -> str | None:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ") if ts is not None else None


def choose_representative(members: list[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The original with the highest authority; ties go to the first report, then the id."""
    originals = [m for m in members if not m["is_copy"]] or list(members)
    return min(originals, key=lambda m: (-float(m["authority"] or 0), m["first_seen_at"], m["article_id"]))


def _source(m: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "article_id": m["article_id"], "publisher_id": m["publisher_id"], "publisher": m["publisher"],
        "title": m["title"], "url": m["url"], "first_seen_at": iso(m["first_seen_at"]),
        "is_copy": bool(m["is_copy"]), "is_opinion": bool(m["is_opinion"]),
        "is_paywalled": bool(m["is_paywalled"]), "region": m["region"],
    }


def story_sections(members: list[Mapping[str, Any]]) -> list[str]:
    """The sections most of a story's articles agree on (ties keep every leader)."""
    counts = Counter(s for s in (section_slug(m["section"]) for m in members) if s)
    if not counts:
        return []
    best = max(counts.values())
    return sorted(s for s, c in counts.items() if c == best)


def build_story(story_id: str, members: list[Mapping[str, Any]], *, full: bool) -> dict[str, Any]:
    """One story object: the representative first, then one source per publisher, then copies."""
    rep = choose_representative(members)
    originals = [m for m in members if not m["is_copy"]]
    per_publisher: dict[str, Mapping[str, Any]] = {}
    for m in sorted(originals, key=lambda m: (m["first_seen_at"], m["article_id"])):
        per_publisher.setdefault(m["publisher_id"], m)
    others = sorted((m for m in per_publisher.values() if m["article_id"] != rep["article_id"]),
                    key=lambda m: (-float(m["authority"] or 0), m["first_seen_at"], m["article_id"]))
    copies = sorted((m for m in members if m["is_copy"]), key=lambda m: (m["first_seen_at"], m["article_id"]))
    if full:
        ordered = sorted(members, key=lambda m: (m["first_seen_at"], m["article_id"]))
    else:
        ordered = ([rep, *others, *copies])[:PAGE_SOURCES]
    return {
        "story_id": story_id,
        "title": rep["title"],
        "snippet": rep["snippet"],
        "image_url": rep["image_url"],
        "language": rep["language"],
        "sections": story_sections(members),
        "first_seen_at": iso(min(m["first_seen_at"] for m in members)),
        "updated_at": iso(max(m["first_seen_at"] for m in members)),
        "source_count": len({m["publisher_id"] for m in originals}),
        "article_count": len(members),
        "representative_id": rep["article_id"],
        "sources": [_source(m) for m in ordered],
    }


def build_pages(
    scores: Iterable[Mapping[str, Any]],
    members: Iterable[Mapping[str, Any]],
    now: datetime,
    limits: PageLimits,
    aliases: Mapping[str, str] | None = None,
) -> tuple[dict[tuple[str, str], dict[str, Any]], dict[str, Any]]:
    """Edition pages keyed by (edition, section), and the story snapshot covering every listed story.

    ``aliases`` maps a merged-away story id to the story that absorbed it (from the repair's
    ``merge`` changes); chains are followed, and an alias is kept only when its final survivor
    is in the snapshot, so serving answers 301 only to a page that exists (issue 4).
    """
    by_story: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for m in members:
        by_story[m["story_id"]].append(m)
    by_edition: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for s in scores:
        if s["story_id"] in by_story:
            by_edition[s["edition"]].append(s)
    cards = {sid: build_story(sid, ms, full=False) for sid, ms in by_story.items()}
    pages: dict[tuple[str, str], dict[str, Any]] = {}
    listed: dict[str, set[str]] = defaultdict(set)
    for edition, rows in sorted(by_edition.items()):
        ranked = sorted(rows, key=lambda r: (-round(float(r["score"]), 6), r["story_id"]))
        pages[(edition, TOP_SECTION)] = _page(edition, TOP_SECTION, ranked[: limits.top_stories], cards, now)
        sections: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for r in ranked:
            for section in cards[r["story_id"]]["sections"]:
                sections[section].append(r)
        for section, section_rows in sorted(sections.items()):
            if len(section_rows) >= limits.min_section_stories and section != TOP_SECTION:
                pages[(edition, section)] = _page(edition, section, section_rows[: limits.section_stories], cards, now)
        for page in (p for (e, _), p in pages.items() if e == edition):
            for story in page["stories"]:
                listed[story["story_id"]].add(edition)
    full = {}
    for sid in sorted(listed):
        story = build_story(sid, by_story[sid], full=True)
        story["editions"] = sorted(listed[sid])
        full[sid] = story
    stories = {"schema": "newsroom.stories/1", "as_of": iso(now), "stories": full,
               "aliases": resolve_aliases(aliases or {}, full)}
    return pages, stories


def resolve_aliases(aliases: Mapping[str, str], live: Mapping[str, Any]) -> dict[str, str]:
    """Each merged id mapped to its final survivor, kept only when that survivor is live.

    >>> resolve_aliases({"a": "b", "b": "c", "x": "y"}, {"c": {}})
    {'a': 'c', 'b': 'c'}
    """
    out: dict[str, str] = {}
    for merged in sorted(aliases):
        target, hops = aliases[merged], 0
        while target in aliases and hops < len(aliases):
            target, hops = aliases[target], hops + 1
        if target in live and merged not in live:
            out[merged] = target
    return out


def _page(edition: str, section: str, rows: list[Mapping[str, Any]], cards: Mapping[str, dict[str, Any]],
          now: datetime) -> dict[str, Any]:
    stories = []
    for rank, r in enumerate(rows, start=1):
        card = dict(cards[r["story_id"]])
        card["rank"] = rank
        card["score"] = round(float(r["score"]), 4)
        card["score_parts"] = {
            "coverage": round(float(r["coverage"]), 4),
            "freshness": round(float(r["freshness"]), 4),
            "regional_share": round(float(r["regional_share"]), 4),
        }
        stories.append(card)
    return {"schema": "newsroom.page/1", "edition": edition, "section": section, "as_of": iso(now),
            "stories": stories}


def validate_page(new: Mapping[str, Any], previous: Mapping[str, Any] | None, *, min_stories: int,
                  max_loss: float) -> str | None:
    """Why a page version must not go live, or None when it may."""
    stories = new.get("stories") or []
    if len(stories) < min_stories:
        return f"{len(stories)} stories, fewer than {min_stories}"
    missing = [s["story_id"] for s in stories if not s.get("sources") or not s.get("title")]
    if missing:
        return f"stories without a representative: {missing[:5]}"
    ids = [s["story_id"] for s in stories]
    if len(set(ids)) != len(ids):
        return "a story is listed twice"
    if previous is not None:
        before = len(previous.get("stories") or [])
        if before >= 4 and len(stories) < before * (1 - max_loss):
            return f"{len(stories)} stories after {before}: more than {max_loss:.0%} lost in one cycle"
    return None
