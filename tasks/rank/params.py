"""Rank's settings as the plain parameters the pure ranking and page functions take."""

from __future__ import annotations

from datetime import datetime

from tasks.settings import RankSettings
from transforms.diversity import DiversityRule
from transforms.pages import (
    EditionRules,
    PageLimits,
)
from transforms.rank_pages import RankParams
from transforms.ranking import BreakingRule, ScoreWeights
from transforms.representative import RepresentativeWeights
from transforms.story_scores import PartsParams


def score_params(now: datetime, s: RankSettings) -> dict[str, object]:
    """The parameters of ``story_scores.sql`` (the reference the score parts are tested against)."""
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


def parts_params(s: RankSettings) -> PartsParams:
    """The windows of the score parts (``story_scores.sql``'s parameters)."""
    return PartsParams(
        coverage_window_hours=s.coverage_window_hours, half_life_hours=s.freshness_half_life_hours,
        active_hours=s.active_hours, velocity_window_minutes=s.velocity_window_minutes, cycle_seconds=s.cycle_seconds,
        smoothing_cycles=s.smoothing_cycles, burst_window_minutes=s.burst_window_minutes,
        burst_min_articles=s.burst_min_articles, burst_min_publishers=s.burst_min_publishers,
        burst_authority_floor=s.burst_authority_floor, breaking_hours=s.breaking_hours,
        breaking_new_story_minutes=s.breaking_new_story_minutes)



def rank_params(s: RankSettings) -> RankParams:
    """Everything :func:`transforms.rank_pages.rank_pages` takes of the settings."""
    return RankParams(parts=parts_params(s), weights=score_weights(s), rule=breaking_rule(s), editions=edition_rules(s),
                      ranking=ranking_rules(s))
