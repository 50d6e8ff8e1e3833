"""Text signatures for syndicated-copy detection: normalize → tokenize → shingle → hash.

Each step is a small pure function. The defaults below are the one place where the shingle
size, the number of MinHash permutations and the LSH banding are set; every stored signature
carries ``SIGNATURE_VERSION`` so signatures built with other settings are never compared.

Why 32 bands × 4 rows (and not datasketch's 9 × 13 for "threshold 0.8"): a reprint that is
truncated by 20% *and* gets a dateline and a footer has a 4-shingle Jaccard of about 0.7 with
its original. The probability that LSH proposes a pair of Jaccard ``s`` is
``1 - (1 - s**rows) ** bands``:

=========  =======  =======  =======  =======  =======
bands×rows  s=0.3    s=0.5    s=0.6    s=0.7    s=0.8
=========  =======  =======  =======  =======  =======
9 × 13      0.000    0.001    0.015    0.083    0.37
16 × 8      0.001    0.061    0.24     0.63     0.95
32 × 4      0.23     0.87     0.988    0.9998   1.000
=========  =======  =======  =======  =======  =======

LSH only proposes candidates; each one is verified on the estimated Jaccard of the full
signatures (see ``transforms.clustering.ClusterParams.copy_jaccard``), so the extra candidates
that 32 × 4 lets through at low similarity cost a comparison of 128 integers each and never
become false copies.

Why a copy signature needs ``MIN_COPY_SHINGLES`` (20) distinct shingles: a body that short
(under about 23 words) is a notice or a caption, not an article's text. Many pages carry the
same one ("Subscribe now to continue reading. Already a subscriber? Log in ...", 12 shingles;
"Watch the video.", 1), and two unrelated articles whose extracted body is that notice have a
Jaccard of 1.0. Such a text gets the empty signature (:func:`copy_shingles`), which is a copy
of nothing and has no LSH keys; the article is still clustered, on its title's terms
(:func:`transforms.features.features_from_text`). The bar stays well below real articles: 9 of
the 496 ECB+ texts (short teasers) and none of the 209 MMDS texts are under it, and every reprint
the copy benchmark builds (texts of 300+ characters) is above it. A notice of 23 words or more is
still signed: the bar is a length, it does not know boilerplate.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

SIGNATURE_VERSION = "sig-v1:nfkc-w4-mh128-blake2b-s1"
SHINGLE_SIZE = 4
NUM_PERM = 128
MINHASH_SEED = 1
LSH_BANDS = 32
LSH_ROWS = 4
SIMHASH_BITS = 64
MIN_COPY_SHINGLES = 20

# Languages written without spaces between words: tokenized as overlapping character bigrams.
CJK_LANGUAGES = frozenset({"zh", "ja", "ko", "zh-cn", "zh-tw", "zh-hans", "zh-hant"})

_MERSENNE_PRIME = np.uint64((1 << 61) - 1)
_MAX_HASH32 = np.uint64(0xFFFFFFFF)
_EMPTY_VALUE = int(_MAX_HASH32)  # the same, as a Python int (compared with a tuple's values)
_WORD_RE = re.compile(r"\w+", re.UNICODE)
_SPACE_RE = re.compile(r"\s+")
# CJK ideographs, kana and hangul; a run of these is split into character bigrams.
_CJK_RUN_RE = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+"
)
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"})


def normalize_for_signature(text: str) -> str:
    """Fold a text to the form signatures are computed on.

    NFKC (full-width digits and letters become ASCII), case-folded, typographic quotes and
    dashes made plain, runs of whitespace collapsed to one space.

    Args:
        text: Any text; may be empty.

    Returns:
        The normalised text, stripped.

    >>> normalize_for_signature("  The\\u00a0QUICK\\n\\n\\u201cfox\\u201d  ")
    'the quick "fox"'
    """
    folded = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return _SPACE_RE.sub(" ", folded).strip()


def is_cjk_language(language: str) -> bool:
    """Whether ``language`` is tokenized as character bigrams.

    >>> is_cjk_language("zh"), is_cjk_language("en")
    (True, False)
    """
    return language.lower() in CJK_LANGUAGES


def tokenize(text: str, language: str) -> list[str]:
    """Split a text into signature tokens.

    Latin-script languages: lower-case ``\\w+`` words. CJK languages: each run of CJK
    characters becomes its overlapping character bigrams (a single character stays a
    unigram), and any Latin words or numbers between runs stay words. The text is
    normalised with :func:`normalize_for_signature` first.

    Args:
        text: The text.
        language: ISO 639-1 code of the text (``"en"``, ``"zh"``, ...).

    Returns:
        Tokens in text order.

    >>> tokenize("Hello, World! 2024", "en")
    ['hello', 'world', '2024']
    >>> tokenize("新加坡政府 2024年", "zh")
    ['新加', '加坡', '坡政', '政府', '2024', '年']
    """
    norm = normalize_for_signature(text)
    if not is_cjk_language(language):
        return _WORD_RE.findall(norm)
    tokens: list[str] = []
    for word in _WORD_RE.findall(norm):
        pos = 0
        for run in _CJK_RUN_RE.finditer(word):
            if run.start() > pos:
                tokens.append(word[pos : run.start()])
            chars = run.group()
            if len(chars) == 1:
                tokens.append(chars)
            else:
                tokens.extend(chars[i : i + 2] for i in range(len(chars) - 1))
            pos = run.end()
        if pos < len(word):
            tokens.append(word[pos:])
    return tokens


def shingle_tokens(tokens: Sequence[str], size: int = SHINGLE_SIZE) -> list[str]:
    """Overlapping ``size``-token shingles, each joined with a space.

    A text shorter than ``size`` tokens gives one shingle of all its tokens, so a short text
    still has a signature; no tokens give no shingles.

    Args:
        tokens: Tokens from :func:`tokenize`.
        size: Tokens per shingle, at least 1.

    Returns:
        Shingles in text order (duplicates kept; the hashes treat them as a set).

    Raises:
        ValueError: If ``size`` < 1.

    >>> shingle_tokens(["a", "b", "c"], size=2)
    ['a b', 'b c']
    >>> shingle_tokens(["a"], size=4)
    ['a']
    >>> shingle_tokens([], size=4)
    []
    """
    if size < 1:
        raise ValueError(f"shingle size must be >= 1, got {size}")
    if not tokens:
        return []
    if len(tokens) < size:
        return [" ".join(tokens)]
    return [" ".join(tokens[i : i + size]) for i in range(len(tokens) - size + 1)]


def hash_shingles(shingles: Sequence[str]) -> npt.NDArray[np.uint64]:
    """64-bit blake2b hashes of the distinct shingles, sorted (so order never matters)."""
    distinct = sorted(set(shingles))
    return np.array(
        [int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(), "little") for s in distinct],
        dtype=np.uint64,
    )


def simhash_fingerprint(shingles: Sequence[str], bits: int = SIMHASH_BITS) -> int:
    """Charikar SimHash of the distinct shingles (each weighted 1).

    Args:
        shingles: Shingles from :func:`shingle_tokens`.
        bits: Fingerprint width; only 64 is supported.

    Returns:
        An unsigned 64-bit integer; 0 for no shingles.

    Raises:
        ValueError: If ``bits`` is not 64.

    >>> simhash_fingerprint([])
    0
    >>> simhash_fingerprint(["a b c d"]) == simhash_fingerprint(["a b c d", "a b c d"])
    True
    """
    if bits != SIMHASH_BITS:
        raise ValueError(f"only {SIMHASH_BITS}-bit SimHash is supported, got {bits}")
    hashes = hash_shingles(shingles)
    if hashes.size == 0:
        return 0
    as_bytes = hashes.astype("<u8").view(np.uint8).reshape(-1, 8)
    bit_matrix = np.unpackbits(as_bytes, axis=1, bitorder="little").astype(np.int64)
    votes = 2 * bit_matrix.sum(axis=0) - hashes.size
    out_bits = (votes > 0).astype(np.uint8)
    return int.from_bytes(np.packbits(out_bits, bitorder="little").tobytes(), "little")


def hamming_distance(a: int, b: int) -> int:
    """Number of differing bits between two fingerprints.

    >>> hamming_distance(0b1011, 0b0001)
    2
    """
    return (a ^ b).bit_count()


def _permutations(num_perm: int, seed: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """Coefficients (a, b) of the universal hashes, derived with blake2b so they never change."""
    digest = hashlib.blake2b(f"minhash:{seed}".encode(), digest_size=64).digest()
    out = bytearray()
    counter = 0
    while len(out) < num_perm * 8:
        out += hashlib.blake2b(counter.to_bytes(8, "little"), key=digest, digest_size=64).digest()
        counter += 1
    words = np.frombuffer(bytes(out[: num_perm * 8]), dtype="<u4").astype(np.uint64).reshape(num_perm, 2)
    # a in [1, 2^32), b in [0, 2^32): a * h + b < 2^64 for 32-bit h, so nothing overflows.
    a = np.maximum(words[:, 0], np.uint64(1))
    b = words[:, 1]
    return a, b


_PERM_CACHE: dict[tuple[int, int], tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]] = {}


def minhash_signature(
    shingles: Sequence[str], num_perm: int = NUM_PERM, seed: int = MINHASH_SEED
) -> npt.NDArray[np.uint32]:
    """MinHash signature of the distinct shingles, vectorised with numpy.

    Each shingle is hashed to 32 bits with blake2b, then mapped through ``num_perm`` hashes
    ``(a * h + b) mod (2^61 - 1)`` truncated to 32 bits; the signature keeps the minimum of
    each. The empty set gives all ``0xFFFFFFFF``.

    Args:
        shingles: Shingles from :func:`shingle_tokens`.
        num_perm: Number of hash functions, at least 1.
        seed: Seed of the hash family; signatures with different seeds are not comparable.

    Returns:
        A ``uint32`` array of length ``num_perm``.

    Raises:
        ValueError: If ``num_perm`` < 1.
    """
    return minhash_from_hashes(hash_shingles(shingles), num_perm, seed)


def minhash_from_hashes(
    hashes: npt.NDArray[np.uint64], num_perm: int = NUM_PERM, seed: int = MINHASH_SEED
) -> npt.NDArray[np.uint32]:
    """MinHash signature of a set given by the 64-bit hashes of its members.

    :func:`minhash_signature` is this function over :func:`hash_shingles`; it is public so
    that callers who already hold shingle hashes (benchmarks, batch jobs) skip the strings.
    Only the low 32 bits of each hash are used.

    Args:
        hashes: ``uint64`` hashes; duplicates and order do not matter.
        num_perm: Number of hash functions, at least 1.
        seed: Seed of the hash family.

    Returns:
        A ``uint32`` array of length ``num_perm``; all ``0xFFFFFFFF`` for no hashes.

    Raises:
        ValueError: If ``num_perm`` < 1.

    >>> minhash_from_hashes(np.array([], dtype=np.uint64), num_perm=2).tolist()
    [4294967295, 4294967295]
    """
    if num_perm < 1:
        raise ValueError(f"num_perm must be >= 1, got {num_perm}")
    key = (num_perm, seed)
    if key not in _PERM_CACHE:
        _PERM_CACHE[key] = _permutations(num_perm, seed)
    a, b = _PERM_CACHE[key]
    low = np.asarray(hashes, dtype=np.uint64) & _MAX_HASH32
    if low.size == 0:
        return np.full(num_perm, 0xFFFFFFFF, dtype=np.uint32)
    values = (low[:, None] * a[None, :] + b[None, :]) % _MERSENNE_PRIME & _MAX_HASH32
    signature: npt.NDArray[np.uint32] = values.min(axis=0).astype(np.uint32)
    return signature


def is_empty_signature(signature: Sequence[int] | npt.NDArray[np.unsignedinteger[Any]]) -> bool:
    """Whether a MinHash signature is the one of the empty set (every value the largest hash).

    >>> is_empty_signature((0xFFFFFFFF,) * 4), is_empty_signature((0xFFFFFFFF, 7, 0xFFFFFFFF))
    (True, False)
    """
    if isinstance(signature, np.ndarray):
        return bool(np.all(signature == _MAX_HASH32))
    # A signature of a text stops at its first value (a tuple's values are Python ints, each
    # compared as it is: converting the 128 of them to an array cost more than the rest).
    return all(value == _EMPTY_VALUE for value in signature)


def estimate_jaccard(
    a: Sequence[int] | npt.NDArray[np.uint32], b: Sequence[int] | npt.NDArray[np.uint32]
) -> float:
    """Estimated Jaccard similarity of two MinHash signatures of the same length.

    Two empty-set signatures are given 0.0: an empty text is a copy of nothing.

    Raises:
        ValueError: If the signatures differ in length.

    >>> estimate_jaccard([1, 2, 3, 4], [1, 2, 0, 0])
    0.5
    """
    left = np.asarray(a, dtype=np.uint64)
    right = np.asarray(b, dtype=np.uint64)
    if left.shape != right.shape:
        raise ValueError(f"signatures differ in length: {left.shape} vs {right.shape}")
    if is_empty_signature(left) or is_empty_signature(right):
        return 0.0
    return float(np.mean(left == right))


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """The splitmix64 finaliser, element-wise (uint64 arithmetic wraps)."""
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX_1
    z = (z ^ (z >> np.uint64(27))) * _MIX_2
    return z ^ (z >> np.uint64(31))


def lsh_band_keys(signatures: npt.NDArray[np.uint32], bands: int = LSH_BANDS, rows: int = LSH_ROWS
                  ) -> npt.NDArray[np.int64]:
    """LSH bucket keys of many MinHash signatures at once: an ``(n, bands)`` array of 63-bit keys.

    Band ``i``'s key hashes the band number and its ``rows`` values through splitmix64, so two
    signatures share it exactly when those values are equal (up to a 63-bit collision, which
    only adds a candidate that the Jaccard estimate then rejects), and keys of different bands
    never meet. Vectorised, because a writer rebuilds the index of every recent article when it
    loads its checkpoint. Rows of empty-set signatures get keys too; callers skip them.

    Raises:
        ValueError: If ``bands`` or ``rows`` < 1 or ``bands * rows`` > the signature length.
    """
    values = np.asarray(signatures, dtype=np.uint32)
    if values.ndim != 2:
        raise ValueError(f"signatures must be a 2-d array, got shape {values.shape}")
    if bands < 1 or rows < 1:
        raise ValueError(f"bands and rows must be >= 1, got {bands}x{rows}")
    if bands * rows > values.shape[1]:
        raise ValueError(f"{bands}x{rows} bands need {bands * rows} values, signature has {values.shape[1]}")
    grid = values[:, : bands * rows].astype(np.uint64).reshape(values.shape[0], bands, rows)
    keys = np.broadcast_to(_splitmix64(np.arange(bands, dtype=np.uint64)), grid.shape[:2]).copy()
    for r in range(rows):
        keys = _splitmix64(keys ^ grid[:, :, r])
    return (keys >> np.uint64(1)).astype(np.int64)


def lsh_bands_many(signatures: npt.NDArray[np.uint32], bands: int = LSH_BANDS, rows: int = LSH_ROWS
                   ) -> list[list[int]]:
    """LSH bucket keys of many MinHash signatures (rows of a 2-d array), each as
    :func:`lsh_bands` gives them: the empty-set signature has no keys.

    Raises:
        ValueError: As :func:`lsh_band_keys`.
    """
    keys = lsh_band_keys(signatures, bands, rows).tolist()
    empty = np.all(np.asarray(signatures, dtype=np.uint64) == _MAX_HASH32, axis=1).tolist()
    return [[] if is_empty else row for row, is_empty in zip(keys, empty, strict=True)]


def lsh_bands(
    signature: Sequence[int] | npt.NDArray[np.uint32], bands: int = LSH_BANDS, rows: int = LSH_ROWS
) -> list[int]:
    """LSH bucket keys of one MinHash signature: one 63-bit key per band (see :func:`lsh_band_keys`).

    The empty-set signature has no keys.

    Args:
        signature: MinHash signature.
        bands: Number of bands.
        rows: Values per band; ``bands * rows`` must not exceed the signature length.

    Returns:
        ``bands`` non-negative integers below 2^63 (JSON- and int64-safe), or ``[]``.

    Raises:
        ValueError: If ``bands`` or ``rows`` < 1 or ``bands * rows`` > the signature length.
    """
    # The keys of lsh_band_keys for one row, without its many-row set-up: the writer computes
    # them for every article it assigns (issue 15).
    values = np.asarray(signature, dtype=np.uint32).astype(np.uint64)
    if values.ndim != 1:
        raise ValueError(f"a signature must be a 1-d array, got shape {values.shape}")
    if bands < 1 or rows < 1:
        raise ValueError(f"bands and rows must be >= 1, got {bands}x{rows}")
    if bands * rows > values.shape[0]:
        raise ValueError(f"{bands}x{rows} bands need {bands * rows} values, signature has {values.shape[0]}")
    if np.all(values == _MAX_HASH32):
        return []
    keys = _band_seeds(bands)
    grid = values[: bands * rows].reshape(bands, rows)
    for r in range(rows):
        keys = _splitmix64(keys ^ grid[:, r])
    return (keys >> np.uint64(1)).astype(np.int64).tolist()  # type: ignore[no-any-return]


@functools.cache
def _band_seeds(bands: int) -> npt.NDArray[np.uint64]:
    """The starting key of each band (its number through splitmix64), as lsh_band_keys starts them."""
    seeds = _splitmix64(np.arange(bands, dtype=np.uint64))
    seeds.flags.writeable = False
    return seeds


def simhash_blocks(fingerprint: int, blocks: int = 4) -> list[int]:
    """Keys of the 4-block SimHash index: any two fingerprints within distance ``blocks - 1``
    share at least one block exactly (pigeonhole). The block number is in the key.

    >>> simhash_blocks(0, 4)
    [0, 65536, 131072, 196608]
    """
    if blocks < 1 or SIMHASH_BITS % blocks:
        raise ValueError(f"blocks must divide {SIMHASH_BITS}, got {blocks}")
    width = SIMHASH_BITS // blocks
    mask = (1 << width) - 1
    return [(i << width) | ((fingerprint >> (i * width)) & mask) for i in range(blocks)]


def copy_shingles(
    text: str, language: str, shingle_size: int = SHINGLE_SIZE, min_shingles: int = MIN_COPY_SHINGLES
) -> list[str]:
    """The shingles a copy signature is computed on: the text's, or none when it gives fewer
    than ``min_shingles`` distinct shingles (too short to tell a reprint from boilerplate that
    unrelated pages share; see the module doc). No shingles give the empty signatures: SimHash
    0 and the empty-set MinHash, which is a copy of nothing and has no LSH keys.

    Raises:
        ValueError: If ``min_shingles`` < 0 (and as :func:`shingle_tokens`).

    >>> copy_shingles("Watch the video.", "en")
    []
    >>> len(copy_shingles("Watch the video.", "en", min_shingles=1))
    1
    """
    if min_shingles < 0:
        raise ValueError(f"min_shingles must be >= 0, got {min_shingles}")
    shingles = shingle_tokens(tokenize(text, language), shingle_size)
    return shingles if len(set(shingles)) >= min_shingles else []


def text_signatures(
    text: str,
    language: str,
    shingle_size: int = SHINGLE_SIZE,
    num_perm: int = NUM_PERM,
    seed: int = MINHASH_SEED,
) -> tuple[int, npt.NDArray[np.uint32]]:
    """SimHash and MinHash of one text in one pass: normalize → tokenize → shingle → hash."""
    shingles = shingle_tokens(tokenize(text, language), shingle_size)
    return simhash_fingerprint(shingles), minhash_signature(shingles, num_perm, seed)
