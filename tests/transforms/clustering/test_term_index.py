"""The centroids' inverted index (transforms/clustering/term_index.py): postings, slots, stamps, candidates."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from transforms.clustering.term_index import Postings, TermIndex, best_and_tied, heaviest_first, sum_by_slot


def _unit(term: str) -> float:
    return 1.0


def _live(index: TermIndex, term: str) -> dict[str, float]:
    slots, weights = index.postings[term].read(index.slot_stamp)
    return {index.story_of_slot[int(s)]: float(w) for s, w in zip(slots, weights, strict=True)}


def test_a_story_is_found_through_each_of_its_terms() -> None:
    index = TermIndex()
    index.add("s1", {"bridge": 0.8, "river": 0.6})
    index.add("s2", {"bridge": 0.5, "giraffe": 0.9})
    assert _live(index, "bridge") == {"s1": 0.8, "s2": 0.5}
    assert _live(index, "giraffe") == {"s2": 0.9}
    assert index.slot_of == {"s1": 0, "s2": 1}


def test_reindexing_a_story_leaves_only_its_new_postings_live() -> None:
    index = TermIndex()
    index.add("s1", {"bridge": 0.8, "river": 0.6})
    index.remove("s1", {"bridge": 0.8, "river": 0.6})
    index.add("s1", {"bridge": 0.3})
    assert _live(index, "bridge") == {"s1": 0.3}
    assert "river" not in index.postings  # its last live posting went stale
    assert len(index.postings["bridge"].slots) == 1  # read() compacted the stale one away


def test_a_read_copies_the_arrays_only_once_a_fifth_are_stale() -> None:
    index = TermIndex()
    for k in range(10):
        index.add(f"s{k}", {"bridge": float(k)})
    index.add("s0", {"bridge": 10.0})  # 1 stale of 11: read around it
    assert _live(index, "bridge") == {f"s{k}": float(k) for k in range(1, 10)} | {"s0": 10.0}
    assert len(index.postings["bridge"].slots) == 11
    index.add("s1", {"bridge": 11.0})
    index.add("s2", {"bridge": 12.0})  # 3 stale of 13 (a fifth or more): compacted
    assert _live(index, "bridge") == {f"s{k}": float(k) for k in range(3, 10)} | {"s0": 10.0, "s1": 11.0, "s2": 12.0}
    assert len(index.postings["bridge"].slots) == 10


def test_a_released_slot_is_reused_smallest_first() -> None:
    index = TermIndex()
    for sid in ("a", "b", "c"):
        index.add(sid, {"t": 1.0})
    index.release("c", {"t": 1.0})
    index.release("a", {"t": 1.0})
    assert index.free_slots == [0, 2] and index.story_of_slot == ["", "b", ""]
    index.add("d", {"t": 1.0})
    assert index.slot_of["d"] == 0 and _live(index, "t") == {"b": 1.0, "d": 1.0}


def test_postings_stay_within_twice_the_live_ones() -> None:
    index = TermIndex()
    for round_ in range(50):
        for sid in ("a", "b"):
            index.remove(sid, {"t": 1.0})
            index.add(sid, {"t": float(round_)})
    postings = index.postings["t"]
    assert postings.live == 2 and len(postings.slots) <= 2 * postings.live + 16


def test_the_slot_table_grows_past_its_first_chunk() -> None:
    index = TermIndex()
    for i in range(3000):
        index.add(f"s{i:04d}", {f"t{i % 7}": 1.0})
    assert index.slot_stamp.size >= 3000 and index.next_stamp == 3000
    assert sum(p.live for p in index.postings.values()) == 3000


def test_bulk_indexing_equals_adding_one_story_at_a_time() -> None:
    rng = np.random.default_rng(5)
    stories = [(f"s{i:04d}", {f"t{j}": float(rng.random()) for j in rng.choice(200, 12, replace=False)})
               for i in range(2100)]
    bulk, one_by_one = TermIndex(), TermIndex()
    bulk.add_all(stories)
    for sid, centroid in stories:
        one_by_one.add(sid, centroid)
    assert (bulk.slot_of, bulk.story_of_slot, bulk.next_stamp) == (
        one_by_one.slot_of, one_by_one.story_of_slot, one_by_one.next_stamp)
    assert np.array_equal(bulk.slot_stamp, one_by_one.slot_stamp)
    assert list(bulk.postings) == list(one_by_one.postings)
    for term, postings in bulk.postings.items():
        other = one_by_one.postings[term]
        assert (postings.slots, postings.weights, postings.stamps, postings.live) == (
            other.slots, other.weights, other.stamps, other.live)
    with pytest.raises(RuntimeError):
        bulk.add_all(stories)


def test_candidates_are_the_stories_with_the_highest_dots() -> None:
    index = TermIndex()
    index.add("s1", {"bridge": 0.8, "river": 0.6})
    index.add("s2", {"bridge": 0.5, "giraffe": 0.9})
    index.add("s3", {"zoo": 1.0})
    dots, rest = index.candidate_dots({"bridge": 0.6, "river": 0.8}, _unit, bar=0.0, budget=100, keep=5)
    assert dots == pytest.approx({"s1": 0.6 * 0.8 + 0.8 * 0.6, "s2": 0.6 * 0.5}) and rest == []
    dots, _ = index.candidate_dots({"bridge": 0.6, "river": 0.8}, _unit, bar=0.0, budget=100, keep=1)
    assert list(dots) == ["s1"]


def test_terms_over_the_posting_budget_are_left_for_the_shortlist() -> None:
    index = TermIndex()
    for i in range(10):
        index.add(f"s{i}", {"common": 0.5, f"rare{i}": 0.5})
    dots, rest = index.candidate_dots({"common": 0.8, "rare3": 0.6}, _unit, bar=0.0, budget=5, keep=5)
    assert dots == pytest.approx({"s3": 0.6 * 0.5}) and rest == [("common", 0.8)]


def test_reading_stops_once_the_terms_left_cannot_reach_the_bar() -> None:
    index = TermIndex()
    index.add("heavy", {"a": 1.0})
    index.add("light", {"b": 1.0})
    # The article's terms, heaviest first: a (0.99²), then b (0.14²): b alone cannot reach 0.5.
    dots, rest = index.candidate_dots({"a": 0.99, "b": 0.14}, _unit, bar=0.5, budget=100, keep=5)
    assert list(dots) == ["heavy"] and rest == [("b", 0.14)]


def test_postings_of_a_new_term_start_empty() -> None:
    postings = Postings()
    slots, weights = postings.read(np.full(4, -1, dtype=np.int64))
    assert slots.size == weights.size == postings.live == 0


def _random_index(seed: int) -> tuple[TermIndex, dict[str, dict[str, float]]]:
    """An index of 300 stories over 60 terms, many re-indexed (so some terms hold stale postings
    below the share that compacts them), with the centroids each story holds now."""
    rng = np.random.default_rng(seed)
    index, held = TermIndex(), {}
    for step in range(900):
        story = f"s{rng.integers(300)}"
        if story in held:
            index.remove(story, held[story])
        terms = rng.choice(60, size=int(rng.integers(1, 12)), replace=False)
        held[story] = {f"t{t}": float(rng.random()) for t in terms}
        index.add(story, held[story])
        if step % 7 == 0 and len(held) > 50:
            gone = sorted(held)[int(rng.integers(len(held)))]
            index.release(gone, held.pop(gone))
    return index, held


@pytest.mark.parametrize("seed", range(5))
def test_candidate_dots_are_the_sums_a_loop_over_the_terms_gives(seed: int) -> None:
    # The postings read are joined, masked and summed per slot in one go (issue 15): each dot
    # must be the very float a loop over the terms, heaviest first, adds up.
    index, held = _random_index(seed)
    assert any(len(p.slots) != p.live for p in index.postings.values())  # stale postings are searched past
    rng = np.random.default_rng(100 + seed)
    vector = {f"t{t}": float(rng.random()) for t in rng.choice(60, size=20, replace=False)}
    idf = {term: 1.0 + 0.1 * i for i, term in enumerate(sorted(vector))}
    dots, rest = index.candidate_dots(vector, idf.__getitem__, bar=0.0, budget=10**6, keep=10**6)
    expected: dict[str, float] = {}
    for story, centroid in held.items():
        for term, weight in heaviest_first(vector):
            if term in centroid:
                expected[story] = expected.get(story, 0.0) + centroid[term] * (weight * idf[term])
    assert rest == [] and dots == expected


def test_a_shortlist_keeps_every_story_tied_with_its_last_place() -> None:
    index = TermIndex()
    for i, weight in enumerate([0.9, 0.5, 0.5, 0.5, 0.1]):
        index.add(f"s{i}", {"bridge": weight})
    dots, _ = index.candidate_dots({"bridge": 1.0}, _unit, bar=0.0, budget=100, keep=2)
    assert dots == {"s0": 0.9, "s1": 0.5, "s2": 0.5, "s3": 0.5}


def test_sum_by_slot_adds_each_slots_values_in_input_order() -> None:
    rng = np.random.default_rng(3)
    slots = rng.integers(0, 50, 2_000)
    values = rng.random(2_000) * 10.0 ** rng.integers(-8, 8, 2_000)  # order matters at these magnitudes
    scratch = np.full(64, 12345, dtype=np.int32)  # whatever it held before
    unique, sums = sum_by_slot(slots, values, scratch)
    expected: dict[int, float] = {}
    for slot, value in zip(slots.tolist(), values.tolist(), strict=True):
        expected[slot] = expected.get(slot, 0.0) + value
    assert dict(zip(unique.tolist(), sums.tolist(), strict=True)) == expected
    assert unique.size == len(expected)
    empty_slots, empty_sums = sum_by_slot(slots[:0], values[:0], scratch)
    assert empty_slots.size == empty_sums.size == 0


def test_heaviest_first_orders_by_absolute_weight_then_term() -> None:
    assert heaviest_first({"b": 0.5, "a": 0.5, "c": 0.9}) == [("c", 0.9), ("a", 0.5), ("b", 0.5)]
    assert heaviest_first({"b": -0.5, "a": 0.5, "c": -0.9}) == [("c", -0.9), ("a", 0.5), ("b", -0.5)]
    assert heaviest_first({}) == []


def test_a_pickled_index_searches_as_the_original_and_leaves_its_scratch_out() -> None:
    index, _ = _random_index(9)
    vector = {"t1": 0.5, "t2": 0.3, "t3": 0.8}
    before = index.candidate_dots(vector, _unit, bar=0.0, budget=10**6, keep=10)
    assert index.scratch.size >= len(index.story_of_slot)
    copy = pickle.loads(pickle.dumps(index))
    assert copy.scratch.size == 0
    assert copy.candidate_dots(vector, _unit, bar=0.0, budget=10**6, keep=10) == before
    # An index pickled before it had a scratch array (its state as ``(None, slots)``) loads too.
    older = TermIndex.__new__(TermIndex)
    older.__setstate__((None, index.__getstate__()))
    assert older.candidate_dots(vector, _unit, bar=0.0, budget=10**6, keep=10) == before


@pytest.mark.parametrize("size", [3, 15, 16, 200, 256, 257, 3_000])
def test_best_and_tied_are_the_largest_values_and_their_ties(size: int) -> None:
    rng = np.random.default_rng(size)
    values = rng.integers(0, 40, size) / 8.0  # coarse: many ties, at the cut too
    for keep in (1, 15):
        chosen = best_and_tied(values, keep)
        cut = np.sort(values)[::-1][min(keep, size) - 1]
        assert chosen.tolist() == np.flatnonzero(values >= cut).tolist()
