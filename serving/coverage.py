"""Full Coverage: a story snapshot's entry with the views a reader's story page shows.

Derived here, on each replica, from the story's sources (``timeline``, ``publishers``,
``local_sources``, ``opinion_count``), so the published snapshot carries each article once; and,
for a story no valid snapshot holds, the story as the served pages' cards show it (issue 32).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict, cast

from warehouse.snapshot_json import SourceJson, StoryJson


class PublisherCoverageJson(TypedDict):
    """One publisher that covered a story, and how many of its articles the story holds."""

    publisher_id: str
    publisher: str | None
    region: str | None
    article_count: int


class FullCoverageJson(StoryJson, total=False):
    """A story as ``GET /v1/stories/{story_id}`` answers it: the snapshot's entry plus its views."""

    timeline: list[SourceJson]
    publishers: list[PublisherCoverageJson]
    local_sources: dict[str, list[str]]
    opinion_count: int
    is_partial: bool


TOP_SECTION = "top"
"""The front page's section: first among an edition's sections."""


def _region_of(edition: str) -> str:
    """``en-US`` -> ``US``: the region whose publishers are local to an edition."""
    return edition.rpartition("-")[2].upper()


def full_coverage(story: StoryJson) -> FullCoverageJson:
    """A story snapshot entry with the Full Coverage views derived from its sources.

    Adds ``timeline`` (every article, oldest first), ``publishers`` (who covered it, most articles
    first), ``local_sources`` (per edition, the articles from publishers in that edition's
    region), ``opinion_count``, and ``linked`` (the same story in other languages; empty when the
    snapshot has none). Each source gets ``is_opinion`` (false when the snapshot does not say).
    """
    out = cast("FullCoverageJson", dict(story))
    sources = [cast("SourceJson", dict(s, is_opinion=bool(s.get("is_opinion", False))))
               for s in story.get("sources") or []]
    out["sources"] = sources
    out["timeline"] = sorted(sources, key=lambda s: (str(s.get("first_seen_at")), str(s.get("article_id"))))
    publishers: dict[str, PublisherCoverageJson] = {}
    for s in sources:
        entry = publishers.setdefault(
            str(s["publisher_id"]),
            {"publisher_id": s["publisher_id"], "publisher": s.get("publisher"), "region": s.get("region"),
             "article_count": 0},
        )
        entry["article_count"] += 1
    out["publishers"] = sorted(
        publishers.values(), key=lambda p: (-p["article_count"], str(p["publisher"]), p["publisher_id"])
    )
    editions = [str(e) for e in story.get("editions") or []]
    out["local_sources"] = {
        edition: [
            s["article_id"]
            for s in sources
            if isinstance(s.get("region"), str) and s["region"].upper() == _region_of(edition)
        ]
        for edition in editions
    }
    out["opinion_count"] = sum(1 for s in sources if s["is_opinion"])
    linked = story.get("linked")
    out["linked"] = list(linked) if isinstance(linked, list) else []
    return out


PAGE_ONLY_FIELDS = ("rank", "score", "score_parts", "representative_choice")
"""Fields of a story card that describe its place on one page, not the story."""


def story_from_cards(story_id: str, pages: Mapping[tuple[str, str], Sequence[StoryJson]]
                     ) -> tuple[list[str], FullCoverageJson]:
    """A story no valid story snapshot holds, as the served pages' cards show it: the first card's
    fields (pages in order: edition, ``top`` first, section), the articles of every card merged and
    oldest first, ``editions`` those of the pages listing it, and ``is_partial`` (other articles of
    the story may exist). Returns the pages listing it (``edition/section``) and the story."""
    where: list[str] = []
    cards: list[StoryJson] = []
    for (edition, section), listed in sorted(pages.items(), key=lambda kv: (kv[0][0], kv[0][1] != TOP_SECTION,
                                                                           kv[0][1])):
        for card in listed:
            if card["story_id"] == story_id:
                where.append(f"{edition}/{section}")
                cards.append(card)
    story = cast("FullCoverageJson", {k: v for k, v in cards[0].items() if k not in PAGE_ONLY_FIELDS})
    sources: dict[str, SourceJson] = {}
    for card in cards:
        for source in card.get("sources") or []:
            if isinstance(source, dict):
                sources.setdefault(str(source.get("article_id")), source)
    story["sources"] = sorted(sources.values(), key=lambda s: (str(s.get("first_seen_at")), str(s.get("article_id"))))
    story["editions"] = sorted({w.split("/", 1)[0] for w in where})
    story["is_partial"] = True
    return where, story
