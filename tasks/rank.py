"""Rank & publish: score stories per edition (DuckDB SQL + polars), assemble pages, validate, publish.

Everything a page depends on is read from the store as it was at ``now``: the logs (articles,
story changes), the registry, and the page versions published just before ``now`` (the previous
version of each page, for stability and for the stories the story snapshot keeps; the edition's
previous pool, which carries the day's representative impressions for the 10% cap), and the story
snapshots published before ``now``. So ``rebuild_as_of`` can recompute a past minute
byte for byte, as far back as page versions are kept.

Side effects of a cycle besides pages (issue 5, documented in docs/snapshots.md):
- ``log/events/story.breaking/<story_id>.json``: one event when a story first turns Breaking;
- ``state/boosts/feeds.json``: ``{publisher_id: until}`` for the publishers of Breaking stories,
  for ingest to poll their feeds faster until then (conditional put);
- ``log/events/live/``: the same Breaking news keyed by time, for serving's live stream, and
  ``pages/search/``: the search index of the live window (issue 30; ``tasks/live.py``,
  ``tasks/search.py``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks import events
from tasks.aggregates import (
    AggregateView,
    Registry,
    aggregates_from_logs,
    record_member_cache,
    update_aggregates,
)
from tasks.crashpoints import crash_point
from tasks.live import record_live_breaking
from tasks.progress import NO_PROGRESS, Progress, counted
from tasks.search import publish_search
from tasks.settings import RankSettings
from transforms.clustering import ClusterParams, link_story_profiles, neutral_tokens
from transforms.diversity import DiversityRule
from transforms.pages import (
    POOL_SECTION,
    TOP_SECTION,
    EditionRules,
    PageLimits,
    StoryFacts,
    attach_links,
    build_ranked_pages,
    build_story_snapshot,
    carry_impressions,
    iso,
    validate_page,
    validate_pool,
)
from transforms.ranking import BreakingRule, ScoreWeights, rank_editions, score_stories
from transforms.records import RankedStory
from transforms.representative import RepresentativeChoice, RepresentativeWeights
from transforms.story_scores import PartsParams, story_parts
from transforms.story_scores import story_sections as sections_frame
from warehouse import layout
from warehouse.aggregates import AggregatesUnreadableError
from warehouse.damage import collect_damage, describe_error, record_damage
from warehouse.errors import ObjectNotFoundError, PreconditionFailedError, SnapshotNotFoundError
from warehouse.schemas import LISTINGS_SCHEMA
from warehouse.snapshots import (
    PagePointer,
    PublishResult,
    dump_snapshot,
    publish_page,
    publish_stories,
    published_story_snapshots,
    read_json_payload,
    read_pointer,
    read_stories_pointer,
    rollback_page,
)
from warehouse.store import ObjectStore
from warehouse.tables import content_segment_id, rows_to_table, write_segment

log = logging.getLogger(__name__)

Pages = dict[tuple[str, str], dict[str, Any]]
ROLLBACK_EVENT = "page.rollback"
# How many story snapshot versions, newest first, a cycle searches for a live page's story.
CARRY_SEARCH_VERSIONS = 5


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


def score_params(now: datetime, s: RankSettings) -> dict[str, Any]:
    return {
        "now": now, "coverage_window_hours": s.coverage_window_hours, "half_life_hours": s.freshness_half_life_hours,
        "active_hours": s.active_hours, "velocity_window_minutes": s.velocity_window_minutes,
        "cycle_seconds": s.cycle_seconds, "smoothing_cycles": s.smoothing_cycles,
        "burst_window_minutes": s.burst_window_minutes, "burst_min_articles": s.burst_min_articles,
        "burst_min_publishers": s.burst_min_publishers, "burst_authority_floor": s.burst_authority_floor,
        "breaking_hours": s.breaking_hours, "breaking_new_story_minutes": s.breaking_new_story_minutes,
    }


def score_weights(s: RankSettings) -> ScoreWeights:
    return ScoreWeights(coverage=s.coverage_weight, velocity=s.velocity_weight, freshness=s.freshness_weight,
                        regional=s.regional_weight, smoothing_cycles=s.smoothing_cycles)


def breaking_rule(s: RankSettings) -> BreakingRule:
    return BreakingRule(max_tail=s.burst_max_tail, baseline_floor=s.burst_baseline_floor,
                        breaking_hours=s.breaking_hours, min_regional_share=s.breaking_min_regional_share)


def ranking_rules(s: RankSettings) -> dict[str, float]:
    """The weights and rules behind a page's scores, published on each page so a reader can see how
    ``score_parts`` become the ``score`` (the reader page's "Why this story?", issue 18)."""
    return {
        "coverage_weight": s.coverage_weight, "velocity_weight": s.velocity_weight,
        "freshness_weight": s.freshness_weight, "regional_weight": s.regional_weight,
        "smoothing_cycles": s.smoothing_cycles, "freshness_half_life_hours": s.freshness_half_life_hours,
        "coverage_window_hours": s.coverage_window_hours, "breaking_hours": s.breaking_hours,
        "publisher_daily_share_cap": s.publisher_daily_share_cap,
        "representative_tie_margin": s.representative_tie_margin,
    }


def edition_rules(s: RankSettings) -> EditionRules:
    return EditionRules(
        limits=PageLimits(s.top_stories, s.section_stories, s.min_section_stories),
        swap_margin=s.swap_margin,
        diversity=DiversityRule(s.max_section_share_top10, s.max_centroid_cosine, s.fresh_slot_rank),
        fresh_minutes=s.fresh_slot_minutes,
        representative=RepresentativeWeights(half_life_hours=s.freshness_half_life_hours,
                                             window_hours=s.coverage_window_hours,
                                             tie_margin=s.representative_tie_margin,
                                             daily_share_cap=s.publisher_daily_share_cap,
                                             supporting=s.supporting_links,
                                             cap_min_total=float(s.top_stories),
                                             impression_minutes=s.cycle_seconds / 60),
        pool_stories=s.pool_stories,
    )


class PageHistory:
    """Published page versions read from the store; versions are immutable, so they are cached.

    A version counts as published only if a pointer move made it live: its number is at most the
    pointer's high water and not among the pointer's orphans (written by a publisher that died, or
    lost a race, before moving the pointer). Rollbacks come from ``log/events/page.rollback/`` and
    from the pointer itself, so one whose event was never written still counts.
    """

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._payloads: dict[str, dict[str, Any]] = {}
        self._versions: dict[tuple[str, str], list[tuple[int, str]]] = {}
        self._listed = False
        self._story_versions: list[tuple[int, str]] = []
        self._rollback_events: dict[tuple[str, str], list[tuple[str, int]]] | None = None
        self._pointers: dict[tuple[str, str] | None, PagePointer | None] = {}

    def pages(self) -> list[tuple[str, str]]:
        """Every page with a stored version; one listing of ``pages/`` serves every page."""
        if not self._listed:
            found: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
            for key in self._store.list(layout.PAGES_PREFIX):
                parts = key.split("/")
                name = parts[-1]
                if not (name.startswith("v") and name.endswith(".json") and name[1:-5].isdigit()):
                    continue
                if len(parts) == 4 and parts[1] != layout.STORIES_PAGE:
                    found[(parts[1], parts[2])].append((int(name[1:-5]), key))
                elif len(parts) == 3 and parts[1] == layout.STORIES_PAGE:
                    self._story_versions.append((int(name[1:-5]), key))
            self._versions = {page: sorted(v) for page, v in found.items()}
            self._story_versions.sort()
            self._listed = True
        return sorted(self._versions)

    def story_versions(self) -> list[tuple[int, str]]:
        """Every story snapshot version as (version, key), oldest first."""
        self.pages()
        return self._story_versions

    def versions(self, edition: str, section: str) -> list[tuple[int, str]]:
        self.pages()
        return self._versions.get((edition, section), [])

    def payload(self, key: str) -> dict[str, Any] | None:
        """A stored version's (or event's) payload; None, recorded, when it is unreadable or gone."""
        if key not in self._payloads:
            payload = read_json_payload(self._store, key)
            if payload is None:
                return None
            self._payloads[key] = payload
        return self._payloads[key]

    def pointer(self, page: tuple[str, str] | None) -> PagePointer | None:
        """A page's pointer (None: the story snapshot's), read once.

        An unreadable pointer is recorded and made up from the stored versions (every one counts
        as published): the page's history goes on from its newest valid version, and the publish
        replaces the pointer (issue 16).
        """
        if page not in self._pointers:
            try:
                pointer = read_pointer(self._store, *page) if page else read_stories_pointer(self._store)
            except SnapshotNotFoundError as e:
                record_damage(e.key or "", f"corrupt: {e.reason}", "history read from the stored versions")
                pointer = self._made_up_pointer(page)
            self._pointers[page] = pointer
        return self._pointers[page]

    def _made_up_pointer(self, page: tuple[str, str] | None) -> PagePointer | None:
        versions = self.versions(*page) if page else self.story_versions()
        if not versions:
            return None
        newest, key = versions[-1]
        return PagePointer(newest, key, "", "", high_water=newest)

    def _rollbacks(self) -> dict[tuple[str, str], list[tuple[str, int]]]:
        if self._rollback_events is None:
            found: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
            for key in self._store.list(f"{layout.EVENTS_PREFIX}{ROLLBACK_EVENT}/"):
                event = self.payload(key)
                try:
                    assert event is not None
                    found[(str(event["edition"]), str(event["section"]))].append((str(event["at"]), int(event["to"])))
                except (AssertionError, KeyError, TypeError, ValueError):
                    record_damage(key, "corrupt: not a rollback event", "skipped")
            self._rollback_events = {page: sorted(v) for page, v in found.items()}
        return self._rollback_events

    def live_version_at(self, edition: str, section: str, at: datetime, *, strict: bool) -> tuple[int, str] | None:
        """The version a page's pointer named at ``at`` (just before it, when ``strict``): the newest
        published version, unless a later rollback named another."""
        rollbacks = list(self._rollbacks().get((edition, section), []))
        return self._live_at((edition, section), self.versions(edition, section), rollbacks, at, strict=strict)

    def story_entries_before(self, story_ids: Iterable[str], at: datetime) -> dict[str, dict[str, Any]]:
        """Each story's entry in the newest story snapshot version published before ``at`` that
        holds it, among the ``CARRY_SEARCH_VERSIONS`` newest; a story that none holds is left out.

        Every cycle's snapshot carries the stories of the pages live before it, so the newest
        version normally holds them all; the bound keeps a story that no kept version holds (its
        versions pruned) from costing a read of every version on every cycle.
        """
        wanted = set(story_ids)
        pointer = self.pointer(None)
        found: dict[str, dict[str, Any]] = {}
        if not wanted or pointer is None:
            return found
        limit = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        searched = 0
        # Older versions are read once and not cached: a snapshot of every story is large.
        snapshots = published_story_snapshots(
            self._store, pointer, versions=[v for v, _ in self.story_versions()],
            read=lambda key: self._payloads.get(key) or read_json_payload(self._store, key))
        for _, payload in snapshots:
            if not wanted or searched == CARRY_SEARCH_VERSIONS:
                break
            if str(payload.get("as_of")) >= limit:
                continue
            searched += 1
            for sid in sorted(wanted & payload["stories"].keys()):
                found[sid] = payload["stories"][sid]
                wanted.discard(sid)
        return found

    def live_story_version_at(self, at: datetime) -> tuple[int, str] | None:
        """The story snapshot version live at ``at`` (story snapshots are never rolled back)."""
        return self._live_at(None, self.story_versions(), [], at, strict=False)

    def _live_at(self, page: tuple[str, str] | None, versions: list[tuple[int, str]],
                 rollbacks: list[tuple[str, int]], at: datetime, *, strict: bool) -> tuple[int, str] | None:
        limit = at.strftime("%Y-%m-%dT%H:%M:%SZ")

        def before(ts: str) -> bool:
            return ts < limit or (not strict and ts == limit)

        pointer = self.pointer(page)
        if pointer is None:
            return None  # nothing was ever made live; any version is an orphan
        if pointer.rolled_back_from is not None:
            rollbacks.append((pointer.published_at, pointer.version))
        keys = dict(versions)
        best: tuple[str, int] | None = None
        for version, key in reversed(versions):
            if not pointer.was_published(version):
                continue
            payload = self.payload(key)
            if payload is None:
                continue  # unreadable: the newest valid version before it stands in
            as_of = str(payload.get("as_of"))
            if before(as_of):
                best = (as_of, version)
                break
        for when, version in sorted(rollbacks):
            if before(when) and (best is None or when >= best[0]) and version in keys:
                best = (when, version)
        return (best[1], keys[best[1]]) if best else None

    def live_at(self, edition: str, section: str, at: datetime, *, strict: bool) -> dict[str, Any] | None:
        """The payload of ``live_version_at``."""
        found = self.live_version_at(edition, section, at, strict=strict)
        return self.payload(found[1]) if found else None


def compute_pages(store: ObjectStore, now: datetime, settings: RankSettings,
                  history: PageHistory | None = None, view: AggregateView | None = None) -> RankOutput:
    """Every edition page, pool and the story snapshot as of ``now``, from the store alone.

    Args:
        view: The story aggregates as of ``now``; by default the stored ones with what the logs
            gained since, folded without writing anything (:func:`tasks.aggregates.update_aggregates`).
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


def parts_params(s: RankSettings) -> PartsParams:
    """The windows of the score parts (``story_scores.sql``'s parameters)."""
    return PartsParams(
        coverage_window_hours=s.coverage_window_hours, half_life_hours=s.freshness_half_life_hours,
        active_hours=s.active_hours, velocity_window_minutes=s.velocity_window_minutes, cycle_seconds=s.cycle_seconds,
        smoothing_cycles=s.smoothing_cycles, burst_window_minutes=s.burst_window_minutes,
        burst_min_articles=s.burst_min_articles, burst_min_publishers=s.burst_min_publishers,
        burst_authority_floor=s.burst_authority_floor, breaking_hours=s.breaking_hours,
        breaking_new_story_minutes=s.breaking_new_story_minutes)


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


def publish_computed(store: ObjectStore, output: RankOutput, now: datetime, settings: RankSettings,
                     elapsed: Callable[[], float] = lambda: 0.0) -> dict[str, Any]:
    """Publish every page whose content changed; a refused version leaves the live one in place and
    its reason is recorded (the summary, a warning, and ``log/events/page.refused/``).

    A page (or the story snapshot) that is neither published, unchanged nor refused by validation
    (``stale: ...`` from a run older than the live version, or a lost pointer race) is counted in
    ``not_published`` with its reason and logged as a warning.

    The articles the story snapshot lists for the first time go to ``log/listings/`` once the page
    pointers moved, stamped ``now`` plus ``elapsed()`` (seconds since the cycle's ``now``): on the
    real clock, the moment they went live, which the freshness dashboard measures to (issue 31);
    a cycle at a replayed instant stays within seconds of it. Published pages are then announced
    as a ``newsroom.pages.published`` event.
    """

    def check(validator: Callable[..., str | None]) -> Callable[[dict[str, Any], dict[str, Any] | None], str | None]:
        return lambda new, prev: validator(new, prev, min_stories=settings.min_page_stories,
                                           max_loss=settings.max_story_loss)

    results = {}
    # The story snapshot goes first, so every story a new page lists can already be opened; it also
    # holds every story of the pages live before (compute_pages), so a page that keeps its live
    # version below still opens. Pages go live only over a live story snapshot that holds them: when
    # it was refused (stale) or lost its race, this cycle's pages wait for a later one.
    story_result = publish_stories(store, output.stories, now=now, validate=lambda new, prev: None)
    stories_live = story_result.published or story_result.reason == "unchanged"
    crash_point("rank.after_stories")
    for i, ((edition, section), payload) in enumerate(sorted(output.pages.items())):
        if i == len(output.pages) // 2:
            crash_point("rank.mid_pages")
        if not stories_live:
            results[f"{edition}/{section}"] = PublishResult(layout.page_pointer_key(edition, section), 0, False,
                                                            f"{story_result.reason} (story snapshot)")
            continue
        validator = validate_pool if section == POOL_SECTION else validate_page
        result = publish_page(store, edition, section, payload, now=now, validate=check(validator),
                              before_pointer=lambda: crash_point("rank.before_pointer"))
        results[f"{edition}/{section}"] = result
        if result.reason.startswith("invalid"):
            log.warning("page_refused edition=%s section=%s reason=%s", edition, section, result.reason)
            _write_event(store, "page.refused", f"{edition}.{section}.{now:%Y%m%dT%H%M%S}",
                         {"kind": "page.refused", "edition": edition, "section": section, "at": iso(now),
                          "version": result.version, "reason": result.reason})
    if story_result.published and output.listings:
        live_at = now + timedelta(seconds=max(0.0, elapsed()))
        rows = [dict(row, listed_at=live_at) for row in output.listings]
        table = rows_to_table(rows, LISTINGS_SCHEMA)
        write_segment(store, layout.listing_segment_key(now, content_segment_id(table)), table, LISTINGS_SCHEMA)
    published = sorted(k for k, r in results.items() if r.published)
    if published or story_result.published:
        events.emit(events.PAGES_PUBLISHED, events.resource_id("pages"),
                    {"as_of": iso(now), "published": published[:200], "pages": len(published),
                     "stories_version": story_result.version if story_result.published else None})
    not_published = {k: r.reason for k, r in [(layout.STORIES_PAGE, story_result), *sorted(results.items())]
                     if not r.published and r.reason != "unchanged" and not r.reason.startswith("invalid")}
    for page, reason in not_published.items():
        log.warning("page_not_published page=%s reason=%s", page, reason)
    return {
        "pages": len(output.pages),
        "published": published,
        "refused": {k: r.reason for k, r in results.items() if r.reason.startswith("invalid")},
        "not_published": not_published,
        "stories": len(output.stories["stories"]),
        "stories_version": story_result.version,
        "breaking": [b["story_id"] for b in output.breaking],
    }


def _write_event(store: ObjectStore, kind: str, event_id: str, payload: dict[str, Any]) -> bool:
    try:
        store.put(layout.event_key(kind, event_id), dump_snapshot(payload), if_none_match=True,
                  content_type="application/json")
    except PreconditionFailedError:
        return False
    return True


def record_breaking(store: ObjectStore, breaking: list[dict[str, Any]], now: datetime,
                    settings: RankSettings) -> dict[str, Any]:
    """Write one ``story.breaking`` event per newly Breaking story and extend the feed boosts."""
    new_events = [b["story_id"] for b in breaking
                  if _write_event(store, "story.breaking", b["story_id"],
                                  {"kind": "story.breaking", "detected_at": iso(now), **b})]
    wanted: dict[str, str] = {}
    for b in breaking:
        until = iso(datetime.fromisoformat(b["breaking_since"].replace("Z", "+00:00"))
                    + timedelta(hours=settings.boost_hours))
        assert until is not None
        for p in b["publisher_ids"]:
            wanted[p] = max(wanted.get(p, ""), until)
    now_s = iso(now)
    assert now_s is not None
    boosts_stored = False
    for _ in range(3):
        try:
            obj = store.get(layout.FEED_BOOSTS_KEY)
        except ObjectNotFoundError:
            current, etag = {}, None
        else:
            etag = obj.etag
            try:
                current = {str(p): str(u) for p, u in dict(json.loads(obj.data)).items()}
            except (ValueError, TypeError, RecursionError) as e:
                record_damage(layout.FEED_BOOSTS_KEY, f"corrupt: {describe_error(e)}",
                              "read as empty; replaced by this cycle's boosts")
                current = {}
        merged = {p: u for p, u in current.items() if u > now_s}
        for p, u in wanted.items():
            if u > now_s:
                merged[p] = max(merged.get(p, ""), u)
        if merged == current:
            boosts_stored = True
            break
        try:
            store.put(layout.FEED_BOOSTS_KEY, dump_snapshot(merged), if_match=etag, if_none_match=etag is None,
                      content_type="application/json")
            boosts_stored = True
            break
        except PreconditionFailedError:
            continue
    if not boosts_stored:  # the next cycle finds the stories Breaking still and tries again
        log.warning("feed_boosts_not_stored: lost 3 conditional puts; publishers %s", sorted(wanted))
    return {"events": new_events, "boosted": sorted(wanted) if boosts_stored else [],
            "boosts_stored": boosts_stored}


def publish_all(store: ObjectStore, now: datetime, settings: RankSettings) -> dict[str, Any]:
    """One rank & publish cycle: compute, publish what changed, record Breaking stories.

    ``damaged`` in the summary names every object the cycle could not read and what it did
    instead (docs/store-faults.md): a corrupt segment left out, a damaged pointer or live version
    replaced by a new version, and so on; the rest of the cycle goes on (issue 16).
    """
    started = time.monotonic()
    with collect_damage() as damaged:
        output, view = pages_and_aggregates(store, now, settings, PageHistory(store), persist=True)
        record_member_cache(store, view)
        summary = publish_computed(store, output, now, settings, elapsed=lambda: time.monotonic() - started)
        summary["aggregates"] = {**view.summary, "bytes_read": view.counter.total}
        summary["live_events"] = record_live_breaking(store, output.breaking, now, output.stories["stories"])
        summary["breaking_events"] = record_breaking(store, output.breaking, now, settings)["events"]
        if layout.STORIES_PAGE not in summary["not_published"]:  # results may open only live stories
            summary["search"] = publish_search(store, view, output.stories, now, settings,
                                               summary["stories_version"])
    summary["damaged"] = [asdict(d) for d in damaged]
    return summary


def rebuild_as_of(store: ObjectStore, at: datetime, settings: RankSettings,
                  output_dir: Path | None = None, progress: Progress = NO_PROGRESS) -> list[dict[str, Any]]:
    """Rebuild every page (and story snapshot) version that was live at ``at`` from the logs, and
    compare the bytes.

    For each page, the version live at ``at`` is the newest published one (never an orphan: see
    :class:`PageHistory`) with ``as_of <= at``, or a later rollback's target; it is recomputed
    at its own ``as_of`` with its own version number. Nothing in the store is written; with
    ``output_dir`` the rebuilt bytes go there under the same keys. ``progress`` counts the cycles
    recomputed (one per distinct ``as_of``).
    """
    history = PageHistory(store)
    targets: dict[datetime, list[tuple[tuple[str, str] | None, int, str]]] = defaultdict(list)
    # None stands for the story snapshot (pages/stories/), rebuilt like any page.
    candidates: list[tuple[str, str] | None] = [*history.pages(), None]
    for page in candidates:
        found = (history.live_version_at(*page, at, strict=False) if page is not None
                 else history.live_story_version_at(at))
        payload = history.payload(found[1]) if found is not None else None
        if found is not None and payload is not None:
            as_of = payload["as_of"]
            targets[datetime.fromisoformat(as_of.replace("Z", "+00:00"))].append((page, found[0], found[1]))
    report = []
    advance = progress.stage("recomputing cycles", len(targets))
    for when, pages in counted(sorted(targets.items()), advance):
        output = compute_pages(store, when, settings, history, view=aggregates_from_logs(store, when, settings))
        for page, version, key in pages:
            rebuilt = output.stories if page is None else output.pages.get(page)
            data = dump_snapshot(dict(rebuilt, version=version)) if rebuilt is not None else b""
            published = store.get(key).data
            if output_dir is not None and data:
                target = output_dir / key
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            report.append({"key": key, "as_of": iso(when), "version": version, "identical": data == published,
                           "sha256": hashlib.sha256(data).hexdigest()})
    return report


def rollback_pointer(store: ObjectStore, edition: str, section: str, version: int, now: datetime) -> PublishResult:
    """Move a page's pointer back to an earlier version (``newsroom pages rollback``).

    The ``page.rollback`` event (so that stability and ``--as-of`` see the pointer as readers did,
    issue 5) is keyed by the time the pointer moved and written with If-None-Match after the move;
    a rerun that finds the version already live through a rollback writes it if a crash lost it.
    """
    result = rollback_page(store, edition, section, version, now=now)
    log.warning("page_rollback edition=%s section=%s version=%d reason=%s", edition, section, version, result.reason)
    if result.previous is not None and result.moved_at is not None:
        at = datetime.fromisoformat(result.moved_at.replace("Z", "+00:00"))
        if _write_event(store, ROLLBACK_EVENT, f"{edition}.{section}.{at:%Y%m%dT%H%M%S}",
                        {"kind": ROLLBACK_EVENT, "edition": edition, "section": section, "at": result.moved_at,
                         "from": result.previous, "to": version}) and not result.published:
            log.warning("page_rollback_event_repaired edition=%s section=%s version=%d", edition, section, version)
    return result


@task(name="publish_all", retries=2, retry_delay_seconds=2, timeout_seconds=600, cache_policy=NO_CACHE)
def publish_all_task(store: ObjectStore, now: datetime, settings: RankSettings) -> dict[str, Any]:
    return publish_all(store, now, settings)
