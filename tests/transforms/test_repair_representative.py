"""Which half of a split keeps the story id: the one holding the story's representative."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from repair_corpus import bern, mannheim

from transforms.clustering import (
    ClusterParams,
    LanguageClusterer,
    Member,
    repair_stories,
    story_representative,
)
from transforms.features import ArticleFeatures, features_from_text

T0 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
MIXING = ClusterParams(join_threshold=0.0, date_conflict_penalty=0.0, year_conflict_penalty=0.0)


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


def _f(aid: str, text: str, minutes: float, publisher: str) -> ArticleFeatures:
    return features_from_text(aid, text.split(". ")[0][:80], text, "en", T0 + timedelta(minutes=minutes), publisher)


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
