"""The centroids' inverted index (transforms/clustering/term_index.py): postings, slots, stamps, candidates."""

from __future__ import annotations

import numpy as np
import pytest

from transforms.clustering.term_index import Postings, TermIndex


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
