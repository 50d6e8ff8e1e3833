from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from repair_corpus import bern, mannheim

from transforms.clustering import (
    ClusterParams,
    LanguageClusterer,
    Member,
    RepairParams,
    cluster_and_repair,
    repair_stories,
    split_members,
    story_representative,
)
from transforms.features import ArticleFeatures, features_from_text

T0 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
# An online pass that joins everything: a story fed two events.
MIXING = ClusterParams(join_threshold=0.0, date_conflict_penalty=0.0, year_conflict_penalty=0.0)


def _f(aid: str, text: str, minutes: float, publisher: str | None = None) -> ArticleFeatures:
    return features_from_text(aid, text.split(". ")[0][:80], text, "en", T0 + timedelta(minutes=minutes),
                              publisher_id=publisher or f"pub-{aid}")


def _mixed_stream() -> list[ArticleFeatures]:
    # The 2nd article comes from the other event: the early mixing issue 4 is about.
    out = [_f("m0", mannheim(0), 0), _f("b0", bern(0), 1)]
    for i in range(1, 6):
        out += [_f(f"m{i}", mannheim(i), 2 * i), _f(f"b{i}", bern(i), 2 * i + 1)]
    return out


def test_story_fed_two_events_is_split_and_keeps_its_id_with_the_representative() -> None:
    clusterer = LanguageClusterer("en", MIXING)
    decisions = [clusterer.assign(f) for f in _mixed_stream()]
    story_id = decisions[0].story_id
    assert {d.story_id for d in decisions} == {story_id}
    repairs = repair_stories(clusterer, T0 + timedelta(minutes=20))
    assert [r.kind for r in repairs] == ["split"]
    split = repairs[0]
    assert split.story_id == story_id  # m0, the representative, stays
    assert {aid for aid, _ in split.moved} == {f"b{i}" for i in range(6)}
    assert sorted(m.article_id for m in clusterer.story_members(story_id)) == [f"m{i}" for i in range(6)]
    assert clusterer.story_members(split.other_story_id)[0].article_id == "b0"


def test_split_follows_a_given_representative() -> None:
    clusterer = LanguageClusterer("en", MIXING)
    decisions = [clusterer.assign(f) for f in _mixed_stream()]
    story_id = decisions[0].story_id
    repairs = repair_stories(clusterer, T0 + timedelta(minutes=20), representatives={story_id: "b3"})
    assert {aid for aid, _ in repairs[0].moved} == {f"m{i}" for i in range(6)}


def test_split_needs_three_sources_per_half() -> None:
    clusterer = LanguageClusterer("en", MIXING)
    stream = [_f(f"m{i}", mannheim(i), i, publisher="one") for i in range(6)]
    stream += [_f(f"b{i}", bern(i), 10 + i, publisher=f"p{i}") for i in range(6)]
    for f in stream:
        clusterer.assign(f)
    assert repair_stories(clusterer, T0 + timedelta(minutes=30)) == []


def test_two_stories_born_a_minute_apart_are_merged_into_the_older() -> None:
    clusterer = LanguageClusterer("en", ClusterParams(join_threshold=0.95))  # the online pass keeps them apart
    first = clusterer.assign(_f("m0", mannheim(0), 0))
    second = clusterer.assign(_f("m1", mannheim(1), 1))
    assert first.story_id != second.story_id
    repairs = repair_stories(clusterer, T0 + timedelta(minutes=10))
    assert [(r.kind, r.story_id, r.other_story_id) for r in repairs] == [("merge", first.story_id, second.story_id)]
    assert clusterer.story_ids() == [first.story_id]
    # The next article of the event joins the survivor, and a copy of the merged article names it.
    later = clusterer.assign(_f("m1-copy", "Wire: " + mannheim(1), 12))
    assert later.story_id == first.story_id and later.copy_of == "m1"


def test_one_pass_folds_every_fragment_of_an_event_into_the_oldest() -> None:
    clusterer = LanguageClusterer("en", ClusterParams(join_threshold=0.95))  # every article starts a story
    fragments = [clusterer.assign(_f(f"m{i}", mannheim(i), i)).story_id for i in range(4)]
    other = clusterer.assign(_f("b0", bern(0), 5)).story_id
    repairs = repair_stories(clusterer, T0 + timedelta(minutes=10))
    assert [(r.kind, r.story_id) for r in repairs] == [("merge", fragments[0])] * 3
    assert sorted(r.other_story_id for r in repairs) == sorted(fragments[1:])
    assert clusterer.story_ids() == sorted([fragments[0], other])
    assert sorted(m.article_id for m in clusterer.story_members(fragments[0])) == ["m0", "m1", "m2", "m3"]


def test_other_events_are_not_merged_and_cooldown_holds() -> None:
    clusterer = LanguageClusterer("en", ClusterParams(join_threshold=0.95))
    a = clusterer.assign(_f("m0", mannheim(0), 0))
    b = clusterer.assign(_f("b0", bern(0), 1))
    assert repair_stories(clusterer, T0 + timedelta(minutes=10)) == []
    c = clusterer.assign(_f("m1", mannheim(1), 2))
    repairs = repair_stories(clusterer, T0 + timedelta(minutes=10))
    assert [(r.story_id, r.other_story_id) for r in repairs] == [(a.story_id, c.story_id)]
    d = clusterer.assign(_f("m2", mannheim(2), 11))
    # a was repaired at +10 min: not again before +40 min.
    assert repair_stories(clusterer, T0 + timedelta(minutes=20)) == []
    assert [r.story_id for r in repair_stories(clusterer, T0 + timedelta(minutes=41))] == [a.story_id]
    assert d.story_id != a.story_id and b.story_id in clusterer.story_ids()


def test_state_round_trip_keeps_members_and_repair_times() -> None:
    clusterer = LanguageClusterer("en", MIXING)
    for f in _mixed_stream():
        clusterer.assign(f)
    repair_stories(clusterer, T0 + timedelta(minutes=20))
    state = json.loads(json.dumps(clusterer.to_state()))
    assert LanguageClusterer.from_state(state).to_state() == state


def test_split_members_is_deterministic_and_orders_halves() -> None:
    clusterer = LanguageClusterer("en", MIXING)
    decisions = [clusterer.assign(f) for f in _mixed_stream()]
    members = clusterer.story_members(decisions[0].story_id)
    cut = split_members(members, clusterer.idf())
    assert cut is not None and cut == split_members(members, clusterer.idf())
    half_a, half_b, within, across = cut
    assert half_a[0] == "m0" and within > across
    assert split_members(members[:1], clusterer.idf()) is None


def test_cluster_and_repair_reports_final_stories() -> None:
    stream = _mixed_stream()
    out = cluster_and_repair(stream, MIXING)
    stories = {a.article_id: a.story_id for a in out}
    assert len({stories[f"m{i}"] for i in range(6)}) == 1
    assert len({stories[f"b{i}"] for i in range(6)}) == 1
    assert stories["m0"] != stories["b0"]
    assert [a.article_id for a in out] == [f.article_id for f in stream]


def test_params_checked() -> None:
    with pytest.raises(ValueError):
        RepairParams(merge_threshold=1.5)
    with pytest.raises(ValueError):
        RepairParams(split_min_sources=0)


# --------------------------------------------------------------------------------------------------
# Which half of a split keeps the story id: the one holding the story's representative.
# --------------------------------------------------------------------------------------------------



def _member(aid: str, seen: int, publisher: str | None, copy_of: str | None = None) -> Member:
    return Member(aid, seen, publisher, copy_of, (), (), ())


MEMBERS = [_member("a", 0, "p1"), _member("b", 1, "p2"), _member("c", 2, "p3", copy_of="a"), _member("d", 3, None)]


def test_a_published_representative_that_is_a_member_wins() -> None:
    assert story_representative(MEMBERS, "a", published="b", authority={"p1": 0.9}) == "b"


def test_a_published_copy_stands_for_its_original() -> None:
    assert story_representative(MEMBERS, "b", published="c") == "a"


def test_a_published_representative_no_longer_a_member_falls_back() -> None:
    assert story_representative(MEMBERS, "a", published="zz", authority={"p2": 0.9, "p1": 0.1}) == "b"
    assert story_representative(MEMBERS, "a", published="zz") == "a"


def test_fallback_is_the_pages_rule_highest_authority_then_first_seen_then_id() -> None:
    assert story_representative(MEMBERS, "a", authority={"p1": 0.5, "p2": 0.5}) == "a"
    assert story_representative(MEMBERS, "a", authority={"p1": 0.5, "p2": 0.6}) == "b"
    # A copy is never chosen over an original, whatever its publisher's authority.
    assert story_representative(MEMBERS, "a", authority={"p1": 0.1, "p2": 0.2, "p3": 1.0}) == "b"


def test_fallback_without_authority_is_the_first_article() -> None:
    assert story_representative(MEMBERS, "a") == "a"
    assert story_representative(MEMBERS, "a", authority={}) == "a"
    assert story_representative(MEMBERS, "a", authority={"unknown": 1.0}) == "a"


def _mixed() -> tuple[LanguageClusterer, str]:
    clusterer = LanguageClusterer("en", MIXING)
    stream = [_f("m0", mannheim(0), 0, "pm0"), _f("b0", bern(0), 1, "pb0")]
    for i in range(1, 6):
        stream += [_f(f"m{i}", mannheim(i), 2 * i, f"pm{i}"), _f(f"b{i}", bern(i), 2 * i + 1, f"pb{i}")]
    story_ids = {clusterer.assign(f).story_id for f in stream}
    (story_id,) = story_ids
    return clusterer, story_id


def test_split_keeps_the_id_with_the_authority_representative_when_none_is_published() -> None:
    clusterer, story_id = _mixed()
    authority = {f"pm{i}": 0.3 for i in range(6)} | {f"pb{i}": 0.3 for i in range(6)} | {"pb2": 0.9}
    (split,) = repair_stories(clusterer, T0 + timedelta(minutes=20), authority=authority)
    assert split.story_id == story_id
    assert {aid for aid, _ in split.moved} == {f"m{i}" for i in range(6)}


def test_split_prefers_the_published_representative_over_authority() -> None:
    clusterer, story_id = _mixed()
    authority = {"pb2": 0.9}
    (split,) = repair_stories(clusterer, T0 + timedelta(minutes=20), representatives={story_id: "m4"},
                              authority=authority)
    assert {aid for aid, _ in split.moved} == {f"b{i}" for i in range(6)}
