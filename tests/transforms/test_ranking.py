"""Ranking transforms: scores and smoothing, Breaking, stability, diversity, representatives, sections."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from transforms.diversity import DiversityRule, diversify, stabilize_order
from transforms.pages import impressions_from_versions
from transforms.ranking import (
    BreakingRule,
    ScoreWeights,
    breaking_since,
    poisson_tail,
    rank_editions,
    score_stories,
)
from transforms.representative import (
    RepresentativeWeights,
    choose_edition_representative,
    headline_quality,
    rotation_index,
    supporting_links,
)
from transforms.sections import article_sections, story_sections_from_votes

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _parts(story: str, coverage: list[float], *, regions: tuple[list[str], list[float]] = (["US"], [1.0]),
           bursts: list[tuple[int, int]] = (), baseline: float = 0.5) -> dict[str, object]:
    n = len(coverage)
    return {"story_id": story, "language": "en", "first_seen_at": NOW - timedelta(hours=1),
            "coverage": coverage, "velocity": [0.0] * n, "freshness": [1.0] * n,
            "regions": regions[0], "region_shares": regions[1],
            "burst_at": [NOW - timedelta(minutes=m) for m, _ in bursts], "burst_originals": [c for _, c in bursts],
            "baseline_rate": baseline}


def _frame(rows: list[dict[str, object]]) -> pl.LazyFrame:
    return pl.LazyFrame(rows, schema={
        "story_id": pl.String, "language": pl.String, "first_seen_at": pl.Datetime("us", "UTC"),
        "coverage": pl.List(pl.Float64), "velocity": pl.List(pl.Float64), "freshness": pl.List(pl.Float64),
        "regions": pl.List(pl.String), "region_shares": pl.List(pl.Float64),
        "burst_at": pl.List(pl.Datetime("us", "UTC")), "burst_originals": pl.List(pl.Int64),
        "baseline_rate": pl.Float64})


@pytest.mark.parametrize(("k", "rate", "expected"), [(0, 2.0, 1.0), (1, 0.0, 0.0), (10, 0.5, 1.7e-10), (3, 3.0, 0.5768)],
                         ids=["zero", "no-rate", "burst", "common"])
def test_poisson_tail(k: int, rate: float, expected: float) -> None:
    assert poisson_tail(k, rate) == pytest.approx(expected, rel=1e-2)


def test_breaking_needs_a_tiny_tail_and_expires() -> None:
    rule = BreakingRule()
    at = NOW - timedelta(minutes=3)
    assert breaking_since([at], [12], 0.5, now=NOW, rule=rule) == at
    assert breaking_since([at], [12], 5.0, now=NOW, rule=rule) is None  # a busy topic: 12 is normal
    old = NOW - timedelta(hours=2, minutes=1)
    assert breaking_since([old], [12], 0.5, now=NOW, rule=rule) is None


def test_smoothing_averages_lags_and_a_burst_skips_it() -> None:
    frame = _frame([_parts("calm", [1.0, 3.0, 3.0]), _parts("burst", [3.0, 1.0, 0.0], bursts=[(2, 12)])])
    out = score_stories(frame, now=NOW, weights=ScoreWeights(velocity=0, smoothing_cycles=3),
                        rule=BreakingRule()).collect()
    rows = {r["story_id"]: r for r in out.to_dicts()}
    assert rows["calm"]["base"] == pytest.approx(7 / 3) and not rows["calm"]["is_breaking"]
    assert rows["burst"]["base"] == pytest.approx(3.0) and rows["burst"]["is_breaking"]


def test_regional_share_and_pinning_per_edition() -> None:
    frame = _frame([_parts("us", [2.0], regions=(["US"], [1.0])), _parts("gb", [2.2], regions=(["GB"], [1.0])),
                    _parts("hot", [0.5], regions=(["US"], [1.0]), bursts=[(1, 15)])])
    weights = ScoreWeights(smoothing_cycles=1)
    scored = score_stories(frame, now=NOW, weights=weights, rule=BreakingRule())
    editions = pl.LazyFrame({"edition": ["en-US", "en-GB"], "language": ["en", "en"], "region": ["US", "GB"]})
    sections = pl.LazyFrame({"story_id": ["us"], "section": ["world"]})
    ranked = rank_editions(scored, sections, editions, weights=weights, rule=BreakingRule(),
                           top_k={"top": 10}, default_k=10).collect()
    top = {e: ranked.filter((pl.col("edition") == e) & (pl.col("section") == "top"))["story_id"].to_list()
           for e in ("en-US", "en-GB")}
    assert top == {"en-US": ["hot", "us", "gb"], "en-GB": ["gb", "us", "hot"]}
    assert ranked.filter(pl.col("section") == "world")["story_id"].to_list() == ["us", "us"]


@pytest.mark.parametrize(("scores", "previous", "expected"), [
    ({"a": 1.0, "b": 1.09}, ["a", "b"], ["a", "b"]),
    ({"a": 1.0, "b": 1.11}, ["a", "b"], ["b", "a"]),
    ({"a": 1.0, "b": 0.9, "n": 0.95}, ["a", "b"], ["a", "n", "b"]),
], ids=["within-margin", "past-margin", "newcomer-by-score"])
def test_stabilize_order(scores: dict[str, float], previous: list[str], expected: list[str]) -> None:
    ranked = sorted(scores, key=lambda s: -scores[s])
    assert stabilize_order(ranked, scores, previous, margin=0.1) == expected


def test_diversify_caps_sections_drops_near_duplicates_and_keeps_a_fresh_slot() -> None:
    order = [f"s{i}" for i in range(14)]
    sections = {s: ["sports"] if i < 5 else [f"other{i}"] for i, s in enumerate(order)}
    twins = {frozenset({"s6", "s7"})}
    page = diversify(order, sections, lambda a, b: 0.9 if frozenset({a, b}) in twins else 0.1,
                     rule=DiversityRule(fresh_slot_rank=4), fresh=["s13"], limit=10, cap_sections=True)
    assert "s7" not in page and page[3] == "s13"
    assert sum(sections[s] == ["sports"] for s in page[:10]) <= 3


def _m(article: str, publisher: str, authority: float, minutes: int, **kw: object) -> dict[str, object]:
    base = {"article_id": article, "publisher_id": publisher, "authority": authority, "is_copy": False,
            "copy_of": None, "first_seen_at": NOW - timedelta(minutes=minutes), "title": f"A plain headline about {article}",
            "region": "US", "is_paywalled": False, "terms": ["x"], "term_weights": [1.0]}
    return {**base, **kw}


def test_representative_respects_the_daily_cap_and_prefers_free_near_ties() -> None:
    members = [_m("a", "big", 0.9, 10), _m("b", "mid", 0.88, 10, is_paywalled=True), _m("c", "other", 0.87, 10)]
    weights = RepresentativeWeights()
    pick = choose_edition_representative("s", members, {"x": 1.0}, edition="en-US", region="US",
                                         is_local_story=False, now=NOW, impressions={}, weights=weights)
    assert pick["article_id"] in {"a", "c"}  # near-ties: the paywalled one steps aside
    capped = choose_edition_representative("s", members, {"x": 1.0}, edition="en-US", region="US",
                                           is_local_story=False, now=NOW,
                                           impressions={"big": 200.0, "other": 200.0, "x": 600.0}, weights=weights)
    assert capped["article_id"] == "b"


def test_supporting_links_one_per_publisher_and_one_copy_per_wire_story() -> None:
    rep = _m("r", "p0", 0.9, 5)
    members = [rep, _m("a1", "p1", 0.8, 5), _m("a2", "p1", 0.8, 9), _m("b", "p2", 0.5, 5),
               _m("c1", "p3", 0.5, 5, is_copy=True, copy_of="w"), _m("c2", "p4", 0.5, 6, is_copy=True, copy_of="w")]
    links = supporting_links(rep, members, count=4, mmr_lambda=0.7)
    assert [m["article_id"] for m in links] == ["a2", "b", "c2"]


@pytest.mark.parametrize(("title", "good"), [("Senate passes the budget after a long night", True),
                                             ("SHOCKING!! YOU WON'T BELIEVE IT", False), ("Wow", False)],
                         ids=["plain", "clickbait-caps", "short"])
def test_headline_quality(title: str, good: bool) -> None:
    assert (headline_quality(title) >= 0.9) is good


def test_rotation_is_stable_within_an_hour() -> None:
    hour = NOW.replace(minute=0)
    assert rotation_index("s", "en-US", hour, 3) == rotation_index("s", "en-US", hour, 3)
    assert {rotation_index(f"s{i}", "en-US", hour, 3) for i in range(30)} == {0, 1, 2}


def test_sections_from_hints_categories_and_the_classifier() -> None:
    assert article_sections(["Sport", None, None, None], [None, ["Economy"], None, None],
                            ["world", None, "health", None]) == ["sports", "business", "health", None]
    assert story_sections_from_votes(["world", "world", "politics"]) == ["world"]


def test_impressions_count_minutes_live_today() -> None:
    versions = [("2026-12-01T11:00:00Z", ["a", "b"]), ("2026-12-01T11:30:00Z", ["a"]), ("2026-11-30T23:00:00Z", ["z"])]
    assert impressions_from_versions(versions, NOW) == {"a": 60.0, "b": 30.0}


def test_the_burst_baseline_is_the_topic_s_when_it_has_history() -> None:
    rows = [_parts(f"busy{i}", [1.0]) for i in range(5)]
    rows.append(_parts("burst", [1.0], bursts=[(2, 12)], baseline=0.5))
    frame = _frame(rows).with_columns(pl.Series("first_hour_rate", [6.0] * 5 + [None], dtype=pl.Float64))
    busy = pl.LazyFrame({"story_id": [f"busy{i}" for i in range(5)] + ["burst"], "section": ["sports"] * 6})
    quiet = pl.LazyFrame({"story_id": ["burst"], "section": ["science"]})
    kw = {"now": NOW, "weights": ScoreWeights(smoothing_cycles=1), "rule": BreakingRule()}
    in_sports = score_stories(frame, story_sections=busy, **kw).filter(pl.col("story_id") == "burst").collect()
    in_science = score_stories(frame, story_sections=quiet, **kw).filter(pl.col("story_id") == "burst").collect()
    assert not in_sports["is_breaking"][0]  # 12 in 5 min is what a new sports story gets
    assert in_science["is_breaking"][0]  # no science history: the language baseline (0.5) holds


def test_breaking_lasts_from_the_first_burst_and_a_later_one_never_restarts_it() -> None:
    rule = BreakingRule()
    first = NOW - timedelta(hours=2, minutes=10)
    later = first + timedelta(minutes=50)
    assert breaking_since([later, first], [12, 12], 0.5, now=first + timedelta(minutes=55), rule=rule) == first
    assert breaking_since([first, later], [12, 12], 0.5, now=NOW, rule=rule) is None
    # a first window too ordinary to break does not count: the first one that breaks does
    assert breaking_since([first, later], [3, 12], 0.5, now=NOW, rule=rule) == later
    # a burst after ``now`` (a rebuild at an earlier instant) is not seen
    assert breaking_since([first, later], [12, 12], 0.5, now=first - timedelta(minutes=1), rule=rule) is None


def test_non_finite_parts_rank_lowest_and_score_zero() -> None:
    nan, inf = float("nan"), float("inf")
    frame = _frame([_parts("zero", [0.0], regions=(["US"], [nan])), _parts("odd", [nan], regions=(["US"], [1.0])),
                    _parts("huge", [inf]), _parts("fine", [0.4])])
    weights = ScoreWeights(smoothing_cycles=1)
    scored = score_stories(frame, now=NOW, weights=weights, rule=BreakingRule())
    editions = pl.LazyFrame({"edition": ["en-US"], "language": ["en"], "region": ["US"]})
    ranked = rank_editions(scored, pl.LazyFrame({"story_id": [], "section": []}, schema={"story_id": pl.String,
                           "section": pl.String}), editions, weights=weights, rule=BreakingRule(),
                           top_k={"top": 10}, default_k=10).collect()
    assert ranked["story_id"][0] == "fine"
    assert all(math.isfinite(v) for c in ("score", "coverage", "regional_share") for v in ranked[c])
    assert ranked.filter(pl.col("story_id") != "fine")["score"].to_list() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(("fresh", "expected_slot"), [(["b4"], None), (["b4", "f1"], "f1")],
                         ids=["no-fresh-story-fits", "the-next-fresh-story-that-fits"])
def test_the_fresh_slot_keeps_the_section_cap(fresh: list[str], expected_slot: str | None) -> None:
    order = ["b1", "b2", "b3", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "b4", "f1"]
    sections = {s: ["business"] if s.startswith("b") else [f"other-{s}"] for s in order}
    rule = DiversityRule()
    page = diversify(order, sections, lambda a, b: 0.0, rule=rule, fresh=fresh, limit=30, cap_sections=True)
    assert sum("business" in sections[s] for s in page[:10]) <= rule.max_per_section_top10
    unchanged = diversify(order, sections, lambda a, b: 0.0, rule=rule, fresh=[], limit=30, cap_sections=True)
    expected = unchanged if expected_slot is None else [*[s for s in unchanged if s != expected_slot][:7],
                                                        expected_slot, *[s for s in unchanged if s != expected_slot][7:]]
    assert page == expected


def test_an_untitled_article_is_never_the_representative() -> None:
    members = [_m("blank", "big", 0.99, 1, title=""), _m("space", "big2", 0.99, 1, title="   "),
               _m("named", "small", 0.2, 30)]
    kw = {"edition": "en-US", "region": "US", "is_local_story": False, "now": NOW, "impressions": {},
          "weights": RepresentativeWeights()}
    assert choose_edition_representative("s", members, {"x": 1.0}, **kw)["article_id"] == "named"
    with pytest.raises(ValueError, match="no titled article"):
        choose_edition_representative("s", members[:2], {"x": 1.0}, **kw)


def test_a_dateline_headline_is_never_the_edition_representative() -> None:
    members = [_m("dated", "big", 0.99, 1, title="16 September 2013 Last updated at 12:42 GMT"),
               _m("named", "small", 0.2, 30)]
    kw = {"edition": "en-US", "region": "US", "is_local_story": False, "now": NOW, "impressions": {},
          "weights": RepresentativeWeights()}
    assert choose_edition_representative("s", members, {"x": 1.0}, **kw)["article_id"] == "named"
