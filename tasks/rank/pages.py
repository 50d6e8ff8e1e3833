"""The pages of one cycle as of ``now``, computed from the store (``compute_pages``)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from tasks.aggregates.cycle import (
    update_aggregates,
)
from tasks.aggregates.members import AggregateView, Registry
from tasks.rank.history import PageHistory
from tasks.rank.params import (
    breaking_rule,
    edition_rules,
    parts_params,
    ranking_rules,
    score_weights,
)
from tasks.settings import RankSettings
from transforms.clustering import ClusterParams, link_story_profiles, neutral_tokens
from transforms.pages import (
    POOL_SECTION,
    TOP_SECTION,
    StoryFacts,
    attach_links,
    build_ranked_pages,
    build_story_snapshot,
    carry_impressions,
    iso,
)
from transforms.ranking import rank_editions, score_stories
from transforms.records import RankedStory
from transforms.representative import RepresentativeChoice
from transforms.story_scores import story_parts
from transforms.story_scores import story_sections as sections_frame
from warehouse.aggregates import AggregatesUnreadableError
from warehouse.store import ObjectStore

log = logging.getLogger(__name__)

Pages = dict[tuple[str, str], dict[str, Any]]

@dataclass(frozen=True, slots=True)
class RankOutput:
    pages: Pages
    stories: dict[str, Any]
    breaking: list[dict[str, Any]]
    listings: list[dict[str, Any]] = field(default_factory=list)
    """Articles the story snapshot holds for the first time (``LISTINGS_SCHEMA`` rows), for the
    freshness dashboard: written once the pages are live, stamped with that moment."""
    choices: dict[tuple[str, str], RepresentativeChoice] = field(default_factory=dict)
    """How each (edition, story) representative was chosen (``newsroom explain``)."""


def compute_pages(store: ObjectStore, now: datetime, settings: RankSettings,
                  history: PageHistory | None = None, view: AggregateView | None = None) -> RankOutput:
    """Every edition page, pool and the story snapshot as of ``now``, from the store alone.

    Args:
        view: The story aggregates as of ``now``; by default the stored ones with what the logs
            gained since, folded without writing anything (:func:`tasks.aggregates.cycle.update_aggregates`).
    """
    history = history or PageHistory(store)
    if view is not None:
        return _compute_pages(view, now, settings, history)
    return pages_and_aggregates(store, now, settings, history, persist=False)[0]


def pages_and_aggregates(store: ObjectStore, now: datetime, settings: RankSettings, history: PageHistory, *,
                         persist: bool) -> tuple[RankOutput, AggregateView]:
    """The pages as of ``now`` from the story aggregates, folded (and with ``persist``, committed).

    A member layer that turns out unreadable only when a page reads it (named in the damage
    record) makes the cycle rebuild the aggregates from the logs and compute the pages again
    (issue 16: one bad object is never a reason to stop).
    """
    view = update_aggregates(store, now, settings, persist=persist)
    try:
        return _compute_pages(view, now, settings, history), view
    except AggregatesUnreadableError:
        view = update_aggregates(store, now, settings, persist=persist, rebuild="aggregates unreadable")
        return _compute_pages(view, now, settings, PageHistory(store)), view


def editions_of(publishers: pl.DataFrame) -> pl.DataFrame:
    """Every edition (language + region) that has a publisher we may list: edition, language, region."""
    return (publishers.filter(~pl.col("is_opted_out")).select("language", "region").unique()
            .select(edition=pl.concat_str("language", pl.lit("-"), "region"), language="language", region="region")
            .sort("edition", nulls_last=False))


def story_facts_of(stories: pl.DataFrame, sections: Mapping[str, list[str]], registry: Registry
                   ) -> dict[str, StoryFacts]:
    """:class:`transforms.pages.StoryFacts` of some story rows, the representative joined to its
    publisher's registry entry."""
    pubs = {r["publisher_id"]: r for r in registry.publishers.select(
        "publisher_id", "name", "region", "authority", "is_paywalled").to_dicts()}
    out = {}
    for r in stories.to_dicts():
        publisher = pubs.get(r["rep_publisher_id"], {})
        rep = {"article_id": r["rep_article_id"], "publisher_id": r["rep_publisher_id"], "title": r["rep_title"],
               "snippet": r["rep_snippet"], "image_url": r["rep_image_url"], "url": r["rep_url"],
               "first_seen_at": r["rep_first_seen_at"], "is_copy": r["rep_is_copy"],
               "is_opinion": r["rep_is_opinion"], "language": r["rep_language"],
               "publisher": publisher.get("name"), "region": publisher.get("region"),
               "authority": publisher.get("authority"), "is_paywalled": publisher.get("is_paywalled")}
        out[r["story_id"]] = StoryFacts(r["story_id"], r["rep_language"], sections.get(r["story_id"], []),
                                        r["titled_count"] > 0, len(r["publishers"]), r["article_count"],
                                        r["first_seen_at"], r["last_seen_at"], rep)
    return out


PAGE_CANDIDATE_SLACK = 40
"""Members are read up front for this many stories past a page's length (diversity may skip some);
any further story a page reaches is read on its own."""


def _compute_pages(view: AggregateView, now: datetime, settings: RankSettings, history: PageHistory) -> RankOutput:
    registry = view.registry
    publishers = registry.publishers
    parts = story_parts(view.stories, publishers.select("publisher_id", "authority", "region"), now=now,
                        params=parts_params(settings))
    editions = editions_of(publishers)
    aliases = view.aliases
    active = view.stories.filter(pl.col("story_id").is_in(parts["story_id"].implode()))
    story_sections = sections_frame(active)
    sections_of: dict[str, list[str]] = defaultdict(list)
    for sid, sec in story_sections.iter_rows():
        sections_of[sid].append(sec)
    weights, rule = score_weights(settings), breaking_rule(settings)
    scored = score_stories(parts.lazy(), now=now, weights=weights, rule=rule, story_sections=story_sections.lazy())
    ranked = rank_editions(scored, story_sections.lazy(), editions.lazy(), weights=weights, rule=rule,
                           top_k={TOP_SECTION: max(settings.pool_stories, settings.top_stories * 3)},
                           default_k=settings.section_stories * 3).collect()
    edition_names = editions["edition"].to_list()
    previous = {}
    for edition, section in history.pages():
        if edition in edition_names:
            page = history.live_at(edition, section, now, strict=True)
            if page is not None:
                previous[(edition, section)] = [s["story_id"] for s in page["stories"]]
    impressions = {e: carry_impressions(history.live_at(e, POOL_SECTION, now, strict=True), now)
                   for e in edition_names}
    regions = dict(zip(editions["edition"].to_list(), editions["region"].to_list(), strict=True))
    breaking_rows = scored.filter(pl.col("is_breaking")).select("story_id", "breaking_since").collect()
    wanted = set(ranked["story_id"].to_list()) | set(breaking_rows["story_id"].to_list())
    facts = story_facts_of(active.filter(pl.col("story_id").is_in(sorted(wanted))), sections_of, registry)
    rows = ranked.to_dicts()
    view.members.prefetch(_page_candidates(rows, previous, settings))
    choices: dict[tuple[str, str], RepresentativeChoice] = {}
    pages, listed = build_ranked_pages([RankedStory.from_row(r) for r in rows], facts, view.members, now,
                                       edition_rules(settings), previous=previous, impressions=impressions,
                                       regions=regions, choices=choices)
    rules = ranking_rules(settings)
    for (_, section), payload in pages.items():
        if section != POOL_SECTION:
            payload["ranking"] = rules
    stories = build_story_snapshot(listed, view.members, now, aliases)
    attach_links(stories, story_links(stories["stories"], view.members))
    carry_live_stories(stories, history, now)
    listings = sorted(({"article_id": src["article_id"], "story_id": sid, "listed_at": now}
                       for sid, story in stories["stories"].items() for src in story["sources"]
                       if not view.members.was_listed(sid, src["article_id"], now)),
                      key=lambda r: (r["article_id"], r["story_id"]))
    pinned = ranked.filter(pl.col("is_pinned") & (pl.col("section") == TOP_SECTION))
    breaking = [
        {"story_id": r["story_id"], "breaking_since": iso(r["breaking_since"]),
         "editions": sorted(pinned.filter(pl.col("story_id") == r["story_id"])["edition"].to_list()),
         "publisher_ids": _original_publishers(active, r["story_id"])}
        for r in breaking_rows.to_dicts()
    ]
    unique = list({r["article_id"]: r for r in listings}.values())
    return RankOutput(pages, stories, sorted(breaking, key=lambda b: b["story_id"]), unique, choices)


def _original_publishers(stories: pl.DataFrame, story_id: str) -> list[str]:
    found = stories.filter(pl.col("story_id") == story_id)["publishers"].to_list()
    return sorted(found[0]) if found else []


def _page_candidates(rows: Iterable[Mapping[str, Any]], previous: Mapping[tuple[str, str], list[str]],
                     settings: RankSettings) -> set[str]:
    """Stories whose members a page will read: the best of each page, and its live version's."""
    out: set[str] = set()
    for r in rows:
        limit = settings.top_stories if r["section"] == TOP_SECTION else settings.section_stories
        if r["section"] != POOL_SECTION and r["position"] <= limit + PAGE_CANDIDATE_SLACK:
            out.add(r["story_id"])
    ranked = {r["story_id"] for r in rows}
    for ids in previous.values():
        out.update(s for s in ids if s in ranked)
    return out


def carry_live_stories(snapshot: dict[str, Any], history: PageHistory, now: datetime) -> None:
    """Keep every story that a page live just before ``now`` lists in the story snapshot, in place.

    A page whose new version is refused, loses the pointer race or is never written (an error, a
    crash, a section that is no longer computed) keeps its live version, and that version must
    still open on Full Coverage. So a story that such a page lists, and that this cycle neither
    lists nor redirects (``aliases``), is copied as it was from the newest story snapshot published
    before ``now`` that holds it; its ``linked`` keeps only stories in this snapshot. Depends only
    on versions published before ``now``, so ``rebuild_as_of`` recomputes it byte for byte.
    """
    live: set[str] = set()
    for edition, section in history.pages():
        if section != POOL_SECTION:
            page = history.live_at(edition, section, now, strict=True)
            live.update(s["story_id"] for s in (page or {}).get("stories", []))
    stories = snapshot["stories"]
    carried = history.story_entries_before(live - stories.keys() - snapshot["aliases"].keys(), now)
    stories.update(carried)
    for sid, story in carried.items():
        if "linked" in story:
            stories[sid] = dict(story, linked=[link for link in story["linked"] if link["story_id"] in stories])


def story_links(story_ids: Iterable[str], by_story: Mapping[str, list[dict[str, Any]]]) -> dict[str, str]:
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
    embeddings: dict[str, list[Any]] = defaultdict(list)
    for sid in ids:
        for m in by_story[sid]:
            language_of.setdefault(sid, m["language"])
            if not m["is_copy"]:
                for token in neutral_tokens(m["entities"] or (), m["terms"] or ()):
                    tokens[sid][token] = tokens[sid].get(token, 0.0) + 1.0
                if m.get("embedding") is not None:
                    embeddings[sid].append(m["embedding"])
    return link_story_profiles(language_of, tokens, embeddings, ClusterParams())

