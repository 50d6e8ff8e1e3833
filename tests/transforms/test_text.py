from __future__ import annotations

import pytest

from transforms.text import (
    is_dateline,
    is_usable_snippet,
    normalize_whitespace,
    snippet_from_text,
    strip_dateline,
)

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


@pytest.mark.parametrize(
    "text",
    [
        "4 August 2013 Last updated at 19:47 GMT",
        "Saturday, August 24, 2013",
        "12 January 2010 @ 09:29 pm",
        "Posted September 26, 2013-3:47pm Updated September 27, 2013-6:56am",
        "updated 8:41 p. m. EST, Tue March 3, 2009",
        "3/27/2012 @ 10:05AM",
        "2 October 2013, 15:39 (GMT+05: 00)",
    ],
    ids=["bbc-updated", "weekday-date", "at-sign-clock", "posted-updated", "p-m-zone", "numeric-date", "zone-offset"],
)
def test_a_date_line_is_a_dateline(text: str) -> None:
    assert is_dateline(text)


@pytest.mark.parametrize(
    "text",
    [
        "Sbarro files for bankruptcy again",
        "2 dead in crash",
        "May Day protests end peacefully",
        "On Saturday, 12 people died in the flood",
        "March 2014 sales fell",
        "",
    ],
    ids=["headline", "number-first", "may-the-word", "sentence-with-a-weekday", "month-then-words", "empty"],
)
def test_a_headline_is_no_dateline(text: str) -> None:
    assert not is_dateline(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Jan 5, 2011 \u2013 4:35 PM Pierre Thomas was placed on injured reserve.", "Pierre Thomas was placed on injured reserve."),
        ("Saturday, 28 September 2013 01:43 A jury convicted him.", "A jury convicted him."),
        ("On February 29, 2012, AMD announced a deal.", "On February 29, 2012, AMD announced a deal."),
        ("4 August 2013 Last updated at 19:47 GMT", "4 August 2013 Last updated at 19:47 GMT"),
        # seen under the demo's headlines (issue 14)
        ("Published time: March 12, 2013 02:03 Edited time: March 13, 2013 02:15 Police locked down the area.",
         "Police locked down the area."),
        ("on September 14, 2013 11:41am | Updated on September 14, 2013 12:02pm A woman was killed.",
         "A woman was killed."),
        ("on July 02 2013 7:41 AM A magnitude-6.1 quake struck.", "A magnitude-6.1 quake struck."),
        ("Release: 03/08/2013 Doug McDermott became the leading scorer.", "Doug McDermott became the leading scorer."),
        ("on Saturday, 12 people died.", "on Saturday, 12 people died."),
    ],
    ids=["dateline-then-lede", "weekday-dateline", "sentence-opening-with-a-date", "only-a-dateline",
         "published-then-edited", "lowercase-on-clock-then-updated", "lowercase-on-clock", "release-numeric-date",
         "lowercase-on-sentence"],
)
def test_strip_dateline(text: str, expected: str) -> None:
    assert strip_dateline(text) == expected


HEADLINE = "Lindsay Lohan checks into rehab at the Betty Ford Center"
BODY = f"{HEADLINE}\n{LONG_TEXT}"


@pytest.mark.parametrize(
    ("text", "description", "expected_start"),
    [
        (BODY, f"{HEADLINE} Each actor.", "The city council voted"),
        (BODY, f"{HEADLINE}\u2026", "The city council voted"),
        ("", "Analysis\u2026", ""),
        ("Analysis", None, ""),
        ("", f"{HEADLINE}\u2026", ""),
        (f"{HEADLINE}\nMay 2, 2013 12:50 PM\n{LONG_TEXT}", None, "The city council voted"),
    ],
    ids=["description-is-headline-and-stub", "description-is-headline", "one-word-description",
         "one-word-body", "nothing-but-the-headline", "dateline-after-headline"],
)
def test_snippet_falls_back_past_a_stub(text: str, description: str | None, expected_start: str) -> None:
    snippet = snippet_from_text(text, description, title=HEADLINE)
    assert snippet.startswith(expected_start)
    assert snippet == "" or is_usable_snippet(snippet)


def test_a_snippet_reads_only_the_head_of_a_huge_body() -> None:
    from transforms.text import SNIPPET_READ_CHARS

    huge = LONG_TEXT + " " + "x" * (SNIPPET_READ_CHARS * 50)
    assert snippet_from_text(huge, "y" * (SNIPPET_READ_CHARS * 50)) == snippet_from_text(LONG_TEXT, None)
