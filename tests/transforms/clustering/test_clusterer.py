from __future__ import annotations

import base64
import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from embedded_articles import SBARRO, SBARRO_OTHER_WORDS, bodied, direction, headline, near
from repair_corpus import mannheim

from transforms.clustering import (
    Assignment,
    ClusterParams,
    LanguageClusterer,
    cluster_articles,
    make_story_id,
)
from transforms.clustering.story import EMBEDDING_CODE_SCALE
from transforms.clustering.term_index import TermIndex
from transforms.features import ArticleFeatures, features_from_text

_DATA = Path(__file__).resolve().parents[2] / "data" / "articles"
ORIGINAL = (_DATA / "original.txt").read_text(encoding="utf-8").strip()
SAME_EVENT = (_DATA / "same_event.txt").read_text(encoding="utf-8").strip()
UNRELATED = (_DATA / "unrelated.txt").read_text(encoding="utf-8").strip()
T0 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)


def _article(article_id: str, text: str, minutes: float = 0, title: str = "", language: str = "en") -> ArticleFeatures:
    return features_from_text(article_id, title or text.split("\n")[0][:80], text, language, T0 + timedelta(minutes=minutes))


def _stream() -> list[ArticleFeatures]:
    paragraphs = ORIGINAL.split("\n")
    return [
        _article("a-original", ORIGINAL, 0),
        _article("b-giraffe", UNRELATED, 5),
        _article("c-reprint", "RIVERTON (Wire) - " + "\n".join(paragraphs[1:] + paragraphs[:1]), 10, title="Bridge shut"),
        _article("d-same-event", SAME_EVENT, 20),
        _article("e-reprint-of-reprint", "\n".join(paragraphs[1:] + paragraphs[:1]) + "\nMore at 11.", 30),
        _article("f-giraffe-2", UNRELATED.replace("Monday", "Sunday") + "\nKeepers will post photos.", 40),
    ]


def test_copies_name_their_original() -> None:
    out = {a.article_id: a for a in cluster_articles(_stream())}
    assert out["c-reprint"].copy_of == "a-original"
    assert out["c-reprint"].story_id == out["a-original"].story_id
    # A copy of a copy names the first article, not the intermediate one.
    assert out["e-reprint-of-reprint"].copy_of == "a-original"
    assert out["a-original"].copy_of is None and out["a-original"].is_new_story


def test_keys_computed_ahead_for_a_batch_place_every_article_as_keys_computed_one_by_one() -> None:
    # A writer computes a minute's LSH keys in one step (issue 15); the copies found must be the same.
    stream = _stream() + [dataclasses.replace(_stream()[2], article_id="g-reprint-again", minhash=(1, 2, 3))]
    one_by_one = LanguageClusterer("en")
    expected = [one_by_one.assign(f) for f in stream[:-1]]
    ahead = LanguageClusterer("en")
    keys = ahead.copy_keys(stream)
    assert keys[-1] is None  # a signature of another length is left to assign (which rejects it)
    assert keys[:-1] == [one_by_one.copies.bands_of(f.minhash) for f in stream[:-1]]
    assert [ahead.assign(f, k) for f, k in zip(stream[:-1], keys, strict=False)] == expected
    assert sum(a.copy_of is not None for a in expected) >= 2  # copies are among the decisions compared


def test_same_event_joins_without_being_a_copy() -> None:
    out = {a.article_id: a for a in cluster_articles(_stream())}
    assert out["d-same-event"].copy_of is None
    assert out["d-same-event"].story_id == out["a-original"].story_id
    assert not out["d-same-event"].is_new_story


def test_unrelated_articles_make_two_stories() -> None:
    out = {a.article_id: a for a in cluster_articles(_stream())}
    assert out["b-giraffe"].story_id != out["a-original"].story_id
    assert out["b-giraffe"].is_new_story
    assert out["f-giraffe-2"].story_id == out["b-giraffe"].story_id


def test_state_round_trip_gives_identical_assignments() -> None:
    stream = _stream()
    uninterrupted = cluster_articles(stream)
    for cut in range(len(stream) + 1):
        first = LanguageClusterer("en", ClusterParams())
        head = [first.assign(f) for f in stream[:cut]]
        state = json.loads(json.dumps(first.to_state()))
        resumed = LanguageClusterer.from_state(state)
        tail = [resumed.assign(f) for f in stream[cut:]]
        assert head + tail == uninterrupted, f"diverged after a checkpoint at {cut}"
        assert resumed.to_state() == cluster_state_after(stream)


def test_a_version_2_checkpoint_still_loads_and_decides_the_same() -> None:
    stream = _stream()
    cut = len(stream) // 2
    first = LanguageClusterer("en", ClusterParams())
    for f in stream[:cut]:
        first.assign(f)
    state = json.loads(json.dumps(first.to_state()))
    assert all(isinstance(row[4], str) for row in state["recent"])  # version 3: base64 signatures
    old = {**state, "version": 2, "recent": [[*row[:4], np.frombuffer(base64.b64decode(row[4]), "<u4").tolist()]
                                             for row in state["recent"]]}
    resumed, migrated = LanguageClusterer.from_state(state), LanguageClusterer.from_state(old)
    assert [resumed.assign(f) for f in stream[cut:]] == [migrated.assign(f) for f in stream[cut:]]
    assert migrated.to_state() == resumed.to_state()


def cluster_state_after(stream: list[ArticleFeatures]) -> dict[str, object]:
    clusterer = LanguageClusterer("en", ClusterParams())
    for f in stream:
        clusterer.assign(f)
    return json.loads(json.dumps(clusterer.to_state()))


def test_state_rejects_other_versions() -> None:
    state = LanguageClusterer("en").to_state()
    with pytest.raises(ValueError):
        LanguageClusterer.from_state({**state, "version": 999})
    with pytest.raises(ValueError):
        LanguageClusterer.from_state({**state, "signature_version": "other"})


def test_expiry_drops_idle_stories() -> None:
    clusterer = LanguageClusterer("en", ClusterParams(active_window_hours=48))
    first = clusterer.assign(_article("a", ORIGINAL, 0))
    assert clusterer.expire(T0 + timedelta(hours=47)) == 0
    assert clusterer.active_story_count == 1
    assert clusterer.expire(T0 + timedelta(hours=49)) == 1
    assert clusterer.active_story_count == 0
    # The same event three days later starts a new story, and a reprint is no longer a copy.
    later = clusterer.assign(_article("b", ORIGINAL, 72 * 60))
    assert later.is_new_story and later.copy_of is None and later.story_id != first.story_id


def test_idle_story_expires_during_assign() -> None:
    out = cluster_articles([_article("a", ORIGINAL, 0), _article("b", SAME_EVENT, 60 * 60)])
    assert out[1].story_id != out[0].story_id


def test_story_ids_are_time_ordered_and_deterministic() -> None:
    ids = [make_story_id(T0 + timedelta(seconds=s), f"article-{s}", "en") for s in (0, 1, 60, 86_400)]
    assert ids == sorted(ids)
    assert all(len(i) == 16 and int(i, 16) < 1 << 64 for i in ids)
    assert make_story_id(T0, "x", "en") == make_story_id(T0, "x", "en")
    assert make_story_id(T0, "x", "en") != make_story_id(T0, "y", "en")
    first = cluster_articles(_stream())
    assert first == cluster_articles(_stream())
    new_ids = [a.story_id for a in first if a.is_new_story]
    assert new_ids == sorted(new_ids)


def test_languages_are_clustered_apart() -> None:
    out = cluster_articles([_article("en-1", ORIGINAL, 0), _article("de-1", ORIGINAL, 1, language="de")])
    assert out[0].story_id != out[1].story_id
    assert out[1].copy_of is None


def test_wrong_language_and_params_rejected() -> None:
    with pytest.raises(ValueError):
        LanguageClusterer("en").assign(_article("x", ORIGINAL, language="fr"))
    with pytest.raises(ValueError):
        ClusterParams(join_threshold=1.5)
    with pytest.raises(ValueError):
        ClusterParams(lsh_bands=64, lsh_rows=4)


def test_assignment_is_frozen() -> None:
    a = Assignment("a", "s", None, True, 0.0)
    with pytest.raises(AttributeError):
        a.score = 1.0  # type: ignore[misc]


def _signed(article_id: str, minhash: list[int], minutes: float) -> ArticleFeatures:
    base = _article(article_id, ORIGINAL, minutes)
    return dataclasses.replace(base, minhash=tuple(minhash))


def test_copy_names_the_article_it_matched_when_the_chain_link_is_weak() -> None:
    root = list(range(1000, 1128))
    # 70 of 128 values shared: an estimated Jaccard of 0.55, a copy by a margin within the noise.
    weak = root[:70] + list(range(5000, 5058))
    clusterer = LanguageClusterer("en")
    clusterer.assign(_signed("root", root, 0))
    weak_copy = clusterer.assign(_signed("weak", weak, 1))
    assert weak_copy.copy_of == "root"
    # A verbatim reprint of "weak" is a copy of "weak", not of "root" (estimated Jaccard 0.55 < 0.6).
    assert clusterer.find_copy(_signed("reprint-weak", weak, 2))[:1] == ("weak",)
    # A reprint close to both still names the first article of the chain.
    assert clusterer.find_copy(_signed("reprint-root", root[:100] + weak[100:], 2))[:1] == ("root",)
    # find_copy changes nothing: the clusterer's state is as before.
    before = clusterer.to_state()
    clusterer.find_copy(_signed("x", weak, 3))
    assert clusterer.to_state() == before


def test_pruned_candidates_and_norm_cache_decide_as_exhaustive_scoring() -> None:
    exhaustive = ClusterParams(max_postings=10**9, norm_tolerance=0.0, max_candidates=10**6)
    stream = _stream() + [
        _article(f"g-{i}", UNRELATED.replace("giraffe", f"giraffe {i}"), 50 + i) for i in range(5)
    ]
    # The Cauchy-Schwarz stop and the posting budget skip only stories that cannot be joined
    # here; cached norms shift scores by at most the IDF drift, not decisions.
    decided = [(a.article_id, a.story_id, a.copy_of, a.is_new_story) for a in cluster_articles(stream)]
    assert decided == [(a.article_id, a.story_id, a.copy_of, a.is_new_story)
                       for a in cluster_articles(stream, exhaustive)]
    assert len({story for _, story, _, _ in decided}) == 2


def test_index_stays_compact_and_frees_slots_of_expired_stories() -> None:
    clusterer = LanguageClusterer("en", ClusterParams(join_threshold=0.0, copy_jaccard=1.0))
    for i in range(40):
        clusterer.assign(_article(f"u-{i}", f"{UNRELATED}\nUpdate {i}.", i))
    postings = clusterer.term_index.postings  # the memory bound is the behaviour under test
    assert postings and all(len(p.slots) <= 2 * p.live + 16 for p in postings.values())
    assert clusterer.expire(T0 + timedelta(hours=100)) == 1
    assert clusterer.term_index.postings == {} and clusterer.term_index.free_slots == [0]


def test_state_without_norm_cache_still_loads() -> None:
    clusterer = LanguageClusterer("en")
    for f in _stream():
        clusterer.assign(f)
    state = json.loads(json.dumps(clusterer.to_state()))
    state["stories"] = [raw[:10] for raw in state["stories"]]
    resumed = LanguageClusterer.from_state(state)
    assert resumed.story_ids() == clusterer.story_ids()
    late = _article("late", SAME_EVENT, 45)
    assert resumed.assign(late).story_id == clusterer.assign(late).story_id


def _synthetic_stream(n: int, seed: int) -> list[ArticleFeatures]:
    """``n`` articles of random words over many small topics: thousands of stories."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i:05d}" for i in range(20_000)]
    topics = [rng.choice(vocabulary, size=30, replace=False) for _ in range(n // 2)]
    out = []
    for i in range(n):
        words = list(rng.choice(topics[int(rng.integers(len(topics)))], size=20)) + list(rng.choice(vocabulary, size=10))
        out.append(_article(f"s{seed}-{i:05d}", " ".join(words) + ".", minutes=i * 0.01, title=" ".join(words[:6])))
    return out


def test_a_loaded_state_is_indexed_as_if_its_stories_had_been_indexed_one_by_one() -> None:
    # More than 1,024 stories, so the slot table grows as it does one story at a time.
    stream = _synthetic_stream(2_600, seed=3)
    uninterrupted = LanguageClusterer("en", ClusterParams())
    for f in stream[:2_400]:
        uninterrupted.assign(f)
    state = json.loads(json.dumps(uninterrupted.to_state()))
    bulk = LanguageClusterer.from_state(state)
    assert len(bulk.stories) > 1_024
    one_by_one = TermIndex()
    for sid, story in bulk.stories.items():
        one_by_one.add(sid, story.centroid)
    index = bulk.term_index
    assert index.story_of_slot == one_by_one.story_of_slot and index.slot_of == one_by_one.slot_of
    assert index.next_stamp == one_by_one.next_stamp
    assert np.array_equal(index.slot_stamp, one_by_one.slot_stamp)
    assert list(index.postings) == list(one_by_one.postings)
    for term, postings in index.postings.items():
        other = one_by_one.postings[term]
        assert (postings.slots, postings.weights, postings.stamps, postings.live) == (
            other.slots, other.weights, other.stamps, other.live), term
    # And it decides the rest of the stream exactly as the writer that never stopped.
    assert [bulk.assign(f) for f in stream[2_400:]] == [uninterrupted.assign(f) for f in stream[2_400:]]
    assert bulk.to_state() == uninterrupted.to_state()


def test_a_new_version_of_an_article_leaves_no_trace_of_the_old_in_the_copy_index() -> None:
    clusterer = LanguageClusterer("en", ClusterParams())
    clusterer.assign(_article("a", ORIGINAL, 0))
    clusterer.assign(_article("a", UNRELATED, 5))  # the same article id, its text rewritten
    rebuilt = LanguageClusterer.from_state(json.loads(json.dumps(clusterer.to_state())))
    in_memory = {k: sorted(v) for k, v in clusterer.copies.buckets.items()}
    assert in_memory == {k: sorted(v) for k, v in rebuilt.copies.buckets.items()}
    assert all(ids.count("a") == 1 for ids in clusterer.copies.buckets.values())
    # Once it leaves the window nothing names it, so a later copy check cannot trip over it.
    clusterer.expire(T0 + timedelta(hours=60))
    assert not clusterer.copies.buckets
    later = _article("c", ORIGINAL, 60 * 60)
    assert clusterer.assign(later).copy_of is None


def test_a_copy_counts_for_coverage_but_not_in_the_running_mean() -> None:
    with_copy, without = LanguageClusterer("en"), LanguageClusterer("en")
    first = with_copy.assign(_article("a-original", ORIGINAL, 0))
    copy = with_copy.assign(_article("c-reprint", "RIVERTON (Wire) - " + ORIGINAL, 1))
    joined = with_copy.assign(_article("d-same-event", SAME_EVENT, 2))
    without.assign(_article("a-original", ORIGINAL, 0))
    without.assign(_article("d-same-event", SAME_EVENT, 2))
    assert copy.copy_of == "a-original" and joined.story_id == first.story_id and joined.copy_of is None
    ours, = with_copy.to_state()["stories"]
    ref, = without.to_state()["stories"]
    assert ours[4] == 3 and ref[4] == 2  # the copy counts in the story's size
    assert ours[5] == ref[5]  # centroid: the plain mean of the two originals either way


def _held(clusterer: LanguageClusterer, article_id: str) -> list[str]:
    return [sid for sid in clusterer.story_ids() for m in clusterer.story_members(sid) if m.article_id == article_id]


def test_a_new_version_stays_the_same_member_of_its_story() -> None:
    clusterer = LanguageClusterer("en")
    first = clusterer.assign(_article("a", ORIGINAL, 0))
    clusterer.assign(_article("d", SAME_EVENT, 1))
    corrected = ORIGINAL.replace("Monday", "Tuesday")
    version = clusterer.assign(_article("a", corrected, 5))
    assert version == Assignment("a", first.story_id, None, False, version.score, is_new_version=True)
    assert 0.5 < version.score <= 1.0  # the estimated Jaccard with the previous text
    assert _held(clusterer, "a") == [first.story_id]
    member, = (m for m in clusterer.story_members(first.story_id) if m.article_id == "a")
    assert member.seen_ms == clusterer.story_times(first.story_id)[0]  # keeps its place and first-seen time
    assert member.terms == _article("a", corrected, 5).terms[: clusterer.params.member_terms]
    # A reprint of the corrected text is a copy of the article, which is never a copy of itself.
    assert clusterer.assign(_article("r", "RIVERTON (Wire) - " + corrected, 6)).copy_of == "a"


def test_a_rewritten_version_moves_its_share_of_the_centroid() -> None:
    clusterer = LanguageClusterer("en")
    sid = clusterer.assign(_article("a", ORIGINAL, 0)).story_id
    clusterer.assign(_article("a", UNRELATED, 5))
    assert _held(clusterer, "a") == [sid]
    alone = LanguageClusterer("en")
    alone.assign(_article("a", UNRELATED, 5))
    assert clusterer.to_state()["stories"][0][5] == alone.to_state()["stories"][0][5]
    # The rewritten article's story now takes the giraffe story, not the bridge one.
    assert clusterer.assign(_article("g", UNRELATED.replace("Monday", "Sunday"), 10)).story_id == sid
    assert clusterer.assign(_article("b", SAME_EVENT, 11)).story_id != sid


def test_a_new_version_of_an_article_whose_story_expired_is_placed_as_new() -> None:
    clusterer = LanguageClusterer("en")
    first = clusterer.assign(_article("a", ORIGINAL, 0))
    later = clusterer.assign(_article("a", ORIGINAL.replace("Monday", "Tuesday"), 72 * 60))
    assert not later.is_new_version and later.is_new_story and later.copy_of is None
    assert later.story_id != first.story_id and _held(clusterer, "a") == [later.story_id]


def test_a_version_update_survives_a_checkpoint_round_trip() -> None:
    clusterer = LanguageClusterer("en")
    for f in _stream():
        clusterer.assign(f)
    resumed = LanguageClusterer.from_state(json.loads(json.dumps(clusterer.to_state())))
    version = _article("d-same-event", SAME_EVENT + "\nUpdated with the mayor's statement.", 50)
    assert resumed.assign(version) == clusterer.assign(version)
    assert resumed.to_state() == clusterer.to_state()


@pytest.mark.parametrize(("same_direction", "joins"), [(True, True), (False, False)],
                         ids=["its-embedding-agrees", "its-embedding-points-elsewhere"])
def test_a_headline_joins_the_story_its_embedding_agrees_with(same_direction: bool, joins: bool) -> None:
    """Issue 14: an article known by its title alone leans on its sentence embedding."""
    story_dir, other_dir = direction(1), direction(2)
    clusterer = LanguageClusterer("en")
    first = [clusterer.assign(headline(f"s{i}", t, i, near(story_dir, 10 + i))) for i, t in enumerate(SBARRO)]
    assert len({a.story_id for a in first}) == 1  # the story's own headlines agree in words and embedding
    late = clusterer.assign(headline("late", SBARRO_OTHER_WORDS, 10,
                                     near(story_dir if same_direction else other_dir, 20)))
    assert (late.story_id == first[0].story_id) is joins


def test_a_headline_without_an_embedding_is_placed_by_its_words_as_before() -> None:
    plain = ClusterParams(embedding_weight=0.0, headline_embedding_weight=0.0)
    decisions = []
    for params in (ClusterParams(), plain):
        clusterer = LanguageClusterer("en", params)
        decisions.append([(a.is_new_story, a.score) for a in
                          (clusterer.assign(headline(f"s{i}", t, i, None)) for i, t in enumerate(SBARRO))])
    assert decisions[0] == decisions[1]


def test_members_keep_whether_they_have_a_body_and_their_embedding_codes() -> None:
    clusterer = LanguageClusterer("en")
    embedding = near(direction(3), 4)
    head = clusterer.assign(headline("h", SBARRO[0], 0, embedding))
    body = clusterer.assign(bodied("b", mannheim(0), 1))
    (h,), (b,) = clusterer.story_members(head.story_id), clusterer.story_members(body.story_id)
    assert not h.has_body and b.has_body and b.embedding is None
    assert h.embedding is not None
    codes = np.frombuffer(h.embedding, dtype=np.int8).astype(float) / EMBEDDING_CODE_SCALE
    assert float(codes @ np.asarray(embedding)) / float(np.linalg.norm(codes)) > 0.999
