"""Page extraction: the headline cap (licensing: a headline and a snippet, never a body) and the
HTTP charset."""

from __future__ import annotations

import json

import pytest

from transforms.extraction import charset_from_content_type, decode_html, extract_page
from transforms.feeds import TITLE_MAX_CHARS

URL = "https://news.example/2026/12/budget"
BODY = "The minister said the budget would rise. " * 500  # 20,500 characters
PARAGRAPHS = f"<p>{BODY}</p>"


@pytest.mark.parametrize(
    "head",
    [
        f'<meta property="og:title" content="{BODY}">',
        '<script type="application/ld+json">' + json.dumps({"@type": "NewsArticle", "headline": BODY}) + "</script>",
        f'<meta name="twitter:title" content="{BODY}">',
        f"<title>{BODY}</title>",
    ],
    ids=["og-title", "json-ld-headline", "twitter-title", "title-element"],
)
def test_page_title_is_capped(head: str) -> None:
    page = extract_page(f"<html><head>{head}</head><body>{PARAGRAPHS}</body></html>".encode(), URL)
    assert page.title is not None
    assert len(page.title) <= TITLE_MAX_CHARS
    assert page.title.endswith("\u2026") and BODY.startswith(page.title[:-1] + " ")


def test_h1_title_is_capped() -> None:
    page = extract_page(f"<html><body><h1>{BODY}</h1>{PARAGRAPHS}</body></html>".encode(), URL)
    assert page.title is not None and len(page.title) <= TITLE_MAX_CHARS


def test_short_title_is_kept_whole() -> None:
    page = extract_page(b'<html><head><meta property="og:title" content=" Budget  rises "></head></html>', URL)
    assert page.title == "Budget rises"


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("text/html; charset=windows-1251", "windows-1251"),
        ('text/html; charset="KOI8-R"', "KOI8-R"),
        ("text/html;charset='utf-8' ; foo=bar", "utf-8"),
        ("text/html; CHARSET = iso-8859-1", "iso-8859-1"),
        ("text/html; foo=bar; charset=shift_jis", "shift_jis"),
        ("text/html", None),
        ("text/html; charset=", None),
        ('text/html; x="a;charset=koi8-r"', None),
        ("", None),
        (None, None),
        # Several headers, joined by ", ": the last parseable value, with an earlier charset if the essence matches.
        ("text/html, text/html; charset=windows-1251", "windows-1251"),
        ("text/html; charset=windows-1251, text/html", "windows-1251"),
        ("text/html; charset=iso-8859-5, text/html; charset=windows-1251", "windows-1251"),
        ("text/html; charset=windows-1251, nonsense, */*", "windows-1251"),
        ("text/plain; charset=windows-1251, text/html", None),
        ('text/html; charset=gbk, text/html; x=",text/plain"', "gbk"),
    ],
    ids=["plain", "quoted", "single-quoted-and-more", "spaces-uppercase", "not-first", "none", "empty-value",
         "inside-another-parameter", "empty", "missing", "joined-plain-first", "joined-charset-first",
         "joined-last-charset-wins", "joined-unparseable-skipped", "joined-other-essence", "joined-quoted-comma"],
)
def test_charset_from_content_type(content_type: str | None, expected: str | None) -> None:
    assert charset_from_content_type(content_type) == expected


def test_http_charset_decodes_a_page_without_its_own_declaration() -> None:
    title = "Новости дня: правительство объявило новый бюджет"
    lede = "Правительство объявило сегодня новый бюджет на следующий год. " * 8
    html = f"<html><head><title>{title}</title></head><body><article><p>{lede}</p></article></body></html>"
    page = extract_page(html.encode("cp1251"), URL,
                        http_charset=charset_from_content_type("text/html; charset=windows-1251"))
    assert page.title == title
    assert page.text.startswith("Правительство объявило сегодня")
    assert page.language == "ru"


@pytest.mark.parametrize("charset", ["base64", "rot13", "zlib", "hex", "uu", "idna", "punycode", "utf-7", "undefined"])
def test_a_charset_no_page_is_written_in_is_ignored_not_fatal(charset: str) -> None:
    """Bytes-to-bytes codecs raised LookupError, idna/punycode UnicodeError: declared in a header or a meta."""
    page = b"<html><head><title>Caf\xe9</title></head></html>"
    assert decode_html(page, http_charset=charset) == page.decode("cp1252")
    meta = b'<html><head><meta charset="' + charset.encode() + b'"><title>Caf\xe9</title></head></html>'
    assert decode_html(meta) == meta.decode("cp1252")


def test_a_byline_or_section_holding_text_is_capped_like_a_title() -> None:
    long = " ".join(["word"] * 2000)
    page = (f'<html><head><meta name="author" content="{long}"><meta property="article:section" content="{long}">'
            "<title>Headline</title></head><body><p>Short body.</p></body></html>").encode()
    extracted = extract_page(page, "https://news.example/a")
    assert extracted.author is not None and len(extracted.author) <= TITLE_MAX_CHARS
    assert extracted.section is not None and len(extracted.section) <= TITLE_MAX_CHARS
