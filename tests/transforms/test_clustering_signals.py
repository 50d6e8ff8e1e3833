"""Stories from a stream's signals (issue 14): the sentence embedding in the join score (and an
article known by its headline alone), the members' embedding codes and their exact sums, and the
repair pass's adoption of one-article stories, headline-aware splits and the merge that a split
would undo."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from repair_corpus import _BERN, _MANNHEIM, bern, mannheim

from transforms.clustering import (
    ClusterParams,
    LanguageClusterer,
    RepairParams,
    repair_stories,
    split_members,
)
from transforms.clustering.repair import SplitCut, passes_split
from transforms.clustering.scoring import least_joinable_cosine
from transforms.clustering.state import member_from_json, member_to_json
from transforms.clustering.story import (
    EMBEDDING_CODE_SCALE,
    Member,
    count_embeddings,
    embedding_code,
    embedding_direction,
)
from transforms.features import ArticleFeatures, features_from_text

T0 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
MIXING = ClusterParams(join_threshold=0.0, date_conflict_penalty=0.0, year_conflict_penalty=0.0)


def _direction(seed: int) -> np.ndarray:
    """A random unit vector in 512 dimensions (two of them are nearly orthogonal)."""
    vector = np.random.default_rng(seed).normal(size=512)
    return vector / np.linalg.norm(vector)


def _near(base: np.ndarray, seed: int, noise: float = 0.3) -> tuple[float, ...]:
    """A unit vector close to ``base`` (cosine about 0.96 at the default noise)."""
    vector = base + noise * _direction(seed)
    return tuple(float(x) for x in vector / np.linalg.norm(vector))


def _headline(aid: str, title: str, minutes: float, embedding: tuple[float, ...] | None,
              publisher: str | None = None) -> ArticleFeatures:
    """An article known by its title alone (a title-only feed item): no body of its own."""
    return features_from_text(aid, title, "", "en", T0 + timedelta(minutes=minutes), publisher or f"pub-{aid}",
                              embedding=embedding)


def _bodied(aid: str, text: str, minutes: float, embedding: tuple[float, ...] | None = None,
            publisher: str | None = None) -> ArticleFeatures:
    return features_from_text(aid, text.split(". ")[0][:80], text, "en", T0 + timedelta(minutes=minutes),
                              publisher or f"pub-{aid}", embedding=embedding)


SBARRO = ["Sbarro files for bankruptcy protection for the second time",
          "Pizza chain Sbarro back in bankruptcy court",
          "Sbarro seeks Chapter 11 again as mall traffic slumps"]
# Shares one word with the Sbarro headlines, and says the same in other words.
SBARRO_OTHER_WORDS = "Mall pizza seller Sbarro goes under again"


@pytest.mark.parametrize(("same_direction", "joins"), [(True, True), (False, False)],
                         ids=["its-embedding-agrees", "its-embedding-points-elsewhere"])
def test_a_headline_joins_the_story_its_embedding_agrees_with(same_direction: bool, joins: bool) -> None:
    story_dir, other_dir = _direction(1), _direction(2)
    clusterer = LanguageClusterer("en")
    first = [clusterer.assign(_headline(f"s{i}", t, i, _near(story_dir, 10 + i))) for i, t in enumerate(SBARRO)]
    assert len({a.story_id for a in first}) == 1  # the story's own headlines agree in words and embedding
    late = clusterer.assign(_headline("late", SBARRO_OTHER_WORDS, 10,
                                      _near(story_dir if same_direction else other_dir, 20)))
    assert (late.story_id == first[0].story_id) is joins


def test_a_headline_without_an_embedding_is_placed_by_its_words_as_before() -> None:
    plain = ClusterParams(embedding_weight=0.0, headline_embedding_weight=0.0)
    decisions = []
    for params in (ClusterParams(), plain):
        clusterer = LanguageClusterer("en", params)
        decisions.append([(a.is_new_story, a.score) for a in
                          (clusterer.assign(_headline(f"s{i}", t, i, None)) for i, t in enumerate(SBARRO))])
    assert decisions[0] == decisions[1]


def test_the_embedding_lowers_the_postings_bar_only_for_an_article_that_has_one() -> None:
    params = ClusterParams()
    plain = least_joinable_cosine(params)
    assert least_joinable_cosine(params, has_body=True, has_embedding=False) == plain
    assert least_joinable_cosine(params, has_body=True, has_embedding=True) < plain
    assert least_joinable_cosine(params, has_body=False, has_embedding=True) < least_joinable_cosine(
        params, has_body=True, has_embedding=True)


def test_members_keep_whether_they_have_a_body_and_their_embedding_codes() -> None:
    clusterer = LanguageClusterer("en")
    embedding = _near(_direction(3), 4)
    head = clusterer.assign(_headline("h", SBARRO[0], 0, embedding))
    body = clusterer.assign(_bodied("b", mannheim(0), 1))
    (h,), (b,) = clusterer.story_members(head.story_id), clusterer.story_members(body.story_id)
    assert not h.has_body and b.has_body and b.embedding is None
    assert h.embedding is not None
    codes = np.frombuffer(h.embedding, dtype=np.int8).astype(float) / EMBEDDING_CODE_SCALE
    assert float(codes @ np.asarray(embedding)) / float(np.linalg.norm(codes)) > 0.999


@pytest.mark.parametrize("raw", [[0.0] * 512, [], None], ids=["zero", "empty", "none"])
def test_no_embedding_has_no_codes_but_a_zero_one_does(raw: list[float] | None) -> None:
    assert (embedding_code(raw) is None) is (not raw)


def test_a_storys_embedding_sum_is_its_members_codes_through_joins_versions_merges_and_splits() -> None:
    m_dir, b_dir = _direction(5), _direction(6)
    clusterer = LanguageClusterer("en", MIXING)
    for i in range(6):
        clusterer.assign(_bodied(f"m{i}", mannheim(i), 2 * i, _near(m_dir, 100 + i)))
        clusterer.assign(_bodied(f"b{i}", bern(i), 2 * i + 1, _near(b_dir, 200 + i)))
    # a new version of a member swaps its codes
    clusterer.assign(dataclasses.replace(_bodied("m1", mannheim(1) + " Updated.", 13, _near(b_dir, 300))))
    (story_id,) = clusterer.story_ids()
    other = clusterer.assign(_bodied("x", bern(2), 20, _near(b_dir, 301)))

    def check() -> None:
        for sid in clusterer.story_ids():
            story = clusterer.stories[sid]
            running = (None if story.embedding_sum is None else story.embedding_sum.copy(), story.embedded)
            count_embeddings(story)
            assert running[1] == story.embedded
            assert np.array_equal(running[0], story.embedding_sum)

    check()
    clusterer.apply_split(story_id, [f"b{i}" for i in range(6)], T0 + timedelta(minutes=30))
    check()
    if other.story_id != story_id:
        clusterer.apply_merge(story_id, other.story_id, T0 + timedelta(minutes=31))
    check()


def test_a_storys_embedding_direction_is_never_stale() -> None:
    """The cached unit vector of a story's embedding sum is dropped when a member joins, and a
    story whose members have no embedding has none."""
    clusterer = LanguageClusterer("en", MIXING)
    first = clusterer.assign(_bodied("m0", mannheim(0), 0, _near(_direction(30), 31)))
    story = clusterer.stories[first.story_id]
    before = embedding_direction(story)
    assert before is not None and story.embedding_direction is before  # cached
    assert embedding_direction(story) is before
    clusterer.assign(_bodied("m1", mannheim(1), 1, _near(_direction(32), 33)))
    assert clusterer.stories[first.story_id] is story and story.embedded == 2
    after = embedding_direction(story)
    assert after is not None and after is not before
    expected = story.embedding_sum / np.linalg.norm(story.embedding_sum)
    assert np.allclose(after, expected) and not np.allclose(after, before)
    bare = LanguageClusterer("en")
    plain = bare.stories[bare.assign(_bodied("b0", bern(0), 2)).story_id]
    assert plain.embedding_sum is None and embedding_direction(plain) is None


def test_member_rows_round_trip_and_older_rows_have_a_body_and_no_embedding() -> None:
    member = Member("a", 5, "p", None, ("x",), (1.0,), ("anwar",), has_body=False,
                    embedding=embedding_code(_near(_direction(7), 8)))
    assert member_from_json(json.loads(json.dumps(member_to_json(member)))) == member
    older = member_from_json(["a", 5, "p", None, ["x"], [1.0], ["anwar"]])  # a version 3 row
    assert older.has_body and older.embedding is None


def _mixed(clusterer: LanguageClusterer, with_headlines: bool) -> None:
    """One story fed two events (an online pass that joins everything), each told by six outlets
    with a body; with ``with_headlines``, each event also by two title-only items whose embedding
    agrees with its event's."""
    m_dir, b_dir = _direction(11), _direction(12)
    for i in range(6):
        clusterer.assign(_bodied(f"m{i}", mannheim(i), 2 * i, _near(m_dir, 400 + i)))
        clusterer.assign(_bodied(f"b{i}", bern(i), 2 * i + 1, _near(b_dir, 500 + i)))
    if with_headlines:
        for i, (title, direction, prefix) in enumerate([("Klitschko wins again", m_dir, "hm"),
                                                         ("Klitschko wins again", b_dir, "hb")] * 2):
            clusterer.assign(_headline(f"{prefix}{i}", title, 13 + i, _near(direction, 600 + i)))


def test_title_only_members_follow_the_half_their_embedding_agrees_with() -> None:
    clusterer = LanguageClusterer("en", MIXING)
    _mixed(clusterer, with_headlines=True)
    (repair,) = repair_stories(clusterer, T0 + timedelta(minutes=30))
    moved = {aid for aid, _ in repair.moved}
    assert moved == {f"b{i}" for i in range(6)} | {"hb1", "hb3"}


def test_a_story_of_headlines_alone_is_never_cut_by_their_words() -> None:
    clusterer = LanguageClusterer("en", MIXING)
    titles = [mannheim(i).split(". ")[0] for i in range(6)] + [bern(i).split(". ")[0] for i in range(6)]
    for i, title in enumerate(titles):
        clusterer.assign(_headline(f"h{i}", title, i, None))
    assert len(clusterer.story_ids()) == 1
    assert repair_stories(clusterer, T0 + timedelta(minutes=30)) == []
    # the same articles with their bodies are cut in two
    with_bodies = LanguageClusterer("en", MIXING)
    _mixed(with_bodies, with_headlines=False)
    assert [r.kind for r in repair_stories(with_bodies, T0 + timedelta(minutes=30))] == ["split"]


@pytest.mark.parametrize(("margin", "separation", "splits"), [(0.2, 8.0, True), (0.2, 3.0, False), (0.03, 20.0, False)],
                         ids=["apart-and-sure", "apart-by-chance", "sure-but-barely-apart"])
def test_a_split_needs_its_halves_apart_by_enough_and_surely(margin: float, separation: float, splits: bool) -> None:
    members = {f"{side}{i}": Member(f"{side}{i}", 0, f"p-{side}{i}", None, (), (), ()) for side in "ab" for i in range(4)}
    cut = SplitCut([f"a{i}" for i in range(4)], [f"b{i}" for i in range(4)], 0.2 + margin, 0.2, separation)
    assert passes_split(cut, members, RepairParams()) is splits


def _fragments() -> tuple[LanguageClusterer, str, str]:
    """m0 alone in a story, and m1-m3 in another (merged by hand): the online pass kept m0 apart."""
    clusterer = LanguageClusterer("en", ClusterParams(join_threshold=0.95))
    ids = [clusterer.assign(_bodied(f"m{i}", mannheim(i), i)).story_id for i in range(4)]
    for sid in ids[2:]:
        clusterer.apply_merge(ids[1], sid, T0 + timedelta(minutes=5))
    clusterer.params = dataclasses.replace(clusterer.params, join_threshold=ClusterParams().join_threshold)
    return clusterer, ids[0], ids[1]


def test_a_one_article_story_is_adopted_by_the_story_its_article_would_now_join() -> None:
    clusterer, alone, larger = _fragments()
    other = clusterer.assign(_bodied("b0", bern(0), 6)).story_id
    repairs = repair_stories(clusterer, T0 + timedelta(minutes=40))
    assert [(r.kind, r.story_id, r.other_story_id) for r in repairs] == [("merge", larger, alone)]
    assert sorted(clusterer.story_ids()) == sorted([larger, other])  # the other event stays apart


def test_without_adoption_the_merge_pass_keeps_the_oldest() -> None:
    clusterer, alone, larger = _fragments()
    repairs = repair_stories(clusterer, T0 + timedelta(minutes=40), RepairParams(adopt=False))
    assert [(r.story_id, r.other_story_id) for r in repairs] == [(alone, larger)]


@pytest.mark.parametrize(("sources", "merges"), [(3, 1), (4, 0)], ids=["too-few-sources-to-split", "would-split"])
def test_two_stories_the_split_would_cut_apart_again_are_not_merged(sources: int, merges: int) -> None:
    clusterer = LanguageClusterer("en", ClusterParams(date_conflict_penalty=0.0, year_conflict_penalty=0.0))
    for i in range(6):  # undated, so that only the split rule can keep them apart
        clusterer.assign(_bodied(f"m{i}", _MANNHEIM[i].format(d="last night"), i, publisher=f"m-pub{i % sources}"))
    for i in range(6):
        clusterer.assign(_bodied(f"b{i}", _BERN[i].format(d="last night"), 10 + i, publisher=f"b-pub{i % sources}"))
    assert len(clusterer.story_ids()) == 2
    forced = RepairParams(merge_threshold=0.0, adopt=False)
    assert sum(r.kind == "merge" for r in repair_stories(clusterer, T0 + timedelta(minutes=30), forced)) == merges


def test_the_cut_follows_the_events_not_an_outlier() -> None:
    clusterer = LanguageClusterer("en", MIXING)
    _mixed(clusterer, with_headlines=False)
    clusterer.assign(_bodied("z", "Klitschko's old trainer opened a bakery in Riverton on Monday, selling bread and "
                                  "cakes to the neighbours.", 14))
    (story_id,) = clusterer.story_ids()
    originals = [m for m in clusterer.story_members(story_id) if m.copy_of is None]
    cut = split_members(originals, clusterer.idf())
    assert cut is not None
    for half in (cut.half_a, cut.half_b):
        assert not {"m", "b"} <= {aid[0] for aid in half}  # the giraffe goes either way; the events part
