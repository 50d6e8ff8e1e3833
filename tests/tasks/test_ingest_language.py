"""The language an ingested article is stored with: the primary subtag of what the feed declares,
so every spelling of one language reaches one writer, and every stored language can name one."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tasks.ingest.article import build_article_row
from tasks.ingest.plan import FeedJob
from transforms.feeds import parse_feed
from transforms.records import ArticleRow, FeedState
from warehouse import layout

NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
FEED_URL = "https://herald.example/feed"
LINK = "https://herald.example/news/1"
PAGE = b"<html><head><title>Budget</title></head><body><p>42</p></body></html>"


def _row(channel_language: str) -> ArticleRow:
    feed = parse_feed(
        (f'<?xml version="1.0"?><rss version="2.0"><channel><title>Herald</title>'
         f"<language>{channel_language}</language>"
         f"<item><guid>1</guid><title>Budget</title><link>{LINK}</link></item>"
         "</channel></rss>").encode(), FEED_URL)
    job = FeedJob("f", FEED_URL, "herald", "de", "US", "", FeedState("f"))
    return build_article_row(job, feed.items[0], PAGE, LINK, NOW, embed=False)


@pytest.mark.parametrize("declared", ["en US", "en_US", "EN-us", " en-GB ", "en"])
def test_a_feed_language_is_stored_as_its_primary_subtag(declared: str) -> None:
    row = _row(declared)
    assert row.language == "en"
    layout.story_checkpoint_key(row.language)  # names a writer


@pytest.mark.parametrize("declared", ["English", "und", "x-klingon", "e n"])
def test_an_unreadable_feed_language_leaves_the_publishers(declared: str) -> None:
    assert _row(declared).language == "de"


def test_three_letter_codes_are_kept() -> None:
    assert _row("fil-PH").language == "fil"


def test_a_publisher_registry_language_is_its_primary_tag(tmp_path) -> None:
    from tasks.registry import parse_publishers_csv

    registry = parse_publishers_csv("publisher_id,name,domain,region,language\n"
                                    "a,A,a.test,GB,en_GB\nb,B,b.test,US,EN US\nc,C,c.test,PH,fil\nd,D,d.test,US,\n")
    assert {p: row["language"] for p, row in registry.publishers.items()} == {"a": "en", "b": "en", "c": "fil",
                                                                              "d": "und"}
    # A word is not a tag: the row is refused with its line, not stored as "und" (#16).
    with pytest.raises(ValueError, match=r"line 2: language must be a language tag"):
        parse_publishers_csv("publisher_id,name,domain,region,language\nd,D,d.test,US,English\n")


# --- a page that declares no language (#16) -----------------------------------------------------------

def _mmds(language: str) -> list[dict[str, str]]:
    import json

    from corpus_paths import CORPUS

    lines = (CORPUS / "clustering" / "mmds-dev.jsonl").read_text(encoding="utf-8").splitlines()
    return [row for row in map(json.loads, filter(None, lines)) if row["language"] == language]


def _undeclared_page(row: dict[str, str]) -> bytes:
    paragraphs = "".join(f"<p>{line}</p>" for line in row["text"].splitlines() if line.strip())
    return f"<html><head><title>{row['title']}</title></head><body><article>{paragraphs}</article></body></html>".encode()


def _guessed(page: bytes, publisher_language: str, site: tuple[str, ...]) -> object:
    from transforms.feeds import FeedItem

    job = FeedJob("f", FEED_URL, "p", publisher_language, "MY", "", FeedState("f"), site_languages=site)
    return build_article_row(job, FeedItem(LINK, LINK, "", "", None, None, (), None, None, None), page, LINK, NOW,
                             embed=False).language


def test_every_malay_article_is_malay_when_nothing_declares_a_language() -> None:
    rows = _mmds("ms")
    guessed = [_guessed(_undeclared_page(row), "und", ("en", "ms", "zh")) for row in rows]
    assert guessed == ["ms"] * len(rows)


def test_the_publishers_language_comes_before_a_guess() -> None:
    page = _undeclared_page(_mmds("ms")[0])
    assert _guessed(page, "ms", ()) == "ms"  # no guess among every language (which could say "id")


@pytest.mark.parametrize(("site", "expected"), [(("en", "zh"), "und"), (("en", "ms"), "ms")],
                         ids=["not-a-site-language", "a-site-language"])
def test_a_guess_is_among_the_site_languages_only(site: tuple[str, ...], expected: str) -> None:
    assert _guessed(_undeclared_page(_mmds("ms")[0]), "und", site) == expected


def test_a_page_declaration_still_wins() -> None:
    page = _undeclared_page(_mmds("ms")[0]).replace(b"<html>", b'<html lang="id">')
    assert _guessed(page, "ms", ("ms",)) == "id"
