"""Assemble edition pages and Full Coverage from scored stories and their member articles.

Pure: rows in; ranked pages out as records (``EditionPage``, ``PoolPage`` of ``PageStory``), the story
snapshot as its JSON shape (``transforms.page_json``). Every ordering has an explicit tie-breaker, so
the same inputs give the same bytes.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from newsroom.times import parse_iso
from transforms.diversity import DiversityRule, diversify, stabilize_order
from transforms.page_json import (
    LinkedStory,
    PageMember,
    PublishedPage,
    StoryCard,
    StoryEntry,
    StorySnapshot,
)
from transforms.records import EditionPage, PageSource, PageStory, PoolPage, PoolStory, RankedStory
from transforms.representative import (
    RepresentativeChoice,
    RepresentativeWeights,
    centroid,
    cosine,
    explain_edition_representative,
    has_title,
    supporting_links,
    term_vector,
)
from transforms.sections import article_section_votes, story_sections_from_votes
from transforms.text import is_usable_snippet

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
    """The titled original with the highest authority; ties go to the first report, then the id.

    Untitled articles stand for a story only when none has a title (such a story is never listed
    on a page; see :func:`is_listable`).
    """
    candidates = [m for m in members if has_title(m)] or list(members)
    originals = [m for m in candidates if not m["is_copy"]] or candidates
    return min(originals, key=lambda m: (-float(m["authority"] or 0), m["first_seen_at"], m["article_id"]))


def shown_snippet(m: Mapping[str, Any]) -> str:
    """The snippet a card shows for its representative: none rather than a single word
    ("Analysis…", stored before snippets fell back to the next source; issue 14).

    >>> shown_snippet({"snippet": "Analysis\u2026"}), shown_snippet({"snippet": "Crews fought the blaze."})
    ('', 'Crews fought the blaze.')
    """
    snippet = m.get("snippet") or ""
    return snippet if is_usable_snippet(snippet) else ""


def page_source(m: Mapping[str, Any]) -> PageSource:
    """A member article (a ``story_members.sql`` row) as a page lists it."""
    return PageSource(m["article_id"], m["publisher_id"], m["publisher"], m["title"], m["url"], iso(m["first_seen_at"]),
                      bool(m["is_copy"]), bool(m["is_opinion"]), bool(m["is_paywalled"]), m["region"])


def _source(m: Mapping[str, Any]) -> dict[str, object]:
    return page_source(m).to_json()


def story_sections(members: list[Mapping[str, Any]]) -> list[str]:
    """The sections most of a story's articles agree on (ties keep every leader)."""
    counts = Counter(s for s in (section_slug(m["section"]) for m in members) if s)
    if not counts:
        return []
    best = max(counts.values())
    return sorted(s for s, c in counts.items() if c == best)


def is_listable(members: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a story may be listed on a page: some article has a title to show."""
    return any(has_title(m) for m in members)


def build_story(story_id: str, members: Sequence[Mapping[str, Any]], *, full: bool) -> StoryCard:
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
        "snippet": shown_snippet(rep),
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
) -> tuple[dict[tuple[str, str], dict[str, object]], StorySnapshot]:
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
        if s["story_id"] in by_story and is_listable(by_story[s["story_id"]]):
            by_edition[s["edition"]].append(s)
    cards = {sid: build_story(sid, ms, full=False) for sid, ms in by_story.items()}
    pages: dict[tuple[str, str], dict[str, object]] = {}
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
        for (e, _), page in pages.items():
            if e == edition:
                for card in _cards_of(page):
                    listed[card["story_id"]].add(edition)
    full: dict[str, StoryEntry] = {}
    for sid in sorted(listed):
        full[sid] = StoryEntry(**build_story(sid, by_story[sid], full=True), editions=sorted(listed[sid]))
    stories = StorySnapshot(schema="newsroom.stories/1", as_of=iso(now), stories=full,
                            aliases=resolve_aliases(aliases or {}, full))
    return pages, stories


def _cards_of(page: Mapping[str, object]) -> list[StoryCard]:
    cards = page["stories"]
    assert isinstance(cards, list)
    return cards


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


def _page(edition: str, section: str, rows: list[Mapping[str, Any]], cards: Mapping[str, StoryCard],
          now: datetime) -> dict[str, object]:
    stories = []
    for rank, r in enumerate(rows, start=1):
        card: dict[str, object] = dict(cards[r["story_id"]])
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


# --- Ranked editions (issue 5): per-edition representatives, stability, diversity, pool ---------

POOL_SECTION = "pool"
"""The edition's candidate pool is published as ``pages/{edition}/pool/v{n}.json`` (not a page)."""


@dataclass(frozen=True, slots=True)
class EditionRules:
    """Everything page assembly needs besides the rows; tasks fill it from RankSettings."""

    limits: PageLimits
    swap_margin: float = 0.10
    diversity: DiversityRule = DiversityRule()
    fresh_minutes: float = 60.0
    fresh_max_sources: int = 2
    representative: RepresentativeWeights = RepresentativeWeights()
    pool_stories: int = 1000


def member_sections(members: list[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Each article's section votes: feed hint, RSS category and the text classifier's guess, which
    ingest stored (``section_guess``, issue 21)."""
    ordered = sorted(members, key=lambda m: m["article_id"])
    found = article_section_votes([m["section"] for m in ordered], [m.get("categories") for m in ordered],
                                  [m.get("section_guess") for m in ordered])
    return {m["article_id"]: s for m, s in zip(ordered, found, strict=True)}


def story_sections_of(by_story: Mapping[str, Sequence[Mapping[str, Any]]], votes: Mapping[str, list[str]]
                      ) -> dict[str, list[str]]:
    """The sections most of each story's votes agree on."""
    return {sid: story_sections_from_votes(v for m in ms for v in votes[m["article_id"]])
            for sid, ms in by_story.items()}


def impressions_from_versions(versions: Iterable[tuple[str, list[str]]], now: datetime) -> dict[str, float]:
    """Representative impressions per publisher today, in story-slot minutes, from the day's
    published top-page versions (``as_of`` ISO string, the representatives' publisher ids).

    A version counts from its ``as_of`` until the next version (or ``now``).
    """
    now_s = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    rows = sorted((a, pubs) for a, pubs in versions if a[:10] == now_s[:10] and a < now_s)
    counts: dict[str, float] = {}
    for i, (at, pubs) in enumerate(rows):
        until = rows[i + 1][0] if i + 1 < len(rows) else now_s
        minutes = (parse_iso(until) - parse_iso(at)).total_seconds() / 60
        for p in pubs:
            counts[p] = counts.get(p, 0.0) + minutes
    return counts


def carry_impressions(previous_pool: PublishedPage | None, now: datetime) -> dict[str, float]:
    """Representative impressions per publisher today (story-slot minutes on the top page), carried
    from the edition's previous pool: its counts, plus its top-page representatives for every minute
    since it (or since midnight, on a new day). The pool is the small per-cycle state the daily cap
    needs, so neither a cycle nor ``--as-of`` reads more than one earlier version.

    >>> pool = {"as_of": "2026-12-01T11:50:00Z", "impressions": {"day": "2026-12-01", "counts": {"a": 5.0}},
    ...         "representatives": ["a", "b"]}
    >>> carry_impressions(pool, datetime.fromisoformat("2026-12-01T12:00:00+00:00"))
    {'a': 15.0, 'b': 10.0}
    """
    if previous_pool is None or "impressions" not in previous_pool:
        return {}
    now_s = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    day = now_s[:10]
    state = previous_pool["impressions"]
    counts = {p: float(c) for p, c in state["counts"].items()} if state["day"] == day else {}
    since = max(previous_pool["as_of"], f"{day}T00:00:00Z")
    minutes = max((parse_iso(now_s) - parse_iso(since)).total_seconds(), 0.0) / 60
    for p in previous_pool.get("representatives", []):
        counts[p] = counts.get(p, 0.0) + minutes
    return {p: round(c, 3) for p, c in sorted(counts.items())}


def _parts(r: RankedStory) -> dict[str, float]:
    return {"coverage": round(r.coverage, 4), "velocity": round(r.velocity, 4), "freshness": round(r.freshness, 4),
            "regional_share": round(r.regional_share, 4)}


@dataclass(frozen=True, slots=True)
class StoryFacts:
    """What page assembly needs of any ranked story without reading its members (issue 15): the
    story row's counts and times, its sections, and its story-level representative (a member row:
    the fields :func:`page_source` reads, with title, snippet and image). Pool cards are built from it;
    only stories on a page read their members."""

    story_id: str
    language: str | None
    sections: list[str]
    is_listable: bool
    source_count: int
    article_count: int
    first_seen_at: datetime
    updated_at: datetime
    representative: PageMember


class _Centroids:
    """Each story's centroid (the mean term vector of its originals), computed once per cycle."""

    def __init__(self, members: Mapping[str, Sequence[PageMember]]) -> None:
        self._members = members
        self._found: dict[str, dict[str, float]] = {}

    def of(self, sid: str) -> dict[str, float]:
        if sid not in self._found:
            self._found[sid] = centroid([term_vector(m) for m in self._members[sid] if not m["is_copy"]])
        return self._found[sid]

    def similarity(self, a: str, b: str) -> float:
        return cosine(self.of(a), self.of(b))


@dataclass(frozen=True, slots=True)
class _EditionContext:
    """What every page of one edition shares while it is assembled."""

    edition: str
    region: str
    now: datetime
    rules: EditionRules
    facts: Mapping[str, StoryFacts]
    members: Mapping[str, Sequence[PageMember]]
    centroids: _Centroids
    sections_of: Mapping[str, list[str]]


def _rows_by_page(ranked: Iterable[RankedStory], facts: Mapping[str, StoryFacts]
                  ) -> dict[tuple[str, str], list[RankedStory]]:
    """The ranked rows of each (edition, section); a story with no titled article is left out, so it
    never refuses a whole page."""
    listable = {sid for sid, f in facts.items() if f.is_listable}
    out: dict[tuple[str, str], list[RankedStory]] = defaultdict(list)
    for r in ranked:
        if r.story_id in listable:
            out[(r.edition, r.section)].append(r)
    return out


def _page_order(ctx: _EditionContext, section: str, rows: Sequence[RankedStory], previous: Sequence[str]
                ) -> list[str] | None:
    """The story ids one page lists, in order: stable against its live version, then diversified
    (a fresh slot on top); None when a section page has too few stories to publish."""
    limits = ctx.rules.limits
    ordered = sorted(rows, key=lambda r: r.position)
    if section != TOP_SECTION and len(ordered) < limits.min_section_stories:
        return None
    limit = limits.top_stories if section == TOP_SECTION else limits.section_stories
    scores = {r.story_id: r.score for r in ordered}
    pinned = frozenset(r.story_id for r in ordered if r.is_pinned)
    order = stabilize_order([r.story_id for r in ordered], scores, previous, margin=ctx.rules.swap_margin,
                            pinned=pinned)
    fresh = [r.story_id for r in ordered
             if section == TOP_SECTION and (ctx.now - r.first_seen_at).total_seconds() <= ctx.rules.fresh_minutes * 60
             and ctx.facts[r.story_id].source_count <= ctx.rules.fresh_max_sources]
    return diversify(order, ctx.sections_of, ctx.centroids.similarity, rule=ctx.rules.diversity, fresh=fresh,
                     limit=limit, cap_sections=section == TOP_SECTION)


def _choose_representatives(ctx: _EditionContext, page_ids: Mapping[str, list[str]], sections: Sequence[str],
                            counts: dict[str, float]) -> dict[str, RepresentativeChoice]:
    """The edition's representative of every story its pages list, top page first: each top-page
    choice adds to its publisher's impressions (``counts``, in place) before the next is chosen."""
    chosen: dict[str, RepresentativeChoice] = {}
    for section in sections:
        for sid in page_ids.get(section, []):
            if sid in chosen:
                continue
            ms = ctx.members[sid]
            shares = Counter(m["region"] for m in ms if not m["is_copy"])
            why = explain_edition_representative(
                sid, ms, ctx.centroids.of(sid), edition=ctx.edition, region=ctx.region,
                is_local_story=shares[ctx.region] * 2 > sum(shares.values()), now=ctx.now,
                impressions=counts, weights=ctx.rules.representative)
            chosen[sid] = why
            if section == TOP_SECTION:
                publisher = why.chosen["publisher_id"]
                counts[publisher] = counts.get(publisher, 0.0) + ctx.rules.representative.impression_minutes
    return chosen


def _edition_pages(ctx: _EditionContext, rows_by_page: Mapping[tuple[str, str], list[RankedStory]],
                   previous: Mapping[tuple[str, str], list[str]], impressions: Mapping[str, float],
                   choices: dict[tuple[str, str], RepresentativeChoice] | None
                   ) -> dict[str, EditionPage | PoolPage] | None:
    """One edition's pages and its pool, by section; None when it has no top page."""
    edition = ctx.edition
    sections = sorted((s for e, s in rows_by_page if e == edition), key=lambda s: (s != TOP_SECTION, s))
    page_ids: dict[str, list[str]] = {}
    for section in sections:
        ids = _page_order(ctx, section, rows_by_page[(edition, section)], previous.get((edition, section), []))
        if ids is not None:
            page_ids[section] = ids
    if TOP_SECTION not in page_ids:
        return None
    why = _choose_representatives(ctx, page_ids, sections, dict(impressions))
    if choices is not None:
        choices.update(((edition, sid), w) for sid, w in why.items())
    as_of = iso(ctx.now)
    assert as_of is not None
    out: dict[str, EditionPage | PoolPage] = {}
    for section, ids in page_ids.items():
        row_of = {r.story_id: r for r in rows_by_page[(edition, section)]}
        out[section] = EditionPage(edition, section, as_of, tuple(
            _page_story(sid, ctx.members[sid], why[sid].chosen, row_of[sid], rank, ctx.facts[sid].sections, why[sid],
                        ctx.rules) for rank, sid in enumerate(ids, start=1)))
    by_id = {r.story_id: r for r in rows_by_page[(edition, TOP_SECTION)]}
    top = sorted(by_id.values(), key=lambda r: r.position)[: ctx.rules.pool_stories]
    out[POOL_SECTION] = PoolPage(
        edition, as_of, ctx.now.strftime("%Y-%m-%d"), dict(sorted(impressions.items())),
        tuple(why[sid].chosen["publisher_id"] for sid in page_ids[TOP_SECTION]),
        tuple(_pool_entry(r, ctx.facts[r.story_id], why[r.story_id].chosen if r.story_id in why else None)
              for r in top))
    return out


def build_ranked_pages(
    ranked: Iterable[RankedStory],
    facts: Mapping[str, StoryFacts],
    members: Mapping[str, Sequence[PageMember]],
    now: datetime,
    rules: EditionRules,
    *,
    previous: Mapping[tuple[str, str], list[str]],
    impressions: Mapping[str, Mapping[str, float]],
    regions: Mapping[str, str],
    choices: dict[tuple[str, str], RepresentativeChoice] | None = None,
) -> tuple[dict[tuple[str, str], EditionPage | PoolPage], dict[str, set[str]]]:
    """Pages (and each edition's pool) from ``rank_editions`` rows.

    Args:
        ranked: The rows of transforms.ranking.rank_editions, any order.
        facts: :class:`StoryFacts` of at least every ranked story.
        members: Story id → its members (rows of story_members.sql, first seen first); read only
            for the stories a page may list (centroids, representatives, sources), so it may
            load them on demand.
        now: The cycle's instant.
        rules: Limits and rules.
        previous: Story ids of each page's previous version, in order (stability).
        impressions: Per edition, representative impressions per publisher so far today.
        regions: Region per edition.
        choices: When given, filled with how each (edition, story id)'s representative was chosen
            (``newsroom explain``); each page card carries its compact summary either way.

    Returns:
        Pages keyed by (edition, section), and the editions listing each story.
    """
    rows_by_page = _rows_by_page(ranked, facts)
    centroids = _Centroids(members)
    sections_of = {sid: f.sections for sid, f in facts.items()}
    pages: dict[tuple[str, str], EditionPage | PoolPage] = {}
    listed: dict[str, set[str]] = defaultdict(set)
    for edition in sorted({e for e, _ in rows_by_page}):
        ctx = _EditionContext(edition, regions[edition], now, rules, facts, members, centroids, sections_of)
        found = _edition_pages(ctx, rows_by_page, previous, impressions.get(edition, {}), choices)
        for section, page in (found or {}).items():
            pages[(edition, section)] = page
            if isinstance(page, EditionPage):
                for story in page.stories:
                    listed[story.story_id].add(edition)
    return pages, listed


def _page_story(sid: str, members: Sequence[PageMember], rep: PageMember, r: RankedStory, rank: int,
                sections: list[str], why: RepresentativeChoice, rules: EditionRules) -> PageStory:
    """A story as one edition's page lists it: that edition's representative first, then the links
    that best support it; the counts and times are the whole story's."""
    base = build_story(sid, members, full=False)
    support = supporting_links(rep, members, count=rules.representative.supporting,
                               mmr_lambda=rules.representative.mmr_lambda)
    return PageStory(
        story_id=sid, title=rep["title"], snippet=shown_snippet(rep), image_url=rep["image_url"],
        language=base["language"], sections=tuple(sections), first_seen_at=base["first_seen_at"],
        updated_at=base["updated_at"], source_count=base["source_count"], article_count=base["article_count"],
        representative_id=rep["article_id"], sources=tuple(page_source(m) for m in [rep, *support][:PAGE_SOURCES]),
        rank=rank, score=round(r.score, 4), score_parts=_parts(r), is_breaking=r.is_breaking,
        breaking_since=iso(r.breaking_since), representative_choice=why.summary())


def _pool_entry(r: RankedStory, facts: StoryFacts, rep: PageMember | None) -> PoolStory:
    """A compact card for the pool: enough for serving to show a story it re-ranks (For you).
    The representative is the edition's when the story is on a page, else the story-level one."""
    chosen = rep or facts.representative
    return PoolStory(
        story_id=facts.story_id, score=round(r.score, 4), score_parts=_parts(r), sections=tuple(facts.sections),
        is_breaking=r.is_breaking, breaking_since=iso(r.breaking_since), title=chosen["title"],
        snippet=shown_snippet(chosen), image_url=chosen["image_url"], language=facts.language,
        first_seen_at=iso(facts.first_seen_at), updated_at=iso(facts.updated_at), source_count=facts.source_count,
        article_count=facts.article_count, representative=page_source(chosen))


def build_story_snapshot(listed: Mapping[str, set[str]], by_story: Mapping[str, Sequence[PageMember]],
                         now: datetime, aliases: Mapping[str, str] | None = None) -> StorySnapshot:
    """Full Coverage for every listed story (the same shape ``build_pages`` returns)."""
    article_section = member_sections([m for sid in listed for m in by_story[sid]])
    full: dict[str, StoryEntry] = {}
    for sid in sorted(listed):
        story = StoryEntry(**build_story(sid, by_story[sid], full=True), editions=sorted(listed[sid]))
        story["sections"] = story_sections_of({sid: by_story[sid]}, article_section)[sid]
        full[sid] = story
    return StorySnapshot(schema="newsroom.stories/1", as_of=iso(now), stories=full,
                         aliases=resolve_aliases(aliases or {}, full))


def attach_links(snapshot: StorySnapshot, links: Mapping[str, str]) -> None:
    """Give each story of a story snapshot its ``linked`` list: the stories of its link group in
    other languages (``story_id``, ``language``, ``title``), by language then id. In place."""
    stories = snapshot["stories"]
    groups: dict[str, list[str]] = {}
    for sid in sorted(stories):
        if sid in links:
            groups.setdefault(links[sid], []).append(sid)
    for sid, story in stories.items():
        story["linked"] = [
            LinkedStory(story_id=other, language=stories[other]["language"], title=stories[other]["title"])
            for other in sorted(groups.get(links.get(sid, ""), ()), key=lambda o: (stories[o]["language"], o))
            if other != sid and stories[other]["language"] != story["language"]
        ]


def validate_pool(new: Mapping[str, Any], previous: Mapping[str, Any] | None, *, min_stories: int,
                  max_loss: float) -> str | None:
    """Why a candidate pool must not go live, or None: the count rules of validate_page."""
    stories = new.get("stories") or []
    if len(stories) < min_stories:
        return f"{len(stories)} stories, fewer than {min_stories}"
    if previous is not None:
        before = len(previous.get("stories") or [])
        if before >= 4 and len(stories) < before * (1 - max_loss):
            return f"{len(stories)} stories after {before}: more than {max_loss:.0%} lost in one cycle"
    return None
