"""Story scores per edition and section, from the raw parts ``story_scores.sql`` computes.

score(story, edition) = base(story) * (1 - w_r + w_r * regional_share(story, edition's region)),
base = (w_c * coverage + w_v * velocity) * freshness ** w_f, averaged over the last
``smoothing_cycles`` rank cycles (recomputed from the logs at now, now - 1 cycle, ...; so the
smoothing state is the log itself and ``--as-of`` reproduces it). A Breaking story skips smoothing.

Breaking (issue 5): a burst window with >= ``burst_min_articles`` originals from >= ``burst_min_publishers``
publishers above an authority floor (counted in SQL), soon after the story appeared, whose Poisson
tail against the new-story baseline of its language is below ``max_tail``. It stays Breaking for
``breaking_hours`` from the first such window and is pinned where its region share is enough.

Top-K per (edition, section) never builds the dense stories x editions frame: a story with no
coverage from an edition's region scores base * (1 - w_r) there, so the union of the stories
covered from that region and the global top-K of the language holds the edition's top-K.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

TOP_SECTION = "top"
RANKED_COLUMNS = ("edition", "section", "story_id", "score", "coverage", "velocity", "freshness", "regional_share",
                  "is_breaking", "is_pinned", "breaking_since", "first_seen_at", "position")
"""What :func:`rank_editions` returns, in order: the fields of ``transforms.records.RankedStory``."""

STORY_PARTS_SCHEMA: dict[str, object] = {
    "story_id": pl.String, "language": pl.String, "first_seen_at": pl.Datetime("us", "UTC"),
    "coverage": pl.List(pl.Float64), "velocity": pl.List(pl.Float64), "freshness": pl.List(pl.Float64),
    "regions": pl.List(pl.String), "region_shares": pl.List(pl.Float64),
    "burst_at": pl.List(pl.Datetime("us", "UTC")), "burst_originals": pl.List(pl.Int64),
    "baseline_rate": pl.Float64,
}
"""Columns ``score_stories`` needs (extra columns are ignored); checked up front."""


@dataclass(frozen=True, slots=True)
class ScoreWeights:
    coverage: float = 1.0
    velocity: float = 0.5
    freshness: float = 1.0
    regional: float = 0.5
    smoothing_cycles: int = 5

    def __post_init__(self) -> None:
        if not 0 <= self.regional <= 1:
            raise ValueError(f"regional weight must be in [0, 1], got {self.regional}")
        if self.smoothing_cycles < 1:
            raise ValueError(f"smoothing_cycles must be >= 1, got {self.smoothing_cycles}")


@dataclass(frozen=True, slots=True)
class BreakingRule:
    max_tail: float = 1e-6
    baseline_floor: float = 0.5
    breaking_hours: float = 2.0
    min_regional_share: float = 0.2


def poisson_tail(k: int, rate: float) -> float:
    """P(X >= k) for X ~ Poisson(rate), summed in log space so tiny tails stay exact.

    >>> poisson_tail(0, 3.0)
    1.0
    >>> f"{poisson_tail(10, 0.5):.2e}"
    '1.71e-10'
    """
    if rate <= 0:
        return 0.0 if k > 0 else 1.0
    if k <= 0:
        return 1.0
    terms = [-rate + j * math.log(rate) - math.lgamma(j + 1) for j in range(k, k + 200)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def breaking_since(burst_at: list[datetime], burst_originals: list[int], baseline_rate: float, *,
                   now: datetime, rule: BreakingRule) -> datetime | None:
    """The story's first burst window whose Poisson tail is below the rule's, while it is less than
    ``breaking_hours`` old; None otherwise. A later burst never restarts Breaking, so ``burst_at``
    must hold every burst of the story up to ``now``, not only the recent ones."""
    rate = max(baseline_rate, rule.baseline_floor)
    for at, count in sorted(zip(burst_at, burst_originals, strict=True)):
        if at > now:
            break
        if poisson_tail(count, rate) < rule.max_tail:
            return at if now - timedelta(hours=rule.breaking_hours) < at else None
    return None


def _finite(expr: pl.Expr) -> pl.Expr:
    """``expr`` where it is a finite number, else 0.0: a NaN, infinite or missing part or score
    (say 0/0 from stories whose publishers all have authority 0) ranks lowest, never first (polars
    sorts NaN above every number), and never reaches a page as invalid JSON."""
    return pl.when(expr.is_finite()).then(expr).otherwise(pl.lit(0.0))


def _check_columns(frame: pl.LazyFrame, schema: Mapping[str, object]) -> None:
    have = frame.collect_schema()
    missing = [c for c in schema if c not in have]
    if missing:
        raise ValueError(f"story parts lack columns {missing}")


MIN_TOPIC_STORIES = 5
"""A topic's own new-story baseline needs this many settled stories; else the language's is used."""


def topic_baselines(parts: pl.LazyFrame, story_sections: pl.LazyFrame, *,
                    min_stories: int = MIN_TOPIC_STORIES) -> pl.LazyFrame:
    """Per story, the originals per burst window a new story of its topic gathers (the highest over
    its sections, so a story in a busy section needs a bigger burst), from settled stories' first
    hours (``first_hour_rate``). Stories in no section with enough history get no row."""
    rates = (parts.select("story_id", "language", "first_hour_rate").drop_nulls("first_hour_rate")
             .join(story_sections, on="story_id")
             .group_by("language", "section")
             .agg(topic_rate=pl.col("first_hour_rate").mean(), stories=pl.len())
             .filter(pl.col("stories") >= min_stories))
    return (parts.select("story_id", "language").join(story_sections, on="story_id")
            .join(rates, on=["language", "section"])
            .group_by("story_id").agg(pl.col("topic_rate").max()))


def score_stories(parts: pl.LazyFrame, *, now: datetime, weights: ScoreWeights, rule: BreakingRule,
                  story_sections: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """One row per story: raw and smoothed base score, its parts at lag 0, and Breaking state.

    Args:
        parts: Rows of ``story_scores.sql`` (STORY_PARTS_SCHEMA; with ``first_hour_rate`` and
            ``story_sections`` the Poisson baseline is the story's topic's, else its language's).
        now: The cycle's instant.
        weights: Score weights and the smoothing length.
        rule: The Breaking rule.

    Returns:
        story_id, language, first_seen_at, coverage, velocity, freshness, raw_score, base,
        is_breaking, breaking_since.
    """
    _check_columns(parts, STORY_PARTS_SCHEMA)
    n = weights.smoothing_cycles

    def lag_base(i: int) -> pl.Expr:
        cov = _finite(pl.col("coverage").list.get(i, null_on_oob=True))
        vel = _finite(pl.col("velocity").list.get(i, null_on_oob=True))
        fresh = _finite(pl.col("freshness").list.get(i, null_on_oob=True))
        return _finite((weights.coverage * cov + weights.velocity * vel) * fresh.pow(weights.freshness))

    lag_scores = [lag_base(i) for i in range(n)]
    lived = [(_finite(pl.col("coverage").list.get(i, null_on_oob=True)) > 0).cast(pl.Float64)
             for i in range(n)]
    # Breaking is a handful of stories: the Poisson test runs per candidate, not per story.
    candidates = parts.filter(pl.col("burst_at").list.len() > 0)
    if story_sections is not None and "first_hour_rate" in parts.collect_schema():
        candidates = (candidates.join(topic_baselines(parts, story_sections), on="story_id", how="left")
                      .with_columns(baseline_rate=pl.coalesce("topic_rate", "baseline_rate")))
    bursts = candidates.select("story_id", "burst_at", "burst_originals", "baseline_rate").collect()
    since = {
        row["story_id"]: breaking_since(row["burst_at"], row["burst_originals"], row["baseline_rate"], now=now,
                                        rule=rule)
        for row in bursts.iter_rows(named=True)
    }
    breaking = pl.LazyFrame(
        {"story_id": list(since), "breaking_since": list(since.values())},
        schema={"story_id": pl.String, "breaking_since": pl.Datetime("us", "UTC")},
    ).drop_nulls()
    return (
        parts.with_columns(
            raw_score=lag_scores[0],
            smoothed=pl.sum_horizontal(lag_scores) / pl.max_horizontal(pl.sum_horizontal(lived), pl.lit(1.0)),
            coverage=_finite(pl.col("coverage").list.first()),
            velocity=_finite(pl.col("velocity").list.first()),
            freshness=_finite(pl.col("freshness").list.first()),
        )
        .join(breaking, on="story_id", how="left")
        .with_columns(is_breaking=pl.col("breaking_since").is_not_null())
        .with_columns(base=pl.when(pl.col("is_breaking")).then(pl.col("raw_score")).otherwise(pl.col("smoothed")))
        .select("story_id", "language", "first_seen_at", "coverage", "velocity", "freshness", "raw_score", "base",
                "is_breaking", "breaking_since", "regions", "region_shares")
    )


def rank_editions(scored: pl.LazyFrame, story_sections: pl.LazyFrame, editions: pl.LazyFrame, *,
                  weights: ScoreWeights, rule: BreakingRule, top_k: dict[str, int], default_k: int
                  ) -> pl.LazyFrame:
    """The best ``k`` stories of every (edition, section), ``top`` included, best first.

    Args:
        scored: ``score_stories`` output.
        story_sections: story_id, section (``top`` is added for every story).
        editions: edition, language, region.
        weights: For the regional weight.
        rule: For the regional share a Breaking story needs to be pinned.
        top_k: Rows kept per section name (``top`` and ``pool`` read as the edition-wide list).
        default_k: Rows kept for any other section.

    Returns:
        edition, section, story_id, score, coverage, velocity, freshness, regional_share,
        is_breaking, is_pinned, breaking_since, first_seen_at, position (1-based), sorted.
    """
    w = weights.regional
    sections = pl.concat([
        story_sections.select("story_id", "section"),
        scored.select("story_id", section=pl.lit(TOP_SECTION)),
    ]).unique()
    k_expr = pl.col("section").replace_strict(top_k, default=default_k, return_dtype=pl.Int64)
    shares = (scored.select("story_id", "regions", "region_shares")
              .explode("regions", "region_shares")
              .drop_nulls("regions")
              .rename({"regions": "region", "region_shares": "regional_share"}))
    base = scored.select("story_id", "language", _finite(pl.col("base")).alias("base"), "is_breaking")
    global_top = (base.join(sections, on="story_id")
                  .with_columns(k=k_expr)
                  .sort(["language", "section", "is_breaking", "base", "story_id"],
                        descending=[False, False, True, True, False])
                  .filter(pl.int_range(pl.len()).over("language", "section") < pl.col("k"))
                  .join(editions.select("edition", "language"), on="language")
                  .select("edition", "section", "story_id"))
    regional_rows = (shares.join(editions, on="region")
                     .join(base.select("story_id", "language"), on=["story_id", "language"])
                     .join(sections, on="story_id")
                     .select("edition", "section", "story_id"))
    candidates = pl.concat([global_top, regional_rows]).unique()
    return (
        candidates.join(editions, on="edition")
        .join(scored.drop("regions", "region_shares", "language"), on="story_id")
        .join(shares, on=["story_id", "region"], how="left")
        .with_columns(regional_share=_finite(pl.col("regional_share")))
        .with_columns(
            score=_finite(pl.col("base") * (1 - w + w * pl.col("regional_share"))),
            is_pinned=pl.col("is_breaking") & (pl.col("regional_share") >= rule.min_regional_share),
            k=k_expr,
        )
        .sort(["edition", "section", "is_pinned", "score", "story_id"], descending=[False, False, True, True, False])
        .with_columns(position=pl.int_range(1, pl.len() + 1).over("edition", "section"))
        .filter(pl.col("position") <= pl.col("k"))
        .select(*RANKED_COLUMNS)
    )
