"""Transform: one rank cycle's edition pages, pools and story snapshot, from what extract read.

:func:`rank_pages` is the middle step of a rank cycle (``flows/rank.py``: extract → transform →
load). It reads no store, clock or settings: the story aggregates, the registry, the page versions
live just before ``now`` and the rank parameters arrive as arguments. Two inputs are read on demand
behind a protocol, because which stories they are is decided here: the members of the stories a
page may list (:class:`StoryMembers`) and the entries of earlier story snapshots for stories a live
page lists that this cycle does not (:class:`PastStories`). The same inputs give the same bytes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol, TypedDict

import polars as pl

from transforms.clustering import ClusterParams, link_story_profiles, neutral_tokens
from transforms.page_json import PageMember, PublishedPage, StoryEntry, StorySnapshot
from transforms.pages import (
    POOL_SECTION,
    TOP_SECTION,
    EditionRules,
    StoryFacts,
    attach_links,
    build_ranked_pages,
    build_story_snapshot,
    carry_impressions,
    iso,
)
from transforms.ranking import BreakingRule, ScoreWeights, rank_editions, score_stories
from transforms.records import EditionPage, PoolPage, RankedStory
from transforms.representative import RepresentativeChoice
from transforms.story_fold import ListingRow
from transforms.story_scores import PartsParams, story_parts
from transforms.story_scores import story_sections as sections_frame

PAGE_CANDIDATE_SLACK = 40
"""Members are read up front for this many stories past a page's length (diversity may skip some);
any further story a page reaches is read on its own."""


class BreakingStory(TypedDict):
    """A story Breaking this cycle (the ``story.breaking`` event, the live stream, the feed boosts)."""

    story_id: str
    breaking_since: str | None
    editions: list[str]
    """The editions that pin it on top."""
    publisher_ids: list[str]
    """The publishers of its originals, whose feeds ingest polls faster for a while."""


class StoryMembers(Protocol):
    """Story id → its members as pages read them (``story_members.sql`` rows with ``embedding``),
    read on demand; ``tasks.aggregates.members.MemberSource`` reads them from the store."""

    def __getitem__(self, story_id: str) -> list[PageMember]: ...

    def prefetch(self, story_ids: Iterable[str]) -> None:
        """Read these stories' members in one pass (a read on demand otherwise)."""
        ...

    def was_listed(self, story_id: str, article_id: str, now: datetime) -> bool:
        """Whether a story snapshot published before ``now`` listed this member."""
        ...


class PastStories(Protocol):
    """Story entries of the story snapshots published before an instant
    (``tasks.rank.history.PageHistory``)."""

    def story_entries_before(self, story_ids: Iterable[str], at: datetime) -> dict[str, StoryEntry]: ...


@dataclass(frozen=True, slots=True)
class RankParams:
    """Everything a cycle's ranking and pages take besides the data; tasks fill it from RankSettings."""

    parts: PartsParams
    weights: ScoreWeights
    rule: BreakingRule
    editions: EditionRules
    ranking: Mapping[str, float]
    """The weights and rules behind the scores, published on each page (``ranking``)."""


@dataclass(frozen=True, slots=True)
class PageInputs:
    """What extract read for one cycle: the story aggregates as of ``now`` and the pages live just
    before it."""

    stories: pl.DataFrame
    """One row per story (``STORY_AGGREGATES_SCHEMA``)."""
    publishers: pl.DataFrame
    """The registry: publisher_id, name, region, language, authority, is_paywalled, is_opted_out."""
    aliases: Mapping[str, str]
    members: StoryMembers
    live_pages: Mapping[tuple[str, str], PublishedPage]
    """The version of each page live just before ``now``: every page, and the pool of each edition."""
    past: PastStories


@dataclass(frozen=True, slots=True)
class RankOutput:
    """One cycle's pages and story snapshot, ready to publish."""

    pages: dict[tuple[str, str], EditionPage | PoolPage]
    stories: StorySnapshot
    breaking: list[BreakingStory]
    listings: list[ListingRow] = field(default_factory=list)
    """Articles the story snapshot holds for the first time (``LISTINGS_SCHEMA`` rows), for the
    freshness dashboard: written once the pages are live, stamped with that moment."""
    choices: dict[tuple[str, str], RepresentativeChoice] = field(default_factory=dict)
    """How each (edition, story) representative was chosen (``newsroom explain``)."""


def editions_of(publishers: pl.DataFrame) -> pl.DataFrame:
    """Every edition (language + region) that has a publisher we may list: edition, language, region."""
    return (publishers.filter(~pl.col("is_opted_out")).select("language", "region").unique()
            .select(edition=pl.concat_str("language", pl.lit("-"), "region"), language="language", region="region")
            .sort("edition", nulls_last=False))


def story_facts_of(stories: pl.DataFrame, sections: Mapping[str, list[str]], publishers: pl.DataFrame
                   ) -> dict[str, StoryFacts]:
    """:class:`transforms.pages.StoryFacts` of some story rows, the representative joined to its
    publisher's registry entry."""
    pubs = {r["publisher_id"]: r for r in publishers.select(
        "publisher_id", "name", "region", "authority", "is_paywalled").to_dicts()}
    out = {}
    for r in stories.to_dicts():
        publisher = pubs.get(r["rep_publisher_id"], {})
        rep: PageMember = {
            "article_id": r["rep_article_id"], "publisher_id": r["rep_publisher_id"], "title": r["rep_title"],
            "snippet": r["rep_snippet"], "image_url": r["rep_image_url"], "url": r["rep_url"],
            "first_seen_at": r["rep_first_seen_at"], "is_copy": r["rep_is_copy"],
            "is_opinion": r["rep_is_opinion"], "language": r["rep_language"],
            "publisher": publisher.get("name"), "region": publisher.get("region"),
            "authority": publisher.get("authority"), "is_paywalled": publisher.get("is_paywalled")}
        out[r["story_id"]] = StoryFacts(r["story_id"], r["rep_language"], sections.get(r["story_id"], []),
                                        r["titled_count"] > 0, len(r["publishers"]), r["article_count"],
                                        r["first_seen_at"], r["last_seen_at"], rep)
    return out


def previous_story_ids(live_pages: Mapping[tuple[str, str], PublishedPage], editions: Iterable[str]
                       ) -> dict[tuple[str, str], list[str]]:
    """Story ids of each live page (and pool) of ``editions``, in order: what stability keeps."""
    wanted = set(editions)
    return {page: [s["story_id"] for s in payload["stories"]]
            for page, payload in sorted(live_pages.items()) if page[0] in wanted}


def page_candidates(rows: Iterable[RankedStory], previous: Mapping[tuple[str, str], list[str]],
                    params: EditionRules) -> set[str]:
    """Stories whose members a page will read: the best of each page, and its live version's."""
    out: set[str] = set()
    ranked: set[str] = set()
    for r in rows:
        ranked.add(r.story_id)
        limit = params.limits.top_stories if r.section == TOP_SECTION else params.limits.section_stories
        if r.section != POOL_SECTION and r.position <= limit + PAGE_CANDIDATE_SLACK:
            out.add(r.story_id)
    for ids in previous.values():
        out.update(s for s in ids if s in ranked)
    return out


def carry_live_stories(snapshot: StorySnapshot, live_pages: Mapping[tuple[str, str], PublishedPage], past: PastStories,
                       now: datetime) -> None:
    """Keep every story that a page live just before ``now`` lists in the story snapshot, in place.

    A page whose new version is refused, loses the pointer race or is never written (an error, a
    crash, a section that is no longer computed) keeps its live version, and that version must
    still open on Full Coverage. So a story that such a page lists, and that this cycle neither
    lists nor redirects (``aliases``), is copied as it was from the newest story snapshot published
    before ``now`` that holds it; its ``linked`` keeps only stories in this snapshot. Depends only
    on versions published before ``now``, so ``rebuild_as_of`` recomputes it byte for byte.
    """
    live: set[str] = set()
    for (_, section), page in live_pages.items():
        if section != POOL_SECTION:
            live.update(s["story_id"] for s in page.get("stories", []))
    stories = snapshot["stories"]
    carried = past.story_entries_before(live - stories.keys() - snapshot["aliases"].keys(), now)
    stories.update(carried)
    for sid, story in carried.items():
        if "linked" in story:
            stories[sid] = {**story, "linked": [link for link in story["linked"] if link["story_id"] in stories]}


def story_links(story_ids: Iterable[str], by_story: StoryMembers) -> dict[str, str]:
    """Cross-language links among ``story_ids`` (story id → group id).

    Each story's profile: its language, the language-neutral tokens (names, numbers) of its
    original articles, and their sentence embeddings (kept with the members, int8-quantized);
    :func:`transforms.clustering.link_story_profiles` decides.
    """
    ids = sorted(story_ids)
    if not ids:
        return {}
    language_of: dict[str, str] = {}
    tokens: dict[str, dict[str, float]] = defaultdict(dict)
    embeddings: dict[str, list[object]] = defaultdict(list)
    for sid in ids:
        for m in by_story[sid]:
            language_of.setdefault(sid, m["language"])
            if not m["is_copy"]:
                for token in neutral_tokens(m["entities"] or (), m["terms"] or ()):
                    tokens[sid][token] = tokens[sid].get(token, 0.0) + 1.0
                if m.get("embedding") is not None:
                    embeddings[sid].append(m["embedding"])
    return link_story_profiles(language_of, tokens, embeddings, ClusterParams())


def new_listings(snapshot: StorySnapshot, members: StoryMembers, now: datetime) -> list[ListingRow]:
    """The articles the snapshot lists that no snapshot before ``now`` listed, one row per article
    (the first story in id order), by article id."""
    listings = sorted(({"article_id": src["article_id"], "story_id": sid, "listed_at": now}
                       for sid, story in snapshot["stories"].items() for src in story["sources"]
                       if not members.was_listed(sid, src["article_id"], now)),
                      key=lambda r: (r["article_id"], r["story_id"]))
    return list({r["article_id"]: ListingRow(**r) for r in listings}.values())


def breaking_stories(breaking_rows: pl.DataFrame, ranked: pl.DataFrame, active: pl.DataFrame
                     ) -> list[BreakingStory]:
    """The Breaking stories of a cycle: since when, the editions pinning them on top, and the
    publishers of their originals (whose feeds ingest polls faster)."""
    pinned = ranked.filter(pl.col("is_pinned") & (pl.col("section") == TOP_SECTION))
    out = []
    for r in breaking_rows.to_dicts():
        found = active.filter(pl.col("story_id") == r["story_id"])["publishers"].to_list()
        out.append(BreakingStory(
            story_id=r["story_id"], breaking_since=iso(r["breaking_since"]),
            editions=sorted(pinned.filter(pl.col("story_id") == r["story_id"])["edition"].to_list()),
            publisher_ids=sorted(found[0]) if found else []))
    return sorted(out, key=lambda b: b["story_id"])


def _sections_by_story(story_sections: pl.DataFrame) -> dict[str, list[str]]:
    sections_of: dict[str, list[str]] = defaultdict(list)
    for sid, sec in story_sections.iter_rows():
        sections_of[sid].append(sec)
    return sections_of


def rank_pages(inputs: PageInputs, now: datetime, params: RankParams) -> RankOutput:
    """Every edition page, pool and the story snapshot as of ``now``.

    Scores the stories (:func:`transforms.story_scores.story_parts`,
    :func:`transforms.ranking.score_stories`), ranks each edition's sections
    (:func:`transforms.ranking.rank_editions`), assembles the pages
    (:func:`transforms.pages.build_ranked_pages`) and Full Coverage, and names the Breaking
    stories and the newly listed articles.
    """
    publishers = inputs.publishers
    parts = story_parts(inputs.stories, publishers.select("publisher_id", "authority", "region"), now=now,
                        params=params.parts)
    editions = editions_of(publishers)
    active = inputs.stories.filter(pl.col("story_id").is_in(parts["story_id"].implode()))
    story_sections = sections_frame(active)
    rules = params.editions
    scored = score_stories(parts.lazy(), now=now, weights=params.weights, rule=params.rule,
                           story_sections=story_sections.lazy())
    ranked = rank_editions(scored, story_sections.lazy(), editions.lazy(), weights=params.weights, rule=params.rule,
                           top_k={TOP_SECTION: max(rules.pool_stories, rules.limits.top_stories * 3)},
                           default_k=rules.limits.section_stories * 3).collect()
    edition_names = editions["edition"].to_list()
    previous = previous_story_ids(inputs.live_pages, edition_names)
    impressions = {e: carry_impressions(inputs.live_pages.get((e, POOL_SECTION)), now) for e in edition_names}
    regions = dict(zip(editions["edition"].to_list(), editions["region"].to_list(), strict=True))
    breaking_rows = scored.filter(pl.col("is_breaking")).select("story_id", "breaking_since").collect()
    wanted = set(ranked["story_id"].to_list()) | set(breaking_rows["story_id"].to_list())
    facts = story_facts_of(active.filter(pl.col("story_id").is_in(sorted(wanted))),
                           _sections_by_story(story_sections), publishers)
    rows = [RankedStory.from_row(r) for r in ranked.to_dicts()]
    inputs.members.prefetch(page_candidates(rows, previous, rules))
    choices: dict[tuple[str, str], RepresentativeChoice] = {}
    pages, listed = build_ranked_pages(rows, facts, inputs.members, now, rules, previous=previous,
                                       impressions=impressions, regions=regions, choices=choices)
    pages = {key: replace(page, ranking=params.ranking) if isinstance(page, EditionPage) else page
             for key, page in pages.items()}
    stories = build_story_snapshot(listed, inputs.members, now, inputs.aliases)
    attach_links(stories, story_links(stories["stories"], inputs.members))
    carry_live_stories(stories, inputs.live_pages, inputs.past, now)
    return RankOutput(pages, stories, breaking_stories(breaking_rows, ranked, active),
                      new_listings(stories, inputs.members, now), choices)


