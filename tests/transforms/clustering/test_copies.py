"""Copy detection (transforms/clustering/copies.py): recent signatures in LSH buckets."""

from __future__ import annotations

import numpy as np

from transforms.clustering.copies import CopyIndex
from transforms.signatures import LSH_BANDS, LSH_ROWS, minhash_from_hashes

_RNG = np.random.default_rng(11)
_SHINGLES = _RNG.integers(0, 2**63, 300, dtype=np.uint64)


def _signature(keep: float, rng_seed: int) -> tuple[int, ...]:
    """A signature of a set that keeps ``keep`` of the base shingles and adds new ones."""
    rng = np.random.default_rng(rng_seed)
    kept = _SHINGLES[rng.random(_SHINGLES.size) < keep]
    extra = rng.integers(0, 2**63, _SHINGLES.size - kept.size, dtype=np.uint64)
    return tuple(int(v) for v in minhash_from_hashes(np.concatenate([kept, extra])))


ORIGINAL = _signature(1.0, 1)
REPRINT = _signature(0.9, 2)
UNRELATED = _signature(0.0, 3)


def _index() -> CopyIndex:
    return CopyIndex(LSH_BANDS, LSH_ROWS)


def test_a_reprint_is_found_and_an_unrelated_text_is_not() -> None:
    copies = _index()
    copies.remember("orig", "s1", "orig", 0, ORIGINAL)
    found = copies.find_copy("reprint", REPRINT, {"s1"}, 0.5, 0.6)
    assert found is not None and found[:2] == ("orig", "s1") and found[2] > 0.7
    assert copies.find_copy("other", UNRELATED, {"s1"}, 0.5, 0.6) is None


def test_only_articles_of_live_stories_are_originals() -> None:
    copies = _index()
    copies.remember("orig", "s1", "orig", 0, ORIGINAL)
    assert copies.find_copy("reprint", REPRINT, {"s2"}, 0.5, 0.6) is None


def test_an_article_is_no_copy_of_its_own_earlier_version() -> None:
    copies = _index()
    copies.remember("orig", "s1", "orig", 0, ORIGINAL)
    assert copies.find_copy("orig", REPRINT, {"s1"}, 0.5, 0.6) is None


def test_a_copy_of_a_copy_names_the_first_article_of_the_chain() -> None:
    copies = _index()
    copies.remember("orig", "s1", "orig", 0, ORIGINAL)
    copies.remember("reprint", "s1", "orig", 1, REPRINT)
    found = copies.find_copy("again", REPRINT, {"s1"}, 0.5, 0.6)
    assert found is not None and found[0] == "orig"


def test_a_chain_whose_first_article_left_the_window_keeps_its_root() -> None:
    copies = _index()
    copies.remember("reprint", "s1", "gone", 1, REPRINT)
    found = copies.find_copy("again", REPRINT, {"s1"}, 0.5, 0.6)
    assert found is not None and found[0] == "gone"


def test_a_new_version_replaces_the_old_in_every_bucket() -> None:
    copies = _index()
    copies.remember("a", "s1", "a", 0, ORIGINAL)
    copies.remember("a", "s1", "a", 5, UNRELATED)
    assert list(copies.recent) == ["a"]
    assert all(ids.count("a") <= LSH_BANDS for ids in copies.buckets.values())
    assert copies.find_copy("b", ORIGINAL, {"s1"}, 0.5, 0.6) is None
    assert copies.find_copy("b", UNRELATED, {"s1"}, 0.5, 0.6) is not None


def test_expiry_empties_the_buckets() -> None:
    copies = _index()
    copies.remember("old", "s1", "old", 0, ORIGINAL)
    copies.remember("new", "s1", "new", 100, UNRELATED)
    copies.expire(50)
    assert list(copies.recent) == ["new"]
    assert all(ids == ["new"] for ids in copies.buckets.values())
    copies.expire(101)
    assert not copies.recent and not copies.buckets


def test_moved_articles_point_at_their_new_story() -> None:
    copies = _index()
    copies.remember("orig", "s1", "orig", 0, ORIGINAL)
    copies.restory(["orig", "not-held"], "s2")
    found = copies.find_copy("reprint", REPRINT, {"s2"}, 0.5, 0.6)
    assert found is not None and found[1] == "s2"


def test_bulk_loading_equals_remembering_one_by_one() -> None:
    rows = [("a", "s1", "a", 0), ("b", "s1", "a", 1), ("c", "s2", "c", 2)]
    signatures = [ORIGINAL, REPRINT, UNRELATED]
    bulk, one_by_one = _index(), _index()
    bulk.add_all(rows, np.vstack([np.asarray(s, dtype=np.uint32) for s in signatures]))
    for row, signature in zip(rows, signatures, strict=True):
        one_by_one.remember(*row, signature)
    assert dict(bulk.buckets) == dict(one_by_one.buckets)
    assert {k: r.bands for k, r in bulk.recent.items()} == {k: r.bands for k, r in one_by_one.recent.items()}
