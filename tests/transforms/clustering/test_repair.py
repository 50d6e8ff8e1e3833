from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest
from embedded_articles import bodied, direction, headline, near
from repair_corpus import _BERN, _MANNHEIM, bern, mannheim

from transforms.clustering import (
    ClusterParams,
    LanguageClusterer,
    Member,
    RepairParams,
    cluster_and_repair,
    member_vector,
    repair_stories,
    split_members,
    story_representative,
)
from transforms.clustering.splits import SplitCut, passes_split
from transforms.features import ArticleFeatures, features_from_text
from transforms.signatures import SIGNATURE_VERSION

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


@pytest.mark.parametrize(("publishers", "splits"), [(3, 0), (4, 1)], ids=["three-sources-a-half", "four"])
def test_split_needs_four_sources_per_half(publishers: int, splits: int) -> None:
    clusterer = LanguageClusterer("en", MIXING)
    stream = [_f(f"m{i}", mannheim(i), 2 * i, publisher=f"m-pub{i % publishers}") for i in range(6)]
    stream += [_f(f"b{i}", bern(i), 2 * i + 1, publisher=f"b-pub{i % publishers}") for i in range(6)]
    for f in sorted(stream, key=lambda f: f.first_seen_at):
        clusterer.assign(f)
    assert len(repair_stories(clusterer, T0 + timedelta(minutes=30))) == splits


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
    assert cut.half_a[0] == "m0" and cut.within > cut.across and cut.separation > 0
    assert sorted(cut.half_a) == [f"m{i}" for i in range(6)]
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


def _two_events_with_embeddings(clusterer: LanguageClusterer, with_headlines: bool) -> None:
    """One story fed two events (an online pass that joins everything), each told by six outlets
    with a body; with ``with_headlines``, each event also by two title-only items whose embedding
    agrees with its event's."""
    m_dir, b_dir = direction(11), direction(12)
    for i in range(6):
        clusterer.assign(bodied(f"m{i}", mannheim(i), 2 * i, near(m_dir, 400 + i)))
        clusterer.assign(bodied(f"b{i}", bern(i), 2 * i + 1, near(b_dir, 500 + i)))
    if with_headlines:
        for i, (title, event_dir, prefix) in enumerate([("Klitschko wins again", m_dir, "hm"),
                                                         ("Klitschko wins again", b_dir, "hb")] * 2):
            clusterer.assign(headline(f"{prefix}{i}", title, 13 + i, near(event_dir, 600 + i)))


def test_title_only_members_follow_the_half_their_embedding_agrees_with() -> None:
    clusterer = LanguageClusterer("en", MIXING)
    _two_events_with_embeddings(clusterer, with_headlines=True)
    (repair,) = repair_stories(clusterer, T0 + timedelta(minutes=30))
    moved = {aid for aid, _ in repair.moved}
    assert moved == {f"b{i}" for i in range(6)} | {"hb1", "hb3"}


def test_a_story_of_headlines_alone_is_never_cut_by_their_words() -> None:
    clusterer = LanguageClusterer("en", MIXING)
    titles = [mannheim(i).split(". ")[0] for i in range(6)] + [bern(i).split(". ")[0] for i in range(6)]
    for i, title in enumerate(titles):
        clusterer.assign(headline(f"h{i}", title, i, None))
    assert len(clusterer.story_ids()) == 1
    assert repair_stories(clusterer, T0 + timedelta(minutes=30)) == []
    # the same articles with their bodies are cut in two
    with_bodies = LanguageClusterer("en", MIXING)
    _two_events_with_embeddings(with_bodies, with_headlines=False)
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
    ids = [clusterer.assign(bodied(f"m{i}", mannheim(i), i)).story_id for i in range(4)]
    for sid in ids[2:]:
        clusterer.apply_merge(ids[1], sid, T0 + timedelta(minutes=5))
    clusterer.params = dataclasses.replace(clusterer.params, join_threshold=ClusterParams().join_threshold)
    return clusterer, ids[0], ids[1]


def test_a_one_article_story_is_adopted_by_the_story_its_article_would_now_join() -> None:
    clusterer, alone, larger = _fragments()
    other = clusterer.assign(bodied("b0", bern(0), 6)).story_id
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
        clusterer.assign(bodied(f"m{i}", _MANNHEIM[i].format(d="last night"), i, publisher=f"m-pub{i % sources}"))
    for i in range(6):
        clusterer.assign(bodied(f"b{i}", _BERN[i].format(d="last night"), 10 + i, publisher=f"b-pub{i % sources}"))
    assert len(clusterer.story_ids()) == 2
    forced = RepairParams(merge_threshold=0.0, adopt=False)
    assert sum(r.kind == "merge" for r in repair_stories(clusterer, T0 + timedelta(minutes=30), forced)) == merges


def test_the_cut_follows_the_events_not_an_outlier() -> None:
    clusterer = LanguageClusterer("en", MIXING)
    _two_events_with_embeddings(clusterer, with_headlines=False)
    clusterer.assign(bodied("z", "Klitschko's old trainer opened a bakery in Riverton on Monday, selling bread and "
                                  "cakes to the neighbours.", 14))
    (story_id,) = clusterer.story_ids()
    originals = [m for m in clusterer.story_members(story_id) if m.copy_of is None]
    cut = split_members(originals, clusterer.idf())
    assert cut is not None
    for half in (cut.half_a, cut.half_b):
        assert not {"m", "b"} <= {aid[0] for aid in half}  # the giraffe goes either way; the events part


@pytest.mark.parametrize("seed", range(6))
def test_centroid_neighbours_are_the_posting_loops_to_the_last_tie(seed: int) -> None:
    """Unit centroids over a small vocabulary (many shared terms), some stories with the same
    centroid (exact ties, broken by id), some sharing nothing; more than one block of rows."""
    import math
    import random

    from transforms.clustering.merges import NEIGHBOUR_BLOCK_ROWS, centroid_neighbours

    rng = random.Random(seed)
    vocabulary = [f"t{i}" for i in range(60)]
    centroids: dict[str, dict[str, float]] = {}
    for n in range(NEIGHBOUR_BLOCK_ROWS + 150):
        sid = f"s{rng.randrange(10**6):06d}-{n}"
        if n % 9 == 0 and centroids:
            centroids[sid] = dict(centroids[rng.choice(sorted(centroids))])  # a twin
            continue
        terms = rng.sample(vocabulary, rng.randint(1, 12)) if n % 17 else [f"alone{n}"]
        weights = {t: rng.random() + 0.01 for t in terms}
        norm = math.sqrt(sum(w * w for w in weights.values()))
        centroids[sid] = {t: w / norm for t, w in weights.items()}
    candidates = sorted(centroids, key=lambda s: rng.random())
    for count in (1, 10):
        assert centroid_neighbours(candidates, centroids, count) == _neighbours_within_budget(
            candidates, centroids, count, budget=10**9)


def _neighbours_within_budget(candidates: list[str], centroids: dict[str, dict[str, float]], count: int,
                              budget: int) -> dict[str, list[str]]:
    """The merge pass's neighbour search as a loop over the postings of every term a story reads:
    its terms heaviest first, skipping a term held by more stories than it has budget left; the
    ``count`` stories of the best partial dots (and any within 1e-9 of the last) are ranked by
    their dots over every term (with the budget never reached: the best ``count`` of all)."""
    holders: dict[str, list[str]] = {}
    for sid in candidates:
        for term in centroids[sid]:
            holders.setdefault(term, []).append(sid)
    out = {}
    for sid in candidates:
        left, partial = budget, {}
        for term, weight in sorted(centroids[sid].items(), key=lambda kv: (-abs(kv[1]), kv[0])):
            if len(holders[term]) > left:
                continue
            left -= len(holders[term])
            for other in holders[term]:
                if other != sid:
                    partial[other] = partial.get(other, 0.0) + weight * centroids[other][term]
        if len(partial) > count:
            bar = sorted(partial.values(), reverse=True)[count - 1]
            partial = {o: p for o, p in partial.items() if p >= bar - 1e-9}
        full = {o: sum(w * centroids[o].get(t, 0.0) for t, w in centroids[sid].items()) for o in partial}
        out[sid] = sorted(full, key=lambda o: (-full[o], o))[:count]
    return out


@pytest.mark.parametrize("seed", range(4))
def test_a_story_looks_for_neighbours_within_its_postings_budget(seed: int) -> None:
    """Common terms (held by most stories) are skipped once they would overrun the budget, rare
    ones are still read; the shortlist is ranked by the dots over every term."""
    import math
    import random

    from transforms.clustering.merges import centroid_neighbours

    rng = random.Random(seed)
    common = [f"c{i}" for i in range(5)]
    rare = [f"r{i}" for i in range(80)]
    centroids: dict[str, dict[str, float]] = {}
    for n in range(300):
        terms = rng.sample(common, 4) + rng.sample(rare, rng.randint(1, 5))
        weights = {t: rng.random() + 0.01 for t in terms}
        norm = math.sqrt(sum(w * w for w in weights.values()))
        centroids[f"s{n:03d}"] = {t: w / norm for t, w in weights.items()}
    candidates = sorted(centroids, key=lambda s: rng.random())
    capped = centroid_neighbours(candidates, centroids, 5, budget=100)
    assert capped == _neighbours_within_budget(candidates, centroids, 5, 100)
    assert capped != centroid_neighbours(candidates, centroids, 5)  # the common terms did decide some
    assert centroid_neighbours(candidates, centroids, 5, budget=10**6) == centroid_neighbours(candidates, centroids, 5)


def _agglomerate_by_scan(clusterer: LanguageClusterer, candidates: list[str], threshold: float) -> set[frozenset[str]]:
    """Average-link agglomeration as a scan of every linked pair per merge (the best mean first,
    ties to the larger ids), every pair compatible: what the merge pass must give."""
    from transforms.clustering.merges import MERGE_NEIGHBOURS, _cosine, centroid_neighbours
    from transforms.clustering.splits import member_vector

    idf = clusterer.idf()
    vectors = {sid: [member_vector(m, idf) for m in clusterer.story_members(sid) if m.copy_of is None]
               for sid in candidates}
    nearest = centroid_neighbours(candidates, {sid: clusterer.centroid_vector(sid) for sid in candidates},
                                  MERGE_NEIGHBOURS, clusterer.params.max_postings)
    linked = {frozenset((a, b)) for a, others in nearest.items() for b in others}
    groups = {sid: [sid] for sid in candidates}

    def mean(a: str, b: str) -> float:
        xs = [v for s in groups[a] for v in vectors[s]]
        ys = [v for s in groups[b] for v in vectors[s]]
        return sum(_cosine(x, y) for x in xs for y in ys) / (len(xs) * len(ys))

    while True:
        scored = [(mean(a, b), a, b) for a, b in (sorted(pair) for pair in linked)]
        best = max((s for s in scored if s[0] >= threshold), default=None)
        if best is None:
            return {frozenset(g) for g in groups.values() if len(g) > 1}
        _, a, b = best
        groups[a] += groups.pop(b)
        linked = {frozenset(a if s == b else s for s in pair) for pair in linked}
        linked = {pair for pair in linked if len(pair) == 2}


@pytest.mark.parametrize("seed", range(3))
def test_the_merge_pass_merges_as_a_scan_of_every_pair_would(seed: int) -> None:
    """Fragments of 12 events (one article per story), every pair compatible: the merge pass's
    groups are those of agglomerating by a scan over every linked pair, best pair first."""
    import math
    import random

    from transforms.clustering.merges import plan_merges

    rng = random.Random(seed)
    clusterer = LanguageClusterer("en", ClusterParams(join_threshold=1.0))
    vocabulary = [f"w{i}" for i in range(400)]
    events = [rng.sample(vocabulary, 12) for _ in range(12)]
    for n in range(120):
        terms = list(dict.fromkeys(rng.sample(events[n % 12], 6) + rng.sample(vocabulary, 6)))
        weights = [rng.random() + 0.1 for _ in terms]
        norm = math.sqrt(sum(w * w for w in weights))
        clusterer.assign(ArticleFeatures(
            article_id=f"a{n:03d}", language="en", first_seen_at=T0 + timedelta(seconds=n), publisher_id=f"p{n}",
            title="", simhash=0, minhash=tuple(rng.randrange(2**32) for _ in range(128)), terms=tuple(terms),
            term_weights=tuple(w / norm for w in weights), entities=(), embedding=None, signature_version=SIGNATURE_VERSION))
    candidates = clusterer.story_ids()
    assert len(candidates) == 120
    params = RepairParams(merge_threshold=0.2, merge_min_shared_entities=0, merge_gap_hours=100.0,
                          split_min_sources=1000)
    plan = plan_merges(clusterer, candidates, clusterer.idf(), params)
    groups: dict[str, set[str]] = {}
    for survivor, merged, _ in plan:
        groups.setdefault(survivor, {survivor}).add(merged)
    expected = _agglomerate_by_scan(clusterer, candidates, 0.2)
    assert len(expected) >= 5
    assert {frozenset(g) for g in groups.values()} == expected



_VOTE = ("Voters in Turkmenistan cast ballots on Sunday in a parliamentary election that observers called a "
         "formality for the ruling party.")
_COUNT = ("Polls closed in Turkmenistan where turnout passed ninety percent, the central election commission "
          "reported late on Sunday.")


def _two_fragments(second: tuple[float, ...] | None = None) -> LanguageClusterer:
    """Two one-article stories of one event told in other words (only a duplicate joins online)."""
    clusterer = LanguageClusterer("en", ClusterParams(join_threshold=1.0, entity_bonus=0.0, embedding_weight=0.0,
                                                      headline_embedding_weight=0.0))
    for i, (text, base) in enumerate([(_VOTE, direction(1)), (_COUNT, direction(1) if second is None else second)]):
        body = f"{text} {text}"  # long enough to be a body (MIN_COPY_SHINGLES)
        clusterer.assign(features_from_text(f"a{i}", text.split(",")[0], body, "en", T0 + timedelta(minutes=i),
                                            f"p{i}", embedding=near(base, 10 + i)))
    return clusterer


def test_fragments_told_in_other_words_merge_when_their_embeddings_agree() -> None:
    """Issue 33: a pair below the words' bar is merged only when a second signal, the sentence
    embeddings, agrees."""
    probe = _two_fragments()
    assert len(probe.story_ids()) == 2
    first, second = (member_vector(probe.story_members(s)[0], probe.idf()) for s in probe.story_ids())
    words = sum(w * second.get(t, 0.0) for t, w in first.items())  # their members' cosine in words
    assert 0.05 < words < 0.5
    bar = RepairParams(merge_threshold=words + 0.05, merge_low_threshold=words - 0.05,
                       merge_embedding_threshold=0.75)

    def stories_after(clusterer: LanguageClusterer, params: RepairParams) -> int:
        repair_stories(clusterer, T0 + timedelta(minutes=10), params)
        return len(clusterer.story_ids())

    assert stories_after(_two_fragments(), bar) == 1
    assert stories_after(_two_fragments(), dataclasses.replace(bar, merge_low_threshold=None)) == 2
    assert stories_after(_two_fragments(direction(2)), bar) == 2  # the embeddings disagree
