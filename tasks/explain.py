"""``newsroom explain STORY_ID [--edition E]``: why a story is where it is (issue 18).

Three parts, each from what the pipeline itself wrote or computes:

- **the score**: the story's card on the live pages (``score``, ``score_parts``, Breaking) and the
  page's ``ranking`` weights, turned back into the quantities behind them (the publishers' summed
  authority behind ``coverage``, the age of the latest original behind ``freshness``, the regional
  factor, the base averaged over the last cycles);
- **the representative**: the rank cycle that published the page is computed again at the page's
  ``as_of`` (as ``newsroom rank --as-of`` does), and the same function that chose the
  representative reports every candidate's score, the publishers that stepped aside for the daily
  cap, the near-ties it rotated among and which one this hour's rotation picked;
- **the lineage**: the story's births, joins, copies, merges and splits from ``story_changes``
  (``story_lineage_of.sql``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict, cast

from tasks.clock import resolve_now
from tasks.errors import StoryNotListedError
from tasks.rank.compute import compute_pages
from tasks.rank.params import ranking_rules
from tasks.settings import RankSettings
from tasks.sql import open_warehouse
from warehouse.duck import article_rows, load_sql, run_resilient, sources_named_in
from warehouse.errors import SnapshotNotFoundError
from warehouse.snapshot_json import RepresentativeChoiceJson, SnapshotJson, StoryJson
from warehouse.snapshots import list_live_pages, read_live_page, read_live_stories
from warehouse.store import ObjectStore


@dataclass(frozen=True, slots=True)
class Listing:
    """A live page that lists the story: where, and the story's card and the page's weights."""

    edition: str
    section: str
    version: int
    as_of: str
    rank: int
    stories_on_page: int
    card: StoryJson
    ranking: Mapping[str, float]


class ListingJson(TypedDict):
    """A :class:`Listing` as ``newsroom explain --json`` prints it."""

    edition: str
    section: str
    rank: int
    of: int
    version: int
    as_of: str


class ScoreBreakdownJson(TypedDict):
    """The quantities behind a card's ``score`` (:func:`score_breakdown`)."""

    score: float
    coverage: float
    velocity: float
    freshness: float
    regional_share: float
    authority_sum: float
    latest_original_age_hours: float | None
    base_now: float
    regional_factor: float
    base_averaged: float | None
    weights: dict[str, float]
    smoothing_cycles: float | None
    half_life_hours: float
    is_breaking: bool
    breaking_since: str | None


class LineageChangeJson(TypedDict):
    """One change of the story's lineage, a row of ``story_lineage_of.sql``."""

    changed_at: datetime
    kind: str
    direction: str
    article_id: str | None
    publisher_id: str | None
    title: str | None
    other_story_id: str | None
    score: float | None


class CandidateJson(TypedDict):
    """A representative candidate and its score."""

    score: float
    article_id: str
    publisher_id: str
    title: str | None
    is_paywalled: bool
    first_seen_at: str


class RepresentativeJson(TypedDict):
    """How the representative was chosen (:func:`representative_explanation`)."""

    as_of: str
    chosen: str
    published: str | None
    candidates: list[CandidateJson]
    stepped_aside: list[str]
    near_ties: list[str]
    rotation: int
    tie_margin: float
    daily_share_cap: float


class ExplanationJson(TypedDict):
    """Everything ``newsroom explain`` prints (:func:`explain_story`)."""

    story_id: str
    asked: str
    merged_into: str | None
    title: str | None
    listings: list[ListingJson]
    edition: str
    score: ScoreBreakdownJson
    representative_choice: RepresentativeChoiceJson | None
    representative: RepresentativeJson | None
    lineage: list[LineageChangeJson]


def find_listings(store: ObjectStore, story_id: str, edition: str | None = None) -> list[Listing]:
    """Every live page (of ``edition``, when given) that lists ``story_id``, top pages first."""
    found = []
    for page_edition, section in list_live_pages(store):
        if edition is not None and page_edition != edition:
            continue
        payload: SnapshotJson = json.loads(read_live_page(store, page_edition, section).data)
        for position, card in enumerate(payload.get("stories", []), start=1):
            if card.get("story_id") == story_id:
                found.append(Listing(page_edition, section, int(payload.get("version", 0)), payload.get("as_of", ""),
                                     int(card.get("rank", position)), len(payload["stories"]), card,
                                     payload.get("ranking") or {}))
    return sorted(found, key=lambda x: (x.section != "top", x.edition, x.section))


def score_breakdown(card: StoryJson, ranking: Mapping[str, float]) -> ScoreBreakdownJson:
    """The quantities behind a card's ``score`` and ``score_parts``, given the page's ranking weights.

    >>> b = score_breakdown({"score": 1.5, "score_parts": {"coverage": math.log(3), "velocity": 0.0,
    ...     "freshness": 0.5, "regional_share": 1.0}, "is_breaking": False},
    ...     {"coverage_weight": 1, "velocity_weight": 0.5, "freshness_weight": 1, "regional_weight": 0.5,
    ...      "freshness_half_life_hours": 4})
    >>> round(b["authority_sum"], 6), b["latest_original_age_hours"], b["regional_factor"], round(b["base_now"], 4)
    (2.0, 4.0, 1.0, 0.5493)
    """
    parts = card.get("score_parts") or {}
    coverage, velocity = float(parts.get("coverage", 0.0)), float(parts.get("velocity", 0.0))
    freshness, share = float(parts.get("freshness", 0.0)), float(parts.get("regional_share", 0.0))
    w_c, w_v = float(ranking.get("coverage_weight", 1.0)), float(ranking.get("velocity_weight", 0.5))
    w_f, w_r = float(ranking.get("freshness_weight", 1.0)), float(ranking.get("regional_weight", 0.5))
    half_life = float(ranking.get("freshness_half_life_hours", 4.0))
    factor = 1 - w_r + w_r * share
    score = float(card.get("score") or 0.0)
    return {
        "score": score, "coverage": coverage, "velocity": velocity, "freshness": freshness, "regional_share": share,
        "authority_sum": math.expm1(coverage),
        "latest_original_age_hours": -math.log2(freshness) * half_life if freshness > 0 else None,
        "base_now": (w_c * coverage + w_v * velocity) * freshness ** w_f,
        "regional_factor": factor,
        "base_averaged": score / factor if factor else None,
        "weights": {"coverage": w_c, "velocity": w_v, "freshness": w_f, "regional": w_r},
        "smoothing_cycles": ranking.get("smoothing_cycles"),
        "half_life_hours": half_life,
        "is_breaking": bool(card.get("is_breaking")), "breaking_since": card.get("breaking_since"),
    }


def lineage(store: ObjectStore, story_id: str) -> list[LineageChangeJson]:
    """The story's changes, oldest first (``story_lineage_of.sql``): its change rows first, then
    only the articles they name, looked up by id (issue 28)."""
    con = open_warehouse(store, sources_named_in(load_sql("story_lineage_changes")))
    try:
        changes = run_resilient(con, store, lambda: con.sql(load_sql("story_lineage_changes"),
                                                             params={"story_id": story_id}).to_arrow_table())
        named = {a for a in changes.column("article_id").to_pylist() if a is not None}
        con.register("lineage_changes", changes)
        con.register("lineage_articles", article_rows(store, named, ("article_id", "version", "title", "publisher_id")))
        result = con.sql(load_sql("story_lineage_of"), params={"story_id": story_id})
        return [cast("LineageChangeJson", dict(zip(result.columns, row, strict=True))) for row in result.fetchall()]
    finally:
        con.close()


def representative_explanation(store: ObjectStore, listing: Listing, story_id: str,
                               settings: RankSettings) -> RepresentativeJson | None:
    """How the representative on ``listing``'s edition was chosen, from the cycle computed again at
    the page's ``as_of``; None when that cycle no longer lists the story (its inputs were pruned)."""
    when = resolve_now(listing.as_of)
    output = compute_pages(store, when, settings)
    why = output.choices.get((listing.edition, story_id))
    if why is None:
        return None

    def member(score: float, m: Any) -> CandidateJson:
        return {"score": round(score, 4), "article_id": m["article_id"], "publisher_id": m["publisher_id"],
                "title": m["title"], "is_paywalled": bool(m["is_paywalled"]),
                "first_seen_at": m["first_seen_at"].isoformat() if isinstance(m["first_seen_at"], datetime)
                else m["first_seen_at"]}

    return {
        "as_of": listing.as_of,
        "chosen": why.chosen["article_id"],
        "published": listing.card.get("representative_id") or (listing.card.get("sources") or [{}])[0].get("article_id"),
        "candidates": [member(s, m) for s, m in why.candidates],
        "stepped_aside": list(why.stepped_aside),
        "near_ties": [m["article_id"] for _, m in why.near_ties],
        "rotation": why.rotation,
        "tie_margin": settings.representative_tie_margin,
        "daily_share_cap": settings.publisher_daily_share_cap,
    }


def explain_story(store: ObjectStore, story_id: str, edition: str | None, settings: RankSettings) -> ExplanationJson:
    """Everything ``newsroom explain`` prints, as plain data.

    Raises:
        StoryNotListedError: No live page (of ``edition``) lists the story, nor its survivor.
    """
    survivor = None
    try:
        aliases: dict[str, str] = json.loads(read_live_stories(store).data).get("aliases", {})
    except SnapshotNotFoundError:
        aliases = {}
    listings = find_listings(store, story_id, edition)
    if not listings and story_id in aliases:
        survivor = aliases[story_id]
        listings = find_listings(store, survivor, edition)
    if not listings:
        where = f" of {edition}" if edition else ""
        raise StoryNotListedError(f"no live page{where} lists story {story_id}")
    target = survivor or story_id
    main = listings[0]
    ranking = main.ranking or ranking_rules(settings)
    return {
        "story_id": target,
        "asked": story_id,
        "merged_into": survivor,
        "title": main.card.get("title"),
        "listings": [{"edition": x.edition, "section": x.section, "rank": x.rank, "of": x.stories_on_page,
                      "version": x.version, "as_of": x.as_of} for x in listings],
        "edition": main.edition,
        "score": score_breakdown(main.card, ranking),
        "representative_choice": main.card.get("representative_choice"),
        "representative": representative_explanation(store, main, target, settings),
        "lineage": lineage(store, target),
    }


def _fmt_time(value: object) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%SZ")
    return str(value or "")


def render_explanation(e: ExplanationJson) -> str:
    """``explain_story``'s data as the text ``newsroom explain`` prints."""
    s = e["score"]
    w = s["weights"]
    lines = [f"story {e['story_id']}: {e['title']}"]
    if e["merged_into"]:
        lines.append(f"  ({e['asked']} was merged into it)")
    lines.append("")
    lines.append("where it is")
    for x in e["listings"]:
        lines.append(f"  {x['edition']}/{x['section']:<14} rank {x['rank']} of {x['of']}  (page v{x['version']}, "
                     f"as of {x['as_of']})")
    lines += ["", f"score on {e['edition']}: {s['score']:.4f}"]
    lines.append(f"  = base {s['base_averaged']:.4f} x regional factor {s['regional_factor']:.4f}"
                 if s["base_averaged"] is not None else "  = base x regional factor")
    lines.append(f"    regional factor = 1 - {w['regional']:g} + {w['regional']:g} x regional share "
                 f"{s['regional_share']:.4f}")
    lines.append(f"    base = ({w['coverage']:g} x coverage + {w['velocity']:g} x velocity) x freshness^{w['freshness']:g}"
                 f" = {s['base_now']:.4f} now" + (
                     "; Breaking: the raw value counts" if s["is_breaking"] else
                     f"; the score uses its average over the last {s['smoothing_cycles']} cycles"))
    age = s["latest_original_age_hours"]
    lines += [
        f"  coverage        {s['coverage']:.4f}  log(1 + {s['authority_sum']:.2f}, the summed authority of the "
        "publishers with an original in the window)",
        f"  velocity        {s['velocity']:.4f}  originals in the last 30 min against its own earlier rate",
        f"  freshness       {s['freshness']:.4f}  latest original "
        + (f"{max(age, 0.0) * 60:.0f} min old" if age is not None else "older than the window")
        + f" (half-life {s['half_life_hours']:g} h)",
        f"  regional share  {s['regional_share']:.4f}  of that authority from publishers in the edition's region",
        f"  Breaking        {'yes, since ' + str(s['breaking_since']) if s['is_breaking'] else 'no'}",
    ]
    rep = e["representative"]
    lines += ["", "representative"]
    if rep is None:
        lines.append("  the cycle that published this page can no longer be computed again (its inputs were pruned)")
    else:
        chosen = next((c for c in rep["candidates"] if c["article_id"] == rep["chosen"]), None)
        if chosen:
            lines.append(f"  {chosen['publisher_id']}: {chosen['title']}  (score {chosen['score']:.4f})")
        lines.append(f"  chosen among {len(rep['candidates'])} candidates (centrality, authority, freshness, "
                     "headline, first report, local)")
        if rep["stepped_aside"]:
            lines.append(f"  stepped aside for the daily cap ({rep['daily_share_cap']:.0%} of the edition's "
                         f"representative impressions): {', '.join(rep['stepped_aside'])}")
        else:
            lines.append(f"  no publisher was at the daily cap ({rep['daily_share_cap']:.0%})")
        if len(rep["near_ties"]) > 1:
            lines.append(f"  near-ties within {rep['tie_margin']:.0%}, rotating every hour: "
                         f"{', '.join(rep['near_ties'])}; this hour's pick: #{rep['rotation'] + 1}")
        else:
            lines.append(f"  no near-tie within {rep['tie_margin']:.0%}")
        if rep["published"] and rep["published"] != rep["chosen"]:
            lines.append(f"  note: the page shows {rep['published']}; computed again, the choice is {rep['chosen']}")
        for c in rep["candidates"][:8]:
            mark = "*" if c["article_id"] == rep["chosen"] else " "
            lines.append(f"   {mark} {c['score']:.4f}  {c['publisher_id']:<18} {(c['title'] or '')[:70]}"
                         + ("  (paywalled)" if c["is_paywalled"] else ""))
    lines += ["", "lineage"]
    counts: dict[str, int] = {}
    for change in e["lineage"]:
        counts[change["kind"]] = counts.get(change["kind"], 0) + 1
        if change["kind"] == "new_story":
            lines.append(f"  {_fmt_time(change['changed_at'])}  born: {change['publisher_id']}: {change['title']}")
        elif change["kind"] in ("merge", "split"):
            lines.append(f"  {_fmt_time(change['changed_at'])}  {change['kind']}: {change['direction']} "
                         f"{change['other_story_id']} (article {change['article_id']})")
    joined = counts.get("assign", 0)
    lines.append(f"  {joined} articles joined, {counts.get('copy', 0)} syndicated copies, "
                 f"{counts.get('version', 0)} new versions; {counts.get('merge', 0)} merge and "
                 f"{counts.get('split', 0)} split changes")
    return "\n".join(lines) + "\n"
