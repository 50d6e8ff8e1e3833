"""Turn one fetched HTML page into the fields we keep about an article.

The body text is returned so the caller can compute signatures and the snippet, and is then
dropped: by product rule it is never stored (licensing). Everything here is pure: bytes and a
URL in, an :class:`ExtractedPage` out.

Failure policy: bad input never raises. Empty, binary, truncated or hostile HTML gives an
:class:`ExtractedPage` whose ``text`` is empty and whose other fields are whatever could be
read (``is_extracted`` tells the caller which case it is). Only nonsensical arguments raise
:class:`~transforms.errors.ExtractionError`. Bugs (anything else) propagate.

This module reads the page's metadata (title, dates, byline, section, language) and puts the
page together; its steps have their own modules: bytes to a tree in :mod:`transforms.html_tree`,
JSON-LD in :mod:`transforms.json_ld`, the body text (trafilatura plus three repairs) in
:mod:`transforms.page_body`.

Caps (issue 32): what a parser or a regular expression is handed is bounded in characters, so a
hostile page costs about what a normal one does. The page is read up to ``max_bytes``; the tree is
built from the page up to its :data:`~transforms.html_tree.MAX_MARKUP_TAGS`-th tag (trafilatura's
time grows with the element count: 200,000 elements took 23 s, 50,000 took 3.4 s); a JSON-LD block
over :data:`~transforms.json_ld.JSON_LD_MAX_CHARS` is not parsed; a metadata value (a ``<meta>``
content, a JSON-LD string, the text of ``<title>`` or ``<h1>``) is read up to
:data:`~transforms.html_tree.META_MAX_CHARS`; the body text is cut to
:data:`~transforms.page_body.BODY_MAX_CHARS` before it is matched and cleaned. None of them is
reached by any page of the pages corpus.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

import lxml.html

from transforms.canonical_url import absolute_http_url, choose_canonical_url
from transforms.errors import ExtractionError
from transforms.feeds import author_name, normalize_language, truncate_title
from transforms.html_tree import META_MAX_CHARS, decode_html, looks_like_binary, markup_prefix, parse_tree
from transforms.json_ld import json_ld_objects, ld_author, ld_first_str, ld_types
from transforms.page_body import extract_body
from transforms.text import normalize_whitespace
from transforms.times import parse_stated_datetime

MAX_HTML_BYTES = 5_000_000

_OPINION_WORDS_RE = re.compile(
    r"(?:^|[/\s_-])(opinions?|op-?eds?|commentary|editorials?|columnists?|perspectives?)(?:$|[/\s_.-])",
    re.IGNORECASE,
)
_META_DATE_KEYS = (
    "article:published_time",
    "og:article:published_time",
    "og:published_time",
    "datepublished",
    "publishdate",
    "publish-date",
    "publish_date",
    "pubdate",
    "parsely-pub-date",
    "sailthru.date",
    "dc.date.issued",
    "dc.date",
    "dcterms.created",
    "dcterms.issued",
    "date",
    "article.published",
    "cxenseparse:recs:publishtime",
)


@dataclass(frozen=True, slots=True)
class ExtractedPage:
    """What one page says about itself, plus its body text (in memory only, never stored).

    Attributes:
        url: The URL the page was fetched from, as given.
        canonical_url: Canonicalized rel=canonical / og:url / fetched URL; None when none of
            them is a valid http(s) URL.
        title: Headline, at most :data:`~transforms.feeds.TITLE_MAX_CHARS` characters (a
            title field holding the whole article is cut: a body is never stored), or None.
        text: Body text, paragraphs separated by "\\n"; empty when nothing was found.
        published_at: Publication time the page states, UTC; None when it states none.
        language: ISO 639-1 code, declared or guessed from the text; None when unknown.
        image_url: og:image (absolute), or None.
        description: og:description / meta description, or None.
        section: article:section / JSON-LD articleSection, or None.
        author: Byline, names joined with ", ", or None.
        is_opinion: The page is marked as opinion (schema type, section or URL).
        is_extracted: The HTML could be read at all (False for empty/binary input).
        is_language_guessed: ``language`` is a guess from the text, not the page's declaration
            (a feed's or publisher's declared language then comes first, #16).
    """

    url: str
    canonical_url: str | None
    title: str | None
    text: str
    published_at: datetime | None
    language: str | None
    image_url: str | None
    description: str | None
    section: str | None
    author: str | None
    is_opinion: bool
    is_extracted: bool = True
    is_language_guessed: bool = False


def _meta_map(tree: lxml.html.HtmlElement) -> dict[str, str]:
    """First non-empty content of each <meta name|property|itemprop|http-equiv>, keys lower-cased."""
    found: dict[str, str] = {}
    for meta in tree.iter("meta"):
        content = (meta.get("content") or "")[:META_MAX_CHARS]
        if not content.strip():
            continue
        for attr in ("property", "name", "itemprop", "http-equiv"):
            # itemprop and property may hold several space-separated names.
            for key in (meta.get(attr) or "").lower().split():
                found.setdefault(key, content.strip())
    return found


def _clean_optional(value: str | None) -> str | None:
    if value is None:
        return None
    value = normalize_whitespace(value[:META_MAX_CHARS])
    return value or None


# ---------------------------------------------------------------------------------------
# Dates


def parse_datetime_utc(value: str) -> datetime | None:
    """Parse an ISO 8601 or RFC 2822 timestamp to aware UTC; naive times are taken as UTC.

    >>> parse_datetime_utc("2019-11-19T10:30:00-05:00")
    datetime.datetime(2019, 11, 19, 15, 30, tzinfo=datetime.timezone.utc)
    >>> parse_datetime_utc("Tue, 19 Nov 2019 10:30:00 GMT").hour
    10
    >>> parse_datetime_utc("yesterday") is None
    True
    """
    value = value.strip()
    if not value or len(value) > 64:
        return None
    parsed = parse_stated_datetime(value)
    if parsed is None or not 1990 <= parsed.year <= 2100:
        return None
    return parsed


def _published_at(
    tree: lxml.html.HtmlElement, meta: Mapping[str, str], ld: Sequence[Mapping[str, object]]
) -> datetime | None:
    candidates: list[str] = []
    for obj in ld:
        value = obj.get("datePublished") or obj.get("dateCreated")
        if isinstance(value, str):
            candidates.append(value)
    candidates.extend(meta[k] for k in _META_DATE_KEYS if k in meta)
    for xpath in (
        '//*[@itemprop="datePublished"]/@datetime',
        "//time[@pubdate]/@datetime",
        "//article//time/@datetime",
        "//time/@datetime",
    ):
        candidates.extend(str(v) for v in tree.xpath(xpath))
    for value in candidates:
        parsed = parse_datetime_utc(value)
        if parsed is not None:
            return parsed
    return None


# ---------------------------------------------------------------------------------------
# Language

_STOPWORDS: dict[str, frozenset[str]] = {
    "en": frozenset("the and of to in is that for it was on with as are be this by".split()),
    "de": frozenset("der die und das ist nicht mit ein eine den von zu sich auf dem".split()),
    "fr": frozenset("le la les et des est une pour dans que qui pas sur du au".split()),
    "es": frozenset("el la los las que del por una con para es se su al lo".split()),
    "it": frozenset("il di che la per una non sono del della gli con le è nel".split()),
    "pt": frozenset("o os que da do das dos uma para com não em se na no é".split()),
    "nl": frozenset("de het een en van is dat op niet zijn met voor ook te".split()),
    "id": frozenset("yang dan di dari untuk dengan ini itu tidak akan pada dalam adalah".split()),
    "ms": frozenset("yang dan di dari untuk dengan ini itu tidak akan pada dalam adalah".split()),
    "sv": frozenset("och att det som en på är av för med till den har inte".split()),
    "pl": frozenset("i w nie na się z że do jest to jak ale o po".split()),
}
# Malay and Indonesian share their commonest words; these tell them apart (Malaysian and Indonesian
# spelling and usage: kerana/karena, selepas/setelah, iaitu/yaitu, sahaja/saja, boleh/bisa, ...).
_MALAY_MARKERS = frozenset(
    "kerana selepas iaitu sahaja boleh ialah beliau daripada manakala kerajaan wang bagaimanapun sebarang "
    "berkata kira-kira".split()
)
_INDONESIAN_MARKERS = frozenset(
    "karena setelah yaitu saja bisa tersebut uang pemerintah bagaimana namun sejumlah mengatakan sekitar "
    "kata".split()
)
_SCRIPT_LANGS = (
    (re.compile(r"[\uac00-\ud7af]"), "ko"),
    (re.compile(r"[\u3040-\u30ff]"), "ja"),
    (re.compile(r"[\u4e00-\u9fff]"), "zh"),
    (re.compile(r"[\u0e00-\u0e7f]"), "th"),
    (re.compile(r"[\u0590-\u05ff]"), "he"),
    (re.compile(r"[\u0600-\u06ff]"), "ar"),
    (re.compile(r"[\u0900-\u097f]"), "hi"),
    (re.compile(r"[\u0370-\u03ff]"), "el"),
)
_CYRILLIC_RE = re.compile(r"[\u0400-\u04ff]")
_UKRAINIAN_RE = re.compile(r"[іїєґІЇЄҐ]")
_WORD_RE = re.compile(r"[^\W\d_]+")


def guess_language(text: str, candidates: frozenset[str] | None = None) -> str | None:
    """Cheap language guess from script and stopwords; None when not confident.

    Args:
        text: Body text (the first 5,000 characters are read).
        candidates: Only these languages may be guessed (the languages the site publishes, #16);
            None allows every language known here.

    Returns:
        An ISO 639-1 code, or None.

    >>> guess_language("The cat sat on the mat and it was happy with the rest of the day.")
    'en'
    >>> guess_language("Der Hund ist nicht mit der Katze auf dem Weg, und das ist gut so.")
    'de'
    >>> guess_language("12345") is None
    True
    >>> malay = "Kerajaan berkata bahawa projek itu akan siap kerana dana yang diperlukan telah ada untuk rakyat."
    >>> guess_language(malay), guess_language(malay, frozenset({"en", "zh"}))
    ('ms', None)
    """
    def allowed(lang: str) -> bool:
        return candidates is None or lang in candidates

    sample = text[:5000]
    letters = _WORD_RE.findall(sample)
    if not letters:
        return None
    joined = "".join(letters)
    if not joined:
        return None
    # Hangul/kana are checked before Han because Korean and Japanese text also uses Han.
    for pattern, lang in _SCRIPT_LANGS[:2]:
        if len(pattern.findall(joined)) / len(joined) > 0.1:
            return lang if allowed(lang) else None
    for pattern, lang in _SCRIPT_LANGS[2:]:
        if len(pattern.findall(joined)) / len(joined) > 0.3:
            return lang if allowed(lang) else None
    cyrillic = len(_CYRILLIC_RE.findall(joined))
    if cyrillic / len(joined) > 0.3:
        lang = "uk" if len(_UKRAINIAN_RE.findall(joined)) / cyrillic > 0.01 else "ru"
        return lang if allowed(lang) else None
    words = [w.lower() for w in letters]
    if len(words) < 8:
        return None
    scores = sorted(
        ((sum(1 for w in words if w in stops), lang) for lang, stops in _STOPWORDS.items() if allowed(lang)),
        reverse=True,
    )
    if not scores:
        return None
    (best, lang), (second, runner_up) = scores[0], scores[1] if len(scores) > 1 else (0, "")
    if {lang, runner_up} == {"id", "ms"}:
        # Same common words: the spelling markers decide, and only with a clear margin.
        malay = sum(1 for w in words if w in _MALAY_MARKERS)
        indonesian = sum(1 for w in words if w in _INDONESIAN_MARKERS)
        if malay == indonesian or min(malay, indonesian) * 2 >= max(malay, indonesian):
            return None
        lang = "ms" if malay > indonesian else "id"
        second = max((s for s, other in scores if other not in ("id", "ms")), default=0)
    if best / len(words) < 0.1 or best < 1.5 * second:
        return None
    return lang


def _declared_language(
    tree: lxml.html.HtmlElement, meta: Mapping[str, str], ld: Sequence[Mapping[str, object]]
) -> str | None:
    for value in (
        (tree.get("lang") or tree.get("xml:lang") or tree.get("{http://www.w3.org/XML/1998/namespace}lang")
         or "")[:META_MAX_CHARS],
        meta.get("og:locale"),
        ld_first_str(ld, "inLanguage"),
        meta.get("content-language"),
        meta.get("language"),
        meta.get("dc.language"),
    ):
        lang = normalize_language(value)
        if lang is not None:
            return lang
    return None


# ---------------------------------------------------------------------------------------
# Entry point


def _empty_page(url: str, canonical: str | None) -> ExtractedPage:
    return ExtractedPage(
        url=url,
        canonical_url=canonical,
        title=None,
        text="",
        published_at=None,
        language=None,
        image_url=None,
        description=None,
        section=None,
        author=None,
        is_opinion=False,
        is_extracted=False,
    )


def _safe_canonical(url: str, rel_canonical: str | None, og_url: str | None) -> str | None:
    try:
        return choose_canonical_url(url, rel_canonical, og_url)
    except ValueError:
        return None


def _is_opinion(types: set[str], section: str | None, url: str | None) -> bool:
    if "opinionnewsarticle" in types:
        return True
    if section and _OPINION_WORDS_RE.search(section):
        return True
    if url:
        return bool(_OPINION_WORDS_RE.search(urlsplit(url).path))
    return False


def extract_page(
    html: bytes | str,
    url: str,
    *,
    max_bytes: int = MAX_HTML_BYTES,
    http_charset: str | None = None,
    languages: frozenset[str] | None = None,
) -> ExtractedPage:
    """Extract metadata and body text from one HTML page.

    Never raises for bad HTML: unreadable input gives a page with empty ``text`` and
    ``is_extracted=False`` (see the module docstring).

    Args:
        html: The page as fetched (bytes, decoded here) or already-decoded text.
        url: The URL it was fetched from; "" when unknown (relative canonicals are then
            ignored).
        max_bytes: Only the first ``max_bytes`` bytes (characters for ``str``) are parsed.
        http_charset: Charset from the HTTP Content-Type header, if known.
        languages: When the page declares no language, guess only among these (the languages the
            site publishes); None guesses among every language known here.

    Returns:
        The :class:`ExtractedPage`.

    Raises:
        ExtractionError: ``max_bytes`` is not positive.
    """
    if max_bytes <= 0:
        raise ExtractionError(f"max_bytes must be positive, got {max_bytes}", url=url)
    text = _page_text(html, max_bytes, http_charset)
    fallback_canonical = _safe_canonical(url, None, None)
    if not text.strip() or looks_like_binary(text):
        return _empty_page(url, fallback_canonical)
    tree = parse_tree(markup_prefix(text))
    if tree is None:
        return _empty_page(url, fallback_canonical)

    meta = _meta_map(tree)
    ld = json_ld_objects(tree)
    canonical = _safe_canonical(url, _rel_canonical(tree), meta.get("og:url"))
    base = canonical or url or None
    title = _title(tree, meta, ld)
    section = _clean_optional(meta.get("article:section")) or ld_first_str(ld, "articleSection")
    author = _author(meta, ld)
    description = _clean_optional(
        meta.get("og:description") or meta.get("description") or meta.get("twitter:description")
    )

    body = extract_body(tree, ld)
    declared = _declared_language(tree, meta, ld)
    language = declared or guess_language(body or description or "", languages)

    return ExtractedPage(
        url=url,
        canonical_url=canonical,
        title=truncate_title(title) if title else None,
        text=body,
        published_at=_published_at(tree, meta, ld),
        language=language,
        image_url=absolute_http_url(meta.get("og:image") or meta.get("og:image:url"), base),
        description=description,
        # Metadata, not text: a byline or section longer than a headline is a page's mistake.
        section=truncate_title(section) if section else None,
        author=truncate_title(author) if author else None,
        is_opinion=_is_opinion(ld_types(ld), section, canonical or url),
        is_extracted=True,
        is_language_guessed=declared is None and language is not None,
    )


def _page_text(html: bytes | str, max_bytes: int, http_charset: str | None) -> str:
    """The page's first ``max_bytes`` bytes decoded (characters, for text already decoded)."""
    if isinstance(html, bytes | bytearray):
        data = bytes(html)
        truncated = len(data) > max_bytes
        return decode_html(data[:max_bytes], http_charset=http_charset, truncated=truncated)
    return html[:max_bytes]


def _rel_canonical(tree: lxml.html.HtmlElement) -> str | None:
    """The first ``<link rel="canonical">``'s href, as written."""
    return next(
        (
            str(link.get("href"))
            for link in tree.iter("link")
            if "canonical" in (link.get("rel") or "").lower().split() and link.get("href")
        ),
        None,
    )


def _title(tree: lxml.html.HtmlElement, meta: Mapping[str, str], ld: Sequence[Mapping[str, object]]) -> str | None:
    """The headline: og:title, JSON-LD headline, twitter:title, the first ``<h1>``, ``<title>``, the first found."""
    title_el = tree.find(".//title")
    h1 = tree.find(".//h1")
    return next(
        (
            t
            for t in (
                _clean_optional(meta.get("og:title")),
                ld_first_str(ld, "headline"),
                _clean_optional(meta.get("twitter:title")),
                _clean_optional(h1.text_content() if h1 is not None else None),
                _clean_optional(title_el.text_content() if title_el is not None else None),
            )
            if t
        ),
        None,
    )


def _author(meta: Mapping[str, str], ld: Sequence[Mapping[str, object]]) -> str | None:
    """The byline: JSON-LD's authors, else the first author ``<meta>`` that is a name, not a link."""
    return ld_author(ld) or next(
        (
            name
            for k in ("author", "article:author", "parsely-author", "dc.creator", "byl")
            if k in meta and not meta[k].startswith("http") and (name := author_name(meta[k]))
        ),
        None,
    )
