"""The For-you re-rank as a pure function: affinity, drops, the run limit and reasons."""

from __future__ import annotations

from typing import Any

import pytest

from serving.foryou import build_pool, rerank_for_you
from serving.profiles import Profile


def story(story_id: str, score: float, section: str, publishers: list[str], updated: str = "2026-12-02T10:00:00Z",
          title: str = "headline words") -> dict[str, Any]:
    return {
        "story_id": story_id, "score": score, "sections": [section], "title": title, "updated_at": updated,
        "sources": [{"article_id": f"{story_id}-{p}", "publisher_id": p, "publisher": p.title(), "url": "https://x/"}
                    for p in publishers],
    }


POOL = build_pool([[
    story("a", 5.0, "world", ["p1"]), story("b", 4.0, "world", ["p2"]), story("c", 3.0, "world", ["p3"]),
    story("d", 2.0, "sports", ["p1", "p4"]), story("e", 1.0, "technology", ["p5"], title="battery trains"),
]])


def ids(profile: Profile) -> list[str]:
    return [p.candidate.story_id for p in rerank_for_you(POOL, profile)]


def test_no_more_than_two_of_a_topic_in_a_row() -> None:
    assert ids(Profile("r", followed_topics=frozenset({"zzz"}))) == ["a", "b", "d", "c", "e"]


@pytest.mark.parametrize(
    ("profile", "expected_first", "reason"),
    [
        (Profile("r", followed_topics=frozenset({"technology"})), "a", None),
        (Profile("r", topic_weights={"sports": 3.0}), "a", None),
        (Profile("r", followed_topics=frozenset({"sports"}), topic_weights={"sports": 1.0}), "d", None),
    ],
    ids=["follow-technology", "weight-sports", "follow-and-weight-sports"],
)
def test_affinity_multiplies_importance(profile: Profile, expected_first: str, reason: str | None) -> None:
    picks = rerank_for_you(POOL, profile)
    assert picks[0].candidate.story_id == expected_first
    by_id = {p.candidate.story_id: p for p in picks}
    if profile.followed_topics == frozenset({"technology"}):
        assert by_id["e"].score == pytest.approx(2.0) and by_id["e"].reason == "Because you follow Technology"
    if profile.topic_weights:
        assert by_id["d"].reason in ("Because you read about Sports", "Because you follow Sports")


def test_hidden_sources_stories_and_reads_are_dropped_unless_developed() -> None:
    read_at = 1_764_669_600.0  # 2025-12-02T10:00:00Z: before every story's update in 2026
    profile = Profile("r", hidden_sources=frozenset({"p2"}), hidden_stories=frozenset({"c"}),
                      reads={"a": 4_000_000_000.0, "d": read_at})
    assert ids(profile) == ["d", "e"]  # b: only hidden sources; c: hidden; a: read after its update


def test_terms_and_sources_count_too() -> None:
    picks = rerank_for_you(POOL, Profile("r", term_weights={"battery": 1.0}, source_weights={"p5": 1.0}))
    e = next(p for p in picks if p.candidate.story_id == "e")
    assert e.score == pytest.approx(1.0 * (1 + 1.0 + 0.5))
    assert e.reason == "Because you read P5"
