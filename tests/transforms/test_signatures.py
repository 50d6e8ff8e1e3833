from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from transforms.signatures import (
    LSH_BANDS,
    LSH_ROWS,
    MIN_COPY_SHINGLES,
    NUM_PERM,
    SHINGLE_SIZE,
    copy_shingles,
    estimate_jaccard,
    hamming_distance,
    is_empty_signature,
    lsh_bands,
    minhash_signature,
    normalize_for_signature,
    shingle_tokens,
    simhash_blocks,
    simhash_fingerprint,
    text_signatures,
    tokenize,
)

_DATA = Path(__file__).resolve().parent.parent / "data" / "articles"
ORIGINAL = (_DATA / "original.txt").read_text(encoding="utf-8").strip()
SAME_EVENT = (_DATA / "same_event.txt").read_text(encoding="utf-8").strip()
UNRELATED = (_DATA / "unrelated.txt").read_text(encoding="utf-8").strip()
COPY_JACCARD = 0.5  # transforms.clustering.ClusterParams.copy_jaccard default
FOX = "The quick brown fox jumps over the lazy dog near the river bank"


def _shingles(text: str, language: str = "en") -> list[str]:
    return shingle_tokens(tokenize(text, language), SHINGLE_SIZE)


def _jaccard(a: str, b: str) -> float:
    return estimate_jaccard(minhash_signature(_shingles(a)), minhash_signature(_shingles(b)))


def test_golden_values() -> None:
    shingles = _shingles(FOX)
    assert simhash_fingerprint(shingles) == 0x1C2C2A495E289980
    signature = minhash_signature(shingles)
    assert signature.dtype == np.uint32 and signature.shape == (NUM_PERM,)
    assert signature[:4].tolist() == [67373809, 173640572, 660107745, 558137637]
    assert lsh_bands(signature)[:2] == [7458046523249444493, 6308048048453331036]


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        ("Hello, World!", "en", ["hello", "world"]),
        ("Ｆｕｌｌ－width ２０２４", "en", ["full", "width", "2024"]),
        ("新加坡政府", "zh", ["新加", "加坡", "坡政", "政府"]),
        ("律师拉维（Ravi Madasamy）", "zh", ["律师", "师拉", "拉维", "ravi", "madasamy"]),
        ("", "en", []),
    ],
    ids=["latin", "nfkc", "cjk-bigrams", "cjk-with-latin", "empty"],
)
def test_tokenize(text: str, language: str, expected: list[str]) -> None:
    assert tokenize(text, language) == expected


def test_normalize_collapses_case_and_space() -> None:
    assert normalize_for_signature("A\u00a0 B\n\nC") == "a b c"


def test_shingles_short_and_empty() -> None:
    assert shingle_tokens(["a", "b"], 4) == ["a b"]
    assert shingle_tokens([], 4) == []
    with pytest.raises(ValueError):
        shingle_tokens(["a"], 0)


def test_identical_text_distance_zero() -> None:
    simhash_a, minhash_a = text_signatures(ORIGINAL, "en")
    simhash_b, minhash_b = text_signatures(ORIGINAL, "en")
    assert hamming_distance(simhash_a, simhash_b) == 0
    assert estimate_jaccard(minhash_a, minhash_b) == 1.0


def test_order_of_shingles_does_not_matter() -> None:
    shingles = _shingles(ORIGINAL)
    assert simhash_fingerprint(shingles) == simhash_fingerprint(shingles[::-1])
    assert minhash_signature(shingles).tolist() == minhash_signature(shingles[::-1]).tolist()


def test_empty_text_is_defined() -> None:
    simhash, minhash = text_signatures("", "en")
    assert simhash == 0
    assert minhash.tolist() == [0xFFFFFFFF] * NUM_PERM
    assert lsh_bands(minhash) == []
    assert estimate_jaccard(minhash, minhash) == 0.0  # an empty text is a copy of nothing


def _reprints() -> dict[str, str]:
    paragraphs = ORIGINAL.split("\n")
    words = ORIGINAL.split()
    return {
        "dateline": "RIVERTON, March 3 (Wire) - " + ORIGINAL,
        "footer": ORIGINAL + "\nReporting by A. Writer; editing by B. Editor. Copyright 2024 Wire Service.",
        "truncated-20pct": " ".join(words[: int(len(words) * 0.8)]),
        "reordered": "\n".join(paragraphs[3:] + paragraphs[:3]),
        "all-at-once": "RIVERTON (Wire) - "
        + "\n".join(paragraphs[2:] + paragraphs[:2])[: int(len(ORIGINAL) * 0.8)]
        + "\nSign up for our newsletter.",
    }


@pytest.mark.parametrize("name", list(_reprints()))
def test_reprint_stays_within_copy_threshold(name: str) -> None:
    reprint = _reprints()[name]
    assert _jaccard(ORIGINAL, reprint) >= COPY_JACCARD
    # ... and LSH proposes the pair.
    original_bands = set(lsh_bands(minhash_signature(_shingles(ORIGINAL))))
    assert original_bands & set(lsh_bands(minhash_signature(_shingles(reprint))))


def test_same_event_different_article_is_not_a_copy() -> None:
    assert _jaccard(ORIGINAL, SAME_EVENT) < 0.1
    assert _jaccard(ORIGINAL, UNRELATED) < 0.05


def test_simhash_blocks_pigeonhole() -> None:
    a = 0x0123456789ABCDEF
    b = a ^ (1 << 3) ^ (1 << 20) ^ (1 << 40)  # distance 3 flips 3 of 4 blocks at most
    assert hamming_distance(a, b) == 3
    assert set(simhash_blocks(a)) & set(simhash_blocks(b))


def test_lsh_arguments_checked() -> None:
    signature = minhash_signature(_shingles(FOX))
    assert len(lsh_bands(signature, LSH_BANDS, LSH_ROWS)) == LSH_BANDS
    with pytest.raises(ValueError):
        lsh_bands(signature, 64, 4)
    with pytest.raises(ValueError):
        minhash_signature(["a"], num_perm=0)
    with pytest.raises(ValueError):
        estimate_jaccard([1, 2], [1, 2, 3])


def test_minhash_from_hashes_is_minhash_signature_of_the_shingle_hashes() -> None:
    from transforms.signatures import hash_shingles, minhash_from_hashes

    shingles = _shingles(ORIGINAL)
    hashes = hash_shingles(shingles)
    assert np.array_equal(minhash_from_hashes(hashes), minhash_signature(shingles))
    # Order and duplicates of the hashes do not matter.
    assert np.array_equal(minhash_from_hashes(np.concatenate([hashes[::-1], hashes[:3]])), minhash_signature(shingles))
    with pytest.raises(ValueError):
        minhash_from_hashes(hashes, num_perm=0)


@pytest.mark.parametrize(("bands", "rows"), [(LSH_BANDS, LSH_ROWS), (16, 8), (1, 1), (9, 13)],
                         ids=["default", "16x8", "1x1", "9x13"])
def test_one_signature_gets_the_keys_of_the_many_signature_path(bands: int, rows: int) -> None:
    from transforms.signatures import lsh_bands_many

    rng = np.random.default_rng(bands * 100 + rows)
    signatures = rng.integers(0, 2**32, size=(20, NUM_PERM), dtype=np.uint64).astype(np.uint32)
    signatures[3] = 2**32 - 1  # the empty-set signature: no keys either way
    many = lsh_bands_many(signatures, bands, rows)
    assert [lsh_bands(tuple(int(v) for v in row), bands, rows) for row in signatures] == many
    assert many[3] == [] and all(len(keys) == bands for i, keys in enumerate(many) if i != 3)


# --------------------------------------------------------------------------------------------------
# copy_shingles: the shingles a copy signature is computed on, none below the bar.
# --------------------------------------------------------------------------------------------------

def _text(distinct: int) -> str:
    return " ".join(f"w{i}" for i in range(distinct + 3))  # n + 3 distinct words give n 4-word shingles


def test_a_text_at_the_bar_keeps_its_shingles() -> None:
    text = _text(MIN_COPY_SHINGLES)
    assert copy_shingles(text, "en") == shingle_tokens(tokenize(text, "en"))
    assert len(copy_shingles(text, "en")) == MIN_COPY_SHINGLES


def test_a_text_under_the_bar_has_none() -> None:
    assert copy_shingles(_text(MIN_COPY_SHINGLES - 1), "en") == []
    assert copy_shingles("", "en") == []


def test_the_bar_counts_distinct_shingles() -> None:
    repeated = " ".join(["watch the video now"] * 10)  # 40 tokens, 4 distinct shingles
    assert copy_shingles(repeated, "en") == []
    assert copy_shingles(repeated, "en", min_shingles=4) != []


def test_cjk_text_counts_bigram_shingles() -> None:
    text = "新加坡政府今天宣布将在明年推出新的饮料容器回收计划以减少垃圾"
    assert len(set(shingle_tokens(tokenize(text, "zh")))) >= MIN_COPY_SHINGLES
    assert copy_shingles(text, "zh") != []
    assert copy_shingles("请观看视频。", "zh") == []


def test_min_shingles_is_checked() -> None:
    with pytest.raises(ValueError, match="min_shingles"):
        copy_shingles("a b c d", "en", min_shingles=-1)
    assert copy_shingles("a", "en", min_shingles=0) == ["a"]


def test_an_empty_signature_is_told_apart_from_a_texts_as_a_tuple_or_an_array() -> None:
    empty = minhash_signature([])
    full = minhash_signature(shingle_tokens(tokenize("the bridge over the river reopened on monday morning", "en")))
    for signature in (empty, tuple(int(v) for v in empty), list(empty)):
        assert is_empty_signature(signature)
    for signature in (full, tuple(int(v) for v in full), (2**32 - 1,) * (NUM_PERM - 1) + (7,)):
        assert not is_empty_signature(signature)
