"""The raw parts of every active story's score, from story rows (:mod:`transforms.story_aggregates`).

The same columns ``warehouse/sql/story_scores.sql`` computes from every article of the window,
computed from one compact row per story instead (issue 15): a story's originals older than the
recent window arrive summed up (their count, the last one, each publisher's last one), and the
few recent ones and the first hour's one by one, which is all the lags, coverage, velocity,
bursts and the first-hour baseline look at. ``transforms.ranking.score_stories`` takes the result.

Pure polars over whole frames; every list is sorted with explicit keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

TS = pl.Datetime("us", "UTC")


@dataclass(frozen=True, slots=True)
class PartsParams:
    """The windows of ``story_scores.sql`` (its ``$`` parameters)."""

    coverage_window_hours: float = 6.0
    half_life_hours: float = 4.0
    active_hours: float = 48.0
    velocity_window_minutes: float = 30.0
    cycle_seconds: int = 60
    smoothing_cycles: int = 5
    burst_window_minutes: float = 5.0
    burst_min_articles: int = 10
    burst_min_publishers: int = 5
    burst_authority_floor: float = 0.3
    breaking_hours: float = 2.0
    breaking_new_story_minutes: float = 60.0


PARTS_COLUMNS = ("story_id", "language", "first_seen_at", "last_original_at", "original_count", "coverage",
                 "velocity", "freshness", "regions", "region_shares", "burst_at", "burst_originals",
                 "burst_publishers", "baseline_rate", "first_hour_rate")


def _seconds(expr: pl.Expr) -> pl.Expr:
    return expr.dt.total_microseconds().cast(pl.Float64) / 1e6


def active_stories(stories: pl.DataFrame, *, now: datetime, active_hours: float) -> pl.DataFrame:
    """Stories with an article in the last ``active_hours`` and at least one original."""
    return stories.filter((pl.col("last_seen_at") >= now - timedelta(hours=active_hours))
                          & (pl.col("original_count") > 0))


def story_parts(stories: pl.DataFrame, publishers: pl.DataFrame, *, now: datetime, params: PartsParams
                ) -> pl.DataFrame:
    """One row per active story with the raw parts of its score (``story_scores.sql``'s output).

    Args:
        stories: Story rows (``STORY_AGGREGATES_SCHEMA`` columns) as of an instant at or before
            ``now``; expired ones are left out here.
        publishers: ``publisher_id``, ``authority``, ``region`` of every registered publisher.
        now: The cycle's instant.
        params: The windows.

    Returns:
        ``PARTS_COLUMNS``, sorted by story id.
    """
    p = params
    active = active_stories(stories, now=now, active_hours=p.active_hours)
    auth = publishers.select(pl.col("publisher_id").alias("p"), pl.col("authority").cast(pl.Float64),
                             "region")
    recent = (active.select("story_id", t=pl.col("recent_times"), p=pl.col("recent_publishers"))
              .explode("t", "p").drop_nulls("t"))
    older = (active.select("story_id", p=pl.col("cov_publishers"), t=pl.col("cov_times"))
             .explode("p", "t").drop_nulls("t"))
    base = active.select("story_id", "original_count", "first_original_at", "older_last_at")
    lag_frames = []
    region_rows = None
    for lag in range(p.smoothing_cycles):
        frame, counted = _lag_parts(base, recent, older, auth, lag=lag, now=now, params=p)
        if lag == 0:
            region_rows = counted
        lag_frames.append(frame)
    lists = (pl.concat(lag_frames).sort("story_id", "lag")
             .group_by("story_id", maintain_order=True)
             .agg(pl.col("coverage"), pl.col("velocity"), pl.col("freshness")))
    regions = _regions(region_rows if region_rows is not None else pl.DataFrame())
    return _with_bursts(active, lists, regions, auth, now=now, params=p)


def _velocity(lag_at: datetime, window_minutes: float) -> pl.Expr:
    """How much faster than its own average a story gained originals in the last ``window_minutes``
    before ``lag_at``: log((1 + in window) / (1 + the rest, per window of the story's life)), at least 0."""
    lived_hours = _seconds(pl.lit(lag_at, dtype=TS) - pl.col("first_original_at")) / 3600.0
    return pl.max_horizontal(
        pl.lit(0.0),
        ((1 + pl.col("recent").cast(pl.Float64))
         / (1 + (pl.col("count") - pl.col("recent")).cast(pl.Float64) * (window_minutes / 60.0)
            / pl.max_horizontal(lived_hours - window_minutes / 60.0, pl.lit(1.0)))).log(),
    )


def _freshness(lag_at: datetime, half_life_hours: float) -> pl.Expr:
    """Exponential decay since the story's last original, halving every ``half_life_hours``."""
    return (-math.log(2) * _seconds(pl.lit(lag_at, dtype=TS) - pl.col("last_le")) / 3600.0 / half_life_hours).exp()


def _lag_parts(base: pl.DataFrame, recent: pl.DataFrame, older: pl.DataFrame, auth: pl.DataFrame, *, lag: int,
               now: datetime, params: PartsParams) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Coverage, velocity and freshness of every story as of ``lag`` cycles before ``now`` (the
    smoothing averages them), and the publishers counted for coverage then (story_id, p, t,
    authority, region)."""
    p = params
    vw = p.velocity_window_minutes
    lag_at = now - timedelta(seconds=lag * p.cycle_seconds)
    upto = recent.filter(pl.col("t") <= lag_at)
    after = recent.filter(pl.col("t") > lag_at).group_by("story_id").agg(after=pl.len())
    window = (upto.filter(pl.col("t") > lag_at - timedelta(minutes=vw)).group_by("story_id")
              .agg(in_window=pl.len()))
    last = upto.group_by("story_id").agg(last_recent=pl.col("t").max())
    counted = (pl.concat([upto.select("story_id", "p", "t"), older.select("story_id", "p", "t")])
               .group_by("story_id", "p").agg(pl.col("t").max())
               .filter(pl.col("t") > lag_at - timedelta(hours=p.coverage_window_hours))
               .join(auth, on="p", how="inner")
               .sort("story_id", "p"))
    coverage = counted.group_by("story_id").agg(authority=pl.col("authority").sum())
    frame = (base.join(after, on="story_id", how="left").join(window, on="story_id", how="left")
             .join(last, on="story_id", how="left").join(coverage, on="story_id", how="left")
             .with_columns(count=pl.col("original_count") - pl.col("after").fill_null(0),
                           recent=pl.col("in_window").fill_null(0),
                           last_le=pl.coalesce("last_recent", "older_last_at")))
    has = pl.col("count") > 0
    parts = frame.select(
        "story_id", lag=pl.lit(lag),
        coverage=pl.when(has).then((1 + pl.col("authority").fill_null(0.0)).log()).otherwise(0.0),
        velocity=pl.when(has).then(_velocity(lag_at, vw)).otherwise(0.0),
        freshness=pl.when(has).then(_freshness(lag_at, p.half_life_hours)).otherwise(0.0),
    )
    return parts, counted


def _with_bursts(active: pl.DataFrame, lists: pl.DataFrame, regions: pl.DataFrame, auth: pl.DataFrame, *,
                 now: datetime, params: PartsParams) -> pl.DataFrame:
    """The parts' rows: each story's smoothed lists and regional shares, with its bursts and its
    first hours against its language's baseline (Breaking)."""
    bursts = _bursts(active, auth, now=now, params=params)
    early = _first_hours(active, now=now, params=params)
    out = (active.select("story_id", "language", "first_seen_at", "last_original_at",
                         pl.col("original_count").cast(pl.Int64))
           .join(lists, on="story_id", how="left")
           .join(regions, on="story_id", how="left")
           .join(bursts, on="story_id", how="left")
           .join(early, on="story_id", how="left"))
    baseline = (early.drop_nulls("first_hour_originals").join(active.select("story_id", "language"), on="story_id")
                .group_by("language").agg(language_rate=pl.col("first_hour_originals").cast(pl.Float64).mean()))
    bw = params.burst_window_minutes
    return (out.join(baseline, on="language", how="left")
            .with_columns(
                regions=pl.col("regions").fill_null(pl.lit([], dtype=pl.List(pl.String))),
                region_shares=pl.col("region_shares").fill_null(pl.lit([], dtype=pl.List(pl.Float64))),
                burst_at=pl.col("burst_at").fill_null(pl.lit([], dtype=pl.List(TS))),
                burst_originals=pl.col("burst_originals").fill_null(pl.lit([], dtype=pl.List(pl.Int64))),
                burst_publishers=pl.col("burst_publishers").fill_null(pl.lit([], dtype=pl.List(pl.Int64))),
                baseline_rate=(pl.col("language_rate") * bw / 60.0).fill_null(0.0),
                first_hour_rate=pl.col("first_hour_originals").cast(pl.Float64) * bw / 60.0,
            )
            .select(*PARTS_COLUMNS)
            .sort("story_id"))


def _regions(counted: pl.DataFrame) -> pl.DataFrame:
    """Each story's coverage share per region at lag 0 (null shares when every publisher has
    authority 0, as 0/0 must not be NaN)."""
    if counted.is_empty():
        return pl.DataFrame(schema={"story_id": pl.String, "regions": pl.List(pl.String),
                                    "region_shares": pl.List(pl.Float64)})
    per_region = (counted.group_by("story_id", "region").agg(authority=pl.col("authority").sum())
                  .with_columns(total=pl.col("authority").sum().over("story_id"))
                  .with_columns(share=pl.when(pl.col("total") != 0)
                                .then(pl.col("authority") / pl.col("total")).otherwise(None))
                  .sort("story_id", "region"))
    return per_region.group_by("story_id", maintain_order=True).agg(
        regions=pl.col("region"), region_shares=pl.col("share"))


def _early(active: pl.DataFrame) -> pl.DataFrame:
    return (active.select("story_id", "first_seen_at", t=pl.col("early_times"), p=pl.col("early_publishers"))
            .explode("t", "p").drop_nulls("t"))


def _bursts(active: pl.DataFrame, auth: pl.DataFrame, *, now: datetime, params: PartsParams) -> pl.DataFrame:
    """Every burst window of a story still young enough to turn Breaking (``story_scores.sql``'s
    ``bursts``): per original in its first ``breaking_new_story_minutes``, the originals and the
    publishers above the authority floor in the ``burst_window_minutes`` up to it."""
    p = params
    young = active.filter(pl.col("first_seen_at") > now - timedelta(
        seconds=p.breaking_hours * 3600 + p.breaking_new_story_minutes * 60))
    empty = pl.DataFrame(schema={"story_id": pl.String, "burst_at": pl.List(TS),
                                 "burst_originals": pl.List(pl.Int64), "burst_publishers": pl.List(pl.Int64)})
    if young.is_empty():
        return empty
    entries = _early(young).join(auth.select("p", "authority"), on="p", how="left")
    ends = entries.filter(pl.col("t") <= pl.col("first_seen_at")
                          + timedelta(minutes=p.breaking_new_story_minutes)).select("story_id", end=pl.col("t")).unique()
    windows = (ends.join(entries, on="story_id")
               .filter((pl.col("t") <= pl.col("end"))
                       & (pl.col("t") >= pl.col("end") - timedelta(minutes=p.burst_window_minutes)))
               .group_by("story_id", "end")
               .agg(originals=pl.len().cast(pl.Int64),
                    publishers=pl.col("p").filter(pl.col("authority") >= p.burst_authority_floor)
                    .n_unique().cast(pl.Int64))
               .filter((pl.col("originals") >= p.burst_min_articles)
                       & (pl.col("publishers") >= p.burst_min_publishers)))
    if windows.is_empty():
        return empty
    # One burst row per original, as the SQL window has one per row: peers at one instant repeat.
    per_original = (entries.filter(pl.col("t") <= pl.col("first_seen_at")
                                   + timedelta(minutes=p.breaking_new_story_minutes))
                    .select("story_id", end=pl.col("t"))
                    .join(windows, on=["story_id", "end"])
                    .sort("story_id", "end"))
    return per_original.group_by("story_id", maintain_order=True).agg(
        burst_at=pl.col("end"), burst_originals=pl.col("originals"), burst_publishers=pl.col("publishers"))


def _first_hours(active: pl.DataFrame, *, now: datetime, params: PartsParams) -> pl.DataFrame:
    """Originals in each settled story's first hour (stories older than an hour; null for younger)."""
    settled = active.filter(pl.col("first_seen_at") < now - timedelta(hours=1)).select("story_id")
    counts = (_early(active).filter(pl.col("t") < pl.col("first_seen_at") + timedelta(hours=1))
              .group_by("story_id").agg(n=pl.len()))
    return (settled.join(counts, on="story_id", how="left")
            .select("story_id", first_hour_originals=pl.col("n").fill_null(0).cast(pl.Int64)))


def story_sections(stories: pl.DataFrame, min_share: float = 0.5) -> pl.DataFrame:
    """``story_id, section``: the sections most of each story's votes agree on
    (``transforms.sections.story_sections_from_votes`` over the vote counts a story row keeps)."""
    votes = (stories.select("story_id", s=pl.col("section_names"), c=pl.col("section_counts"))
             .explode("s", "c").drop_nulls("s")
             .with_columns(total=pl.col("c").sum().over("story_id"), best=pl.col("c").max().over("story_id")))
    chosen = votes.with_columns(share_ok=pl.col("c") / pl.col("total") >= min_share)
    any_ok = chosen.group_by("story_id").agg(any_ok=pl.col("share_ok").any())
    return (chosen.join(any_ok, on="story_id")
            .filter(pl.when(pl.col("any_ok")).then(pl.col("share_ok")).otherwise(pl.col("c") == pl.col("best")))
            .select("story_id", section=pl.col("s"))
            .sort("story_id", "section"))
