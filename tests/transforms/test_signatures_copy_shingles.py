"""copy_shingles: the shingles a copy signature is computed on, none below the bar."""

from __future__ import annotations

import pytest

from transforms.signatures import MIN_COPY_SHINGLES, copy_shingles, shingle_tokens, tokenize


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
