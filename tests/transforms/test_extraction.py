from __future__ import annotations

import gzip
import json
import time
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime
from pathlib import Path

import pytest

from transforms.errors import ExtractionError, TransformError
from transforms.extraction import (
    ExtractedPage,
    extract_page,
    guess_language,
    parse_datetime_utc,
)
from transforms.feeds import TITLE_MAX_CHARS
from transforms.html_tree import charset_from_content_type, decode_html

PAGES_DIR = Path(__file__).resolve().parents[1] / "data" / "pages"
PAGE_NAMES = sorted(p.name.removesuffix(".html.gz") for p in PAGES_DIR.glob("*.html.gz"))


def _load(name: str) -> tuple[bytes, dict[str, object]]:
    html = gzip.decompress((PAGES_DIR / f"{name}.html.gz").read_bytes())
    expected = json.loads((PAGES_DIR / f"{name}.expected.json").read_text("utf-8"))
    return html, expected


def test_fixture_pages_present() -> None:
    assert len(PAGE_NAMES) == 3


@pytest.mark.parametrize("name", PAGE_NAMES)
def test_real_page(name: str) -> None:
    html, expected = _load(name)
    page = extract_page(html, str(expected["url"]))
    assert page.is_extracted
    assert page.canonical_url == expected["canonical_url"]
    assert page.title == expected["title"]
    assert page.language == expected["language"]
    published = page.published_at.isoformat() if page.published_at else None
    assert published == expected["published_at"]
    assert page.is_opinion == expected["is_opinion"]
    # Body: starts with the ground-truth lede and reaches the last paragraph.
    assert page.text.split("\n")[0] == expected["body_first_paragraph"]
    # Compared without whitespace: inline links may put line breaks inside a paragraph.
    assert "".join(str(expected["body_last_paragraph"]).split()) in "".join(page.text.split())
    assert "<" not in page.text.split("\n")[0]


@pytest.mark.parametrize("name", PAGE_NAMES)
def test_real_page_str_and_bytes_agree(name: str) -> None:
    html, expected = _load(name)
    assert extract_page(html.decode("utf-8"), str(expected["url"])) == extract_page(
        html, str(expected["url"])
    )


def test_extracted_page_is_frozen() -> None:
    page = extract_page(b"<html><body><p>x</p></body></html>", "https://ex.com/a")
    assert isinstance(page, ExtractedPage)
    with pytest.raises(FrozenInstanceError):
        page.text = "changed"  # type: ignore[misc]


HOSTILE = {
    "empty-bytes": b"",
    "empty-str": "",
    "whitespace": b"   \n\t ",
    "binary-garbage": bytes(range(256)) * 64,
    "png-header": b"\x89PNG\r\n\x1a\n" + b"\x00\x01\x02\xff" * 1000,
    "nested-divs-50k": b"<html><body>"
    + b"<div>" * 50_000
    + b"<p>deep</p>"
    + b"</div>" * 50_000
    + b"</body></html>",
    "unclosed-tags": b"<html><body><p>a<p>b<div><span><b><i>" * 2000,
    "script-only": b"<html><script>" + b"var x = 1;" * 10_000 + b"</script></html>",
    "xml-declaration-str": '<?xml version="1.0" encoding="utf-8"?><html><body><p>hello</p></body></html>',
    "null-bytes": b"<html>\x00<body>\x00<p>text</p></body></html>",
}


@pytest.mark.parametrize("html", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_input_never_raises(html: bytes | str) -> None:
    start = time.perf_counter()
    page = extract_page(html, "https://ex.com/a")
    assert time.perf_counter() - start < 10
    assert isinstance(page.text, str)
    assert page.url == "https://ex.com/a"
    assert page.canonical_url == "https://ex.com/a"


@pytest.mark.parametrize("html", [b"", bytes(range(256)) * 64], ids=["empty", "binary"])
def test_unreadable_input_gives_empty_text(html: bytes) -> None:
    page = extract_page(html, "https://ex.com/a")
    assert page.text == ""
    assert not page.is_extracted
    assert page.title is None


def test_invalid_url_gives_no_canonical() -> None:
    page = extract_page(b"<html><body><p>x</p></body></html>", "not a url")
    assert page.canonical_url is None


def test_bad_max_bytes_raises_extraction_error() -> None:
    with pytest.raises(ExtractionError) as info:
        extract_page(b"<p>x</p>", "https://ex.com/a", max_bytes=0)
    assert isinstance(info.value, TransformError)
    assert info.value.url == "https://ex.com/a"


def _article_html(body: str, head: str = "", charset_meta: str = "") -> str:
    return (
        f"<html><head>{charset_meta}<title>T</title>{head}</head><body><nav><a href='/'>Home</a></nav>"
        f"<article><h1>Headline here</h1>{body}</article><footer>Copyright</footer></body></html>"
    )


PARAGRAPHS = [
    "Le café de la rue Saint-Honoré a rouvert ses portes après des mois de travaux très longs.",
    "Les habitués étaient nombreux à attendre devant la porte dès sept heures du matin, émus.",
    "Le propriétaire a expliqué que la façade avait été entièrement refaite à l'identique.",
    "Il espère désormais retrouver la clientèle fidèle qui fréquentait l'établissement depuis des années.",
]


def test_latin1_bytes_without_charset() -> None:
    html = _article_html("".join(f"<p>{p}</p>" for p in PARAGRAPHS)).encode("latin-1")
    page = extract_page(html, "https://ex.com/a")
    assert "café" in page.text and "façade" in page.text
    assert "\ufffd" not in page.text
    assert page.language == "fr"


def test_utf8_bytes_with_wrong_latin1_declaration() -> None:
    html = _article_html(
        "".join(f"<p>{p}</p>" for p in PARAGRAPHS), charset_meta='<meta charset="iso-8859-1">'
    ).encode("utf-8")
    page = extract_page(html, "https://ex.com/a")
    assert "café" in page.text and "Ã" not in page.text


def test_declared_legacy_charset_is_used() -> None:
    text = "Новости дня: в Москве открылся новый музей современного искусства и дизайна."
    html = _article_html(
        f"<p>{text}</p>" * 3,
        charset_meta='<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">',
    ).encode("cp1251")
    page = extract_page(html, "https://ex.com/a")
    assert "музей" in page.text
    assert page.language == "ru"


def test_utf8_bom() -> None:
    html = b"\xef\xbb\xbf" + _article_html("".join(f"<p>{p}</p>" for p in PARAGRAPHS)).encode("utf-8")
    assert "café" in extract_page(html, "https://ex.com/a").text


def test_max_bytes_caps_input() -> None:
    html = _article_html("".join(f"<p>{p}</p>" for p in PARAGRAPHS * 50)).encode("utf-8")
    capped = extract_page(html, "https://ex.com/a", max_bytes=2000)
    full = extract_page(html, "https://ex.com/a")
    assert 0 < len(capped.text) < len(full.text)


def test_json_ld_only_page() -> None:
    body = " ".join(
        f"Paragraph {i}: the council approved the new budget after a long debate about schools and roads."
        for i in range(8)
    )
    ld = {
        "@context": "https://schema.org",
        "@graph": [
            {"@type": "WebSite", "name": "Example"},
            {
                "@type": "OpinionNewsArticle",
                "headline": "Council approves budget",
                "datePublished": "2024-03-05T09:30:00+01:00",
                "inLanguage": "en-GB",
                "articleSection": ["Politics"],
                "author": [{"@type": "Person", "name": "Ann Lee"}, {"@type": "Person", "name": "Bo Kim"}],
                "articleBody": body,
                "url": "https://news.example.org/2024/03/budget",
            },
        ],
    }
    html = (
        '<html><head><script type="application/ld+json">'
        + json.dumps(ld)
        + '</script></head><body><div id="app"></div><script>render()</script></body></html>'
    )
    page = extract_page(html, "https://news.example.org/2024/03/budget?utm_source=x")
    assert page.title == "Council approves budget"
    assert page.published_at == datetime(2024, 3, 5, 8, 30, tzinfo=UTC)
    assert page.language == "en"
    assert page.section == "Politics"
    assert page.author == "Ann Lee, Bo Kim"
    assert page.is_opinion
    assert "council approved the new budget" in page.text
    assert page.canonical_url == "https://news.example.org/2024/03/budget"


def test_metadata_from_meta_tags() -> None:
    head = (
        '<link rel="canonical" href="/2024/05/story">'
        '<meta property="og:url" content="https://other.example/x">'
        '<meta property="og:title" content="  The real   headline ">'
        '<meta property="og:image" content="/img/lead.jpg">'
        '<meta property="og:description" content="What happened, in one sentence.">'
        '<meta property="og:locale" content="de_DE">'
        '<meta property="article:published_time" content="2024-05-01T12:00:00Z">'
        '<meta property="article:section" content="Meinung">'
        '<meta name="author" content="Jo Schmidt">'
    )
    html = _article_html("<p>" + "Ein Satz über das Wetter in Berlin und anderswo. " * 10 + "</p>", head=head)
    page = extract_page(html, "https://www.example.de/2024/05/story/amp")
    assert page.canonical_url == "https://www.example.de/2024/05/story"
    assert page.title == "The real headline"
    assert page.image_url == "https://www.example.de/img/lead.jpg"
    assert page.description == "What happened, in one sentence."
    assert page.language == "de"
    assert page.published_at == datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    assert page.section == "Meinung"
    assert page.author == "Jo Schmidt"
    assert not page.is_opinion


def test_time_element_and_no_stated_date() -> None:
    with_time = _article_html('<time datetime="2023-01-02">Jan 2</time><p>' + "Words here. " * 30 + "</p>")
    assert extract_page(with_time, "https://ex.com/a").published_at == datetime(2023, 1, 2, tzinfo=UTC)
    without = _article_html("<p>Published 2023-01-02. " + "Words here. " * 30 + "</p>")
    assert extract_page(without, "https://ex.com/a").published_at is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://www.nytimes.com/2019/11/19/opinion/republicans.html", True),
        ("https://ex.com/columnists/2019/x", True),
        ("https://ex.com/news/opinionated-robots", False),
        ("https://ex.com/news/story", False),
    ],
    ids=["opinion-path", "columnists-path", "word-inside-slug", "news"],
)
def test_is_opinion_from_url(url: str, expected: bool) -> None:
    assert extract_page(_article_html("<p>text</p>"), url).is_opinion is expected


def test_split_body_chunks_are_merged() -> None:
    chunk = '<div class="body-chunk">{}</div><div class="ad">Advertisement</div>'
    paras = [
        f"<p>Paragraph number {i} of the story, with enough words to count as body text here.</p>"
        for i in range(9)
    ]
    body = "".join(chunk.format("".join(paras[i : i + 3])) for i in range(0, 9, 3))
    page = extract_page(_article_html(body), "https://ex.com/a")
    for i in range(9):
        assert f"Paragraph number {i} of the story" in page.text
    assert page.text.index("number 2 ") < page.text.index("number 5 ") < page.text.index("number 8 ")


def test_boilerplate_lines_dropped() -> None:
    body = (
        "".join(f"<p>{p}</p>" for p in PARAGRAPHS[:2])
        + "<p>Read more: Another story elsewhere</p>"
        + "".join(f"<p>{p}</p>" for p in PARAGRAPHS[2:])
    )
    page = extract_page(_article_html(body), "https://ex.com/a")
    assert "Read more" not in page.text
    assert PARAGRAPHS[3] in page.text


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2019-11-19T10:30:00Z", datetime(2019, 11, 19, 10, 30, tzinfo=UTC)),
        ("2019-11-19T10:30:00.1234567+01:00", datetime(2019, 11, 19, 9, 30, 0, 123456, tzinfo=UTC)),
        ("2019-11-19 10:30:00", datetime(2019, 11, 19, 10, 30, tzinfo=UTC)),
        ("2019-11-19", datetime(2019, 11, 19, tzinfo=UTC)),
        ("Tue, 19 Nov 2019 10:30:00 +0000", datetime(2019, 11, 19, 10, 30, tzinfo=UTC)),
        ("Fri 6:45 PM, Feb 16, 2018", None),
        ("0001-01-01T00:00:00Z", None),
        ("", None),
    ],
    ids=[
        "iso-z",
        "iso-7-digit-fraction",
        "space-separated",
        "date-only",
        "rfc2822",
        "free-text",
        "year-1",
        "empty",
    ],
)
def test_parse_datetime_utc(value: str, expected: datetime | None) -> None:
    assert parse_datetime_utc(value) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The mayor said on Monday that the city is going to build a new bridge for the people.", "en"),
        ("El alcalde dijo que la ciudad va a construir un nuevo puente para los vecinos del barrio.", "es"),
        ("시작은 엘제이의 일방적인 사진 공개로부터 비롯됐다", "ko"),
        ("東京都は新しい橋を建設すると発表しました。", "ja"),
        ("Мэр заявил, что город построит новый мост для жителей района.", "ru"),
        ("", None),
        ("ok", None),
    ],
    ids=["en", "es", "ko", "ja", "ru", "empty", "too-short"],
)
def test_guess_language(text: str, expected: str | None) -> None:
    assert guess_language(text) == expected


def test_decode_html_truncated_utf8_is_still_utf8() -> None:
    data = "<p>café</p>".encode() * 3
    assert decode_html(data[:-7], truncated=True).startswith("<p>café</p>")


def test_sibling_merge_skips_containers_with_own_headline() -> None:
    from transforms.html_tree import parse_tree
    from transforms.page_body import add_sibling_chunks

    words = "council budget school road bridge teacher vote mayor park river library tax".split()

    def paras(label: str) -> list[str]:
        # Distinct wording per paragraph: the merge treats a shared 40-character head or tail
        # as "already in the output".
        return [
            f"{label} paragraph {i} talks about the {words[(i + len(label)) % 12]} and the "
            f"{words[(2 * i + 5) % 12]} in detail, {i * 7} times over, said {label.lower()} sources."
            for i in range(3)
        ]

    first, chunk, other = paras("First"), paras("Chunk"), paras("Other")
    html = (
        '<html><body><div class="story">' + "".join(f"<p>{p}</p>" for p in first) + "</div>"
        '<div class="story">' + "".join(f"<p>{p}</p>" for p in chunk) + "</div>"
        '<div class="story"><h1>Another story</h1>'
        + "".join(f"<p>{p}</p>" for p in other)
        + "</div></body></html>"
    )
    tree = parse_tree(html)
    assert tree is not None
    merged = add_sibling_chunks(tree, "\n".join(first))
    assert merged.split("\n") == first + chunk


# --------------------------------------------------------------------------------------------------
# Page extraction: the headline cap (licensing: a headline and a snippet, never a body) and the
# HTTP charset.
# --------------------------------------------------------------------------------------------------

URL = "https://news.example/2026/12/budget"
BODY = "The minister said the budget would rise. " * 500  # 20,500 characters
BODY_PARAGRAPHS = f"<p>{BODY}</p>"


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
    page = extract_page(f"<html><head>{head}</head><body>{BODY_PARAGRAPHS}</body></html>".encode(), URL)
    assert page.title is not None
    assert len(page.title) <= TITLE_MAX_CHARS
    assert page.title.endswith("\u2026") and BODY.startswith(page.title[:-1] + " ")


def test_h1_title_is_capped() -> None:
    page = extract_page(f"<html><body><h1>{BODY}</h1>{BODY_PARAGRAPHS}</body></html>".encode(), URL)
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


def test_a_page_is_parsed_up_to_its_markup_cap() -> None:
    """Unclosed nested markup past MAX_MARKUP_TAGS is not parsed (200,000 elements took trafilatura 23 s);
    the metadata before it and the body text up to it still are (issue 32)."""
    from transforms.html_tree import MAX_MARKUP_TAGS

    head = ('<html lang="en"><head><title>Council passes the budget</title><meta name="description" content="'
            'The vote came late."></head><body><article><h1>Council passes the budget</h1>'
            + "<p>The council met on Monday to vote on the budget for the schools of the city.</p>" * 5)
    page = extract_page((head + "<div><p><b>" * (MAX_MARKUP_TAGS * 4)).encode(), "https://example.com/a")
    assert page.title == "Council passes the budget" and page.description == "The vote came late."
    assert "The council met on Monday to vote" in page.text


def test_metadata_and_body_are_read_up_to_their_caps() -> None:
    from transforms.page_body import BODY_MAX_CHARS

    word = "x" * 1_000_000
    html = (f'<html lang="{word}"><head><meta property="og:title" content="{word}"><meta name="author" '
            f'content="{word}"><meta property="og:image" content="https://example.com/{word}"></head><body>'
            f"<article><h1>A</h1><p>{'y' * 300_000}</p></article></body></html>")
    page = extract_page(html.encode(), "https://example.com/a")
    assert page.title is not None and len(page.title) == TITLE_MAX_CHARS
    assert page.author is not None and len(page.author) <= TITLE_MAX_CHARS
    assert page.image_url is None  # longer than any URL we keep
    assert page.language is None and len(page.text) <= BODY_MAX_CHARS
