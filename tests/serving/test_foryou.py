"""The For-you re-rank as a pure function: affinity, drops, the run limit and reasons."""

from __future__ import annotations

import random
from itertools import islice
from typing import Any

import pytest

from serving.foryou import MAX_RUN, build_pool, rank_for_you, rerank_for_you
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


# -- issue 29: the order made lazily, and a section filter ----------------------------------------------


def _world(seed: int, n: int) -> tuple[list[dict[str, Any]], list[Profile]]:
    """``n`` stories with many equal scores (ties at every cut) and a few profiles."""
    rng = random.Random(seed)
    sections = ["world", "sports", "technology", "science"]
    stories = [story(f"s{i:04d}", round(rng.choice([1.0, 2.0, 2.5, 3.0]) + rng.random() * (i % 3 == 0), 2),
                     rng.choice(sections), rng.sample([f"p{k}" for k in range(12)], rng.randint(1, 3)),
                     title=" ".join(rng.sample(["battery", "trains", "storm", "league", "vaccine", "orbit"], 2)))
               for i in range(n)]
    profiles = [
        Profile("r", followed_topics=frozenset({"sports"})),
        Profile("r", topic_weights={"world": 2.0, "science": 1.0}, source_weights={"p3": 1.0, "p4": 0.7},
                term_weights={"storm": 1.0}, hidden_sources=frozenset({"p1"}),
                hidden_stories=frozenset({"s0003", "s0010"}), reads={"s0001": 4e9}),
        Profile("r", followed_sources=frozenset({"p2", "p5"}), term_weights={"league": 0.4, "orbit": 1.0}),
    ]
    return stories, profiles


def _limit_runs_before(order: list[int], topics: list[int], max_run: int) -> list[int]:
    """The run limit as serving/foryou.py wrote it before issue 29 (a whole list at once)."""
    out: list[int] = []
    deferred: list[int] = []
    last, run = -1, 0

    def take(i: int) -> None:
        nonlocal last, run
        out.append(i)
        run = run + 1 if topics[i] == last else 1
        last = topics[i]

    for i in order:
        while deferred and not (run >= max_run and topics[deferred[0]] == last):
            take(deferred.pop(0))
        if run >= max_run and topics[i] == last:
            deferred.append(i)
        else:
            take(i)
    while deferred:
        take(deferred.pop(0))
    return out


@pytest.mark.parametrize("n", [5, 200, 257, 700], ids=["tiny", "sorted-at-once", "just-past", "two-blocks"])
def test_the_lazy_order_is_the_full_order(n: int) -> None:
    stories, profiles = _world(n, n)
    pool = build_pool([stories])
    for profile in profiles:
        ranking = rank_for_you(pool, profile)
        kept = sorted(ranking.order)
        full = sorted(kept, key=lambda i: (-ranking.scores[i], pool.candidates[i].story_id))
        assert ranking.order == tuple(_limit_runs_before(full, pool.run_topics, MAX_RUN))
        assert list(islice(rank_for_you(pool, profile).iter_order(), 30)) == list(ranking.order[:30])


def test_a_section_filter_ranks_as_a_pool_of_that_section_alone() -> None:
    stories, profiles = _world(3, 400)
    pool = build_pool([stories])
    alone = build_pool([[s for s in stories if "sports" in s["sections"]]])
    for profile in profiles:
        filtered = rank_for_you(pool, profile, only=pool.in_section("sports")).order
        expected = rank_for_you(alone, profile).order
        assert [pool.candidates[i].story_id for i in filtered] == [alone.candidates[i].story_id for i in expected]
        assert filtered  # every profile keeps some sports stories
