from __future__ import annotations

import pytest

from transforms.text import normalize_whitespace, snippet_from_text

LONG_TEXT = (
    "The city council voted on Tuesday to approve a new budget that expands bus service, "
    "repairs three bridges and hires forty teachers, after a debate that lasted well past "
    "midnight and drew hundreds of residents to the chamber. Opponents said the plan was too costly."
)
LEDE = "Council approves a budget that expands bus service, repairs bridges and hires teachers after a long debate."


@pytest.mark.parametrize(
    ("text", "description"),
    [
        (LONG_TEXT, None),
        (LONG_TEXT * 5, LEDE * 4),
        ("x" * 1000, None),
        ("word " * 300, None),
        ("a" * 199 + " b", None),
        ("\u00e9" * 500, None),
        ("", "y" * 500),
        ("Supercalifragilistic " * 40, None),
    ],
    ids=[
        "long-text",
        "long-description",
        "no-spaces",
        "many-words",
        "space-at-limit",
        "non-ascii",
        "desc-only",
        "long-words",
    ],
)
def test_snippet_never_exceeds_limit(text: str, description: str | None) -> None:
    assert len(snippet_from_text(text, description)) <= 200
    assert len(snippet_from_text(text, description, limit=50)) <= 50


def test_snippet_cuts_at_word_boundary_with_ellipsis() -> None:
    snippet = snippet_from_text(LONG_TEXT, None)
    assert snippet.endswith("\u2026")
    head = snippet.removesuffix("\u2026")
    assert LONG_TEXT.startswith(head)
    # The character after the cut in the original is a space: no word was split.
    assert LONG_TEXT[len(head)] in " ,"


def test_short_text_is_not_cut() -> None:
    assert snippet_from_text("Short text.", None) == "Short text."


def test_snippet_prefers_good_description() -> None:
    assert snippet_from_text(LONG_TEXT, LEDE) == LEDE


@pytest.mark.parametrize(
    "description",
    [
        "Breaking news",
        "The best local news, weather and sports from Springfield every day since 1901 with love.",
    ],
    ids=["too-short", "unrelated-tagline"],
)
def test_snippet_ignores_poor_description(description: str) -> None:
    assert snippet_from_text(LONG_TEXT, description).startswith("The city council voted")


@pytest.mark.parametrize(
    ("text", "description", "expected"),
    [("", None, ""), ("   \n ", "", ""), ("", "Only a description here.", "Only a description here.")],
    ids=["empty", "blank", "description-fallback"],
)
def test_snippet_empty_text(text: str, description: str | None, expected: str) -> None:
    assert snippet_from_text(text, description) == expected


def test_snippet_collapses_whitespace() -> None:
    assert snippet_from_text("a\n\nb\t c", None) == "a b c"


def test_snippet_rejects_tiny_limit() -> None:
    with pytest.raises(ValueError):
        snippet_from_text("abc", None, limit=1)


@pytest.mark.parametrize(
    ("text", "keep_newlines", "expected"),
    [
        ("  a \t b  ", False, "a b"),
        ("a\r\nb", False, "a b"),
        ("a\r\n\r\n  b  \nc", True, "a\nb\nc"),
        ("soft\u00adhyphen zero\u200bwidth", False, "softhyphen zerowidth"),
        ("cafe\u0301", False, "caf\u00e9"),
        ("", False, ""),
    ],
    ids=["spaces", "crlf-joined", "crlf-kept", "invisible-chars", "nfc", "empty"],
)
def test_normalize_whitespace(text: str, keep_newlines: bool, expected: str) -> None:
    assert normalize_whitespace(text, keep_newlines=keep_newlines) == expected
