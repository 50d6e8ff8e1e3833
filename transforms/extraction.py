"""Turn one fetched HTML page into the fields we keep about an article.

The body text is returned so the caller can compute signatures and the snippet, and is then
dropped: by product rule it is never stored (licensing). Everything here is pure: bytes and a
URL in, an :class:`ExtractedPage` out.

Failure policy: bad input never raises. Empty, binary, truncated or hostile HTML gives an
:class:`ExtractedPage` whose ``text`` is empty and whose other fields are whatever could be
read (``is_extracted`` tells the caller which case it is). Only nonsensical arguments raise
:class:`~transforms.errors.ExtractionError`. Bugs (anything else) propagate.

Body extraction is trafilatura (precision mode, no comments) plus three general repairs,
each measured with ``bench/extract_eval.py``:

* sibling chunks: CMSs that split a body into several same-class containers around ads lose
  every chunk but the first; paragraphs in same-class sibling containers are added back;
* boilerplate lines ("Read more: ...", newsletter and social prompts) are dropped;
* when trafilatura finds (almost) nothing, the JSON-LD ``articleBody`` or trafilatura's
  recall mode / baseline are used instead.

Caps (issue 32): what a parser or a regular expression is handed is bounded in characters, so a
hostile page costs about what a normal one does. The page is read up to ``max_bytes``; the tree is
built from the page up to its :data:`MAX_MARKUP_TAGS`-th tag (trafilatura's time grows with the
element count: 200,000 elements took 23 s, 50,000 took 3.4 s); a JSON-LD block over :data:`JSON_LD_MAX_CHARS` is not
parsed; a metadata value (a ``<meta>`` content, a JSON-LD string, the text of ``<title>`` or
``<h1>``) is read up to :data:`META_MAX_CHARS`; the body text is cut to :data:`BODY_MAX_CHARS`
before it is matched and cleaned. None of them is reached by any page of the pages corpus.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import lxml.etree
import lxml.html
import trafilatura

from transforms.canonical_url import absolute_http_url, choose_canonical_url
from transforms.errors import ExtractionError
from transforms.feeds import author_name, extract_mime_type, normalize_language, truncate_title
from transforms.text import declared_xml_encoding, normalize_whitespace
from transforms.times import parse_stated_datetime

MAX_HTML_BYTES = 5_000_000
MAX_MARKUP_TAGS = 25_000
"""The page is parsed up to its 25,000th ``<``; the pages corpus has at most 3,150 (median 1,486). At
25,000 the slowest markup measured (unclosed ``<p><b>`` pairs) takes trafilatura about 1.5 s."""
META_MAX_CHARS = 65_536
"""A metadata value is read up to this many characters (a title is then cut to 300, an author or a
section too); the pages corpus's longest is a 1,767-character description."""
JSON_LD_MAX_CHARS = 1_000_000
"""A JSON-LD block longer than this is not parsed (an ``articleBody`` is tens of KB)."""
BODY_MAX_CHARS = 200_000
"""The body text is cut to this many characters; the pages corpus's longest is 52,991."""
# Below this many characters trafilatura's precision output is treated as "found nothing".
MIN_BODY_CHARS = 200
# JSON-LD articleBody replaces the extracted text only when it is this many times longer.
JSON_LD_BODY_RATIO = 2.0
# A paragraph added from a sibling chunk must be at least this long and mostly not links.
MIN_SIBLING_PARAGRAPH_CHARS = 60
MAX_SIBLING_LINK_DENSITY = 0.3
SIBLING_LEVELS = 3
# Paragraphs and output lines are matched on this many leading non-space characters.
MATCH_PREFIX_CHARS = 40
MATCH_MIN_CHARS = 25
MAX_SIBLING_ADDITIONS = 200
MAX_SIBLING_PARAGRAPHS = 3000
BOILERPLATE_MAX_CHARS = 250
SNIFF_BYTES = 4096

_ARTICLE_TYPES = frozenset(
    {
        "article",
        "newsarticle",
        "reportagenewsarticle",
        "analysisnewsarticle",
        "opinionnewsarticle",
        "reviewnewsarticle",
        "backgroundnewsarticle",
        "askpublicnewsarticle",
        "blogposting",
        "liveblogposting",
        "socialmediaposting",
        "scholarlyarticle",
        "techarticle",
        "report",
        "webpage",
    }
)
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
_EXCLUDED_ANCESTORS = frozenset(
    {"nav", "footer", "header", "aside", "form", "script", "style", "noscript", "figure", "figcaption"}
)
_BOILERPLATE_RES = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"^(read more|also read|read also|see also|related|related stories|related articles|"
        r"recommended|more from|more on this|read next|don't miss)\s*[:\-\u2013\u2014|\u00bb>]",
        r"^also on [\w.-]+\.[a-z]{2,}\b",
        r"^(like this story|share this|follow us|sign up for|subscribe to|click here|"
        r"get the latest|have a tip)\b",
        r"^(advertisement|advertising|sponsored content|story continues below|"
        r"article continues below)\W*$",
        r"\bfollow (us|[\w@.]+( [\w@.]+)?) on (facebook|twitter|instagram)\b",
        r"^\d*\s*comments?$",
    )
)
_SPACE_RE = re.compile(r"\s+")
_TABLE_ROW_RE = re.compile(r"^\|(.*)\|\s*$")
_META_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
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


# ---------------------------------------------------------------------------------------
# Decoding


_NOT_PAGE_CHARSETS = frozenset({"idna", "punycode", "unicode-escape", "raw-unicode-escape", "utf-7", "undefined"})
"""Python text codecs no page is written in (WHATWG maps none of them; UTF-7 is an XSS vector)."""


def _lookup_codec(name: str | None) -> str | None:
    """The codec a declared charset names, if pages can be decoded with it; None otherwise.

    >>> _lookup_codec("Latin1"), _lookup_codec("base64"), _lookup_codec("utf-7"), _lookup_codec("nonsense")
    ('iso8859-1', None, None, None)
    """
    if not name:
        return None
    try:
        codec = codecs.lookup(name.strip().lower())
        b"a".decode(codec.name)  # LookupError for bytes-to-bytes codecs: base64, zlib, rot13, hex, ...
    except (LookupError, ValueError):
        return None
    return None if codec.name in _NOT_PAGE_CHARSETS else codec.name


def _declared_charset(head: bytes) -> str | None:
    declared = declared_xml_encoding(head)
    if declared is not None:
        return _lookup_codec(declared)
    match = _META_CHARSET_RE.search(head)
    return _lookup_codec(match.group(1).decode("ascii", "replace")) if match else None


def _is_utf8(data: bytes, truncated: bool) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        # A cap can cut a multi-byte character in two; that alone does not make it non-UTF-8.
        return truncated and e.reason == "unexpected end of data" and e.start >= len(data) - 3
    return True


def decode_html(data: bytes, *, http_charset: str | None = None, truncated: bool = False) -> str:
    """Decode HTML bytes, trusting byte evidence over declarations that are often wrong.

    Order (after the WHATWG encoding sniffing algorithm, with one deviation): a BOM; then
    valid UTF-8 wins over any declared single-byte charset, because pages that say
    ``iso-8859-1`` but send UTF-8 are far more common than Latin-1 text that happens to be
    valid UTF-8; then the HTTP charset, then ``<meta charset>`` / XML declaration; then
    windows-1252 (the WHATWG default for undeclared legacy pages). Undecodable bytes become
    U+FFFD, never an exception.

    Args:
        data: The raw bytes.
        http_charset: Charset from the HTTP Content-Type header, if known.
        truncated: ``data`` was cut at a size cap (tolerate a split final character).

    Returns:
        The decoded text.

    >>> decode_html(b'<meta charset="iso-8859-1"><p>caf\\xc3\\xa9</p>')
    '<meta charset="iso-8859-1"><p>café</p>'
    >>> decode_html(b'<p>caf\\xe9</p>')
    '<p>café</p>'
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding, errors="replace")
    declared = _lookup_codec(http_charset) or _declared_charset(data[:SNIFF_BYTES])
    if declared in ("utf-16-le", "utf-16-be", "utf-16", "utf-32"):
        # A UTF-16 declaration in ASCII-compatible bytes is a lie (WHATWG: treat as UTF-8).
        declared = "utf-8"
    elif declared in ("iso8859-1", "ascii"):
        # WHATWG Encoding Standard: these labels mean windows-1252.
        declared = "cp1252"
    if _is_utf8(data, truncated):
        return data.decode("utf-8", errors="replace")
    if declared and declared != "utf-8":
        try:
            return data.decode(declared)
        except UnicodeDecodeError:
            return data.decode(declared, errors="replace")
    if declared == "utf-8":
        return data.decode("utf-8", errors="replace")
    return data.decode("cp1252", errors="replace")


def charset_from_content_type(content_type: str | None) -> str | None:
    """The ``charset`` parameter of a Content-Type header value, or None when there is none.

    Repeated headers, joined by ", ", are read as browsers read them (see
    :func:`~transforms.feeds.extract_mime_type`). The value is returned as sent (unquoted, not
    looked up): :func:`decode_html` looks it up and ignores a name it does not know.

    Args:
        content_type: The header value, e.g. ``text/html; charset=windows-1251``.

    Returns:
        The charset name, or None.

    >>> charset_from_content_type('text/html; charset="windows-1251"')
    'windows-1251'
    >>> charset_from_content_type("text/html") is None
    True
    """
    mime_type = extract_mime_type(content_type)
    return mime_type[1] if mime_type else None


def _looks_like_binary(text: str) -> bool:
    sample = text[:SNIFF_BYTES]
    if not sample:
        return True
    bad = sum(1 for ch in sample if ch == "\ufffd" or (ord(ch) < 32 and ch not in "\t\n\r\f"))
    return bad / len(sample) > 0.05


# ---------------------------------------------------------------------------------------
# Parsing helpers


def _markup_prefix(text: str, max_tags: int = MAX_MARKUP_TAGS) -> str:
    """``text`` up to its ``max_tags``-th ``<`` (the whole text when it has no more).

    A bound on the tree's size known before the tree is built: every element needs a ``<``.

    >>> _markup_prefix("<p>a</p><p>b</p>", max_tags=3)
    '<p>a</p><p>b'
    """
    if text.count("<") <= max_tags:
        return text
    position = -1
    for _ in range(max_tags + 1):
        position = text.find("<", position + 1)
    return text[:position]


def _parse_tree(text: str) -> lxml.html.HtmlElement | None:
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)
    try:
        tree = lxml.html.document_fromstring(text.encode("utf-8", errors="replace"), parser=parser)
    except (lxml.etree.ParserError, lxml.etree.XMLSyntaxError, ValueError):
        return None
    return tree if isinstance(tree, lxml.html.HtmlElement) else None


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


def _walk_json(node: Any) -> Iterator[dict[str, Any]]:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _json_ld_objects(tree: lxml.html.HtmlElement) -> list[dict[str, Any]]:
    """All JSON-LD objects of article-like type, in document order."""
    objects: list[dict[str, Any]] = []
    for script in tree.iter("script"):
        if (script.get("type") or "").strip().lower() != "application/ld+json" or not script.text:
            continue
        if len(script.text) > JSON_LD_MAX_CHARS:
            continue
        raw = script.text.strip().removeprefix("<!--").removesuffix("-->").strip()
        try:
            data = json.loads(raw, strict=False)
        except (ValueError, RecursionError):
            continue
        for obj in _walk_json(data):
            types = obj.get("@type")
            names = [types] if isinstance(types, str) else types if isinstance(types, list) else []
            if any(isinstance(t, str) and t.lower() in _ARTICLE_TYPES for t in names):
                objects.append(obj)
    # Prefer real article types over a generic WebPage wrapper.
    return sorted(objects, key=lambda o: "webpage" in str(o.get("@type", "")).lower())


def _ld_types(objects: list[dict[str, Any]]) -> set[str]:
    types: set[str] = set()
    for obj in objects:
        value = obj.get("@type")
        for t in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
            if isinstance(t, str):
                types.add(t.lower())
    return types


def _ld_first_str(objects: list[dict[str, Any]], key: str) -> str | None:
    for obj in objects:
        value = obj.get(key)
        if isinstance(value, list):
            value = next((v for v in value if isinstance(v, str) and v.strip()), None)
        if isinstance(value, dict):
            value = value.get("name") or value.get("@value")
        if isinstance(value, str) and value.strip():
            return normalize_whitespace(value[:META_MAX_CHARS])
    return None


def _ld_author(objects: list[dict[str, Any]]) -> str | None:
    for obj in objects:
        value = obj.get("author") or obj.get("creator")
        items = value if isinstance(value, list) else [value]
        names: list[str] = []
        for item in items:
            name = item.get("name") if isinstance(item, dict) else item
            if isinstance(name, str) and name.strip() and not name.strip().startswith("http"):
                names.append(author_name(name[:META_MAX_CHARS]))  # no e-mail address is ever kept (#16)
        names = [n for n in names if n]
        if names:
            return ", ".join(dict.fromkeys(names))
    return None


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
    tree: lxml.html.HtmlElement, meta: Mapping[str, str], ld: list[dict[str, Any]]
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
    tree: lxml.html.HtmlElement, meta: Mapping[str, str], ld: list[dict[str, Any]]
) -> str | None:
    for value in (
        (tree.get("lang") or tree.get("xml:lang") or tree.get("{http://www.w3.org/XML/1998/namespace}lang")
         or "")[:META_MAX_CHARS],
        meta.get("og:locale"),
        _ld_first_str(ld, "inLanguage"),
        meta.get("content-language"),
        meta.get("language"),
        meta.get("dc.language"),
    ):
        lang = normalize_language(value)
        if lang is not None:
            return lang
    return None


# ---------------------------------------------------------------------------------------
# Body


def _trafilatura_text(tree: lxml.html.HtmlElement, *, favor_recall: bool = False) -> str:
    try:
        result = trafilatura.extract(
            tree,
            favor_precision=not favor_recall,
            favor_recall=favor_recall,
            include_comments=False,
            include_tables=True,
            include_images=False,
            include_links=False,
            deduplicate=False,
            with_metadata=False,
            output_format="txt",
        )
    except (RecursionError, ValueError, TypeError, lxml.etree.LxmlError):
        return ""
    return (result or "")[:BODY_MAX_CHARS]


def _has_excluded_ancestor(element: lxml.html.HtmlElement, stop: lxml.html.HtmlElement) -> bool:
    for ancestor in element.iterancestors():
        if ancestor is stop:
            return False
        if ancestor.tag in _EXCLUDED_ANCESTORS:
            return True
    return False


def _link_density(element: lxml.html.HtmlElement, text_len: int) -> float:
    link_chars = sum(len(a.text_content()) for a in element.iter("a"))
    return link_chars / text_len if text_len else 1.0


def _signature(element: lxml.html.HtmlElement) -> tuple[str, str] | None:
    cls = (element.get("class") or "").strip()
    return (str(element.tag), cls) if cls else None


def _squash(text: str) -> str:
    return _SPACE_RE.sub("", text)


def _is_separate_article(element: lxml.html.HtmlElement) -> bool:
    """A container with its own headline is another story (related, next-article), not a chunk."""
    return element.tag == "article" or any(True for _ in element.iter("h1", "article", "header"))


def _is_plain_paragraph(p: lxml.html.HtmlElement, key: str) -> bool:
    """Running text: no embedded code or styles, no escaped markup."""
    if any(True for _ in p.iter("script", "style", "noscript", "iframe", "form")):
        return False
    return "&lt;" not in key and "&amp;" not in key and "{" not in key


def _add_sibling_chunks(tree: lxml.html.HtmlElement, text: str) -> str:
    """Add paragraphs from same-class sibling containers of the containers trafilatura used.

    Splitting a body into ``<div class="chunk">`` blocks around ads or embeds is common, and
    trafilatura keeps only the best-scoring block. Readability-style sibling merging restricted
    to an identical tag and class (and to containers without their own headline) keeps this
    from pulling in sidebars or the next article. Skipped on pages with very many paragraphs.
    """
    lines = text.split("\n")
    # Paragraphs are matched to output lines by a whitespace-free prefix: <br> and inline
    # tags space text differently in the DOM and in trafilatura's output.
    line_by_prefix: dict[str, int] = {}
    for i, line in enumerate(lines):
        squashed_line = _squash(line)
        if len(squashed_line) >= MATCH_MIN_CHARS:
            line_by_prefix.setdefault(squashed_line[:MATCH_PREFIX_CHARS], i)

    paragraphs = [p for p in tree.iter("p") if isinstance(p, lxml.html.HtmlElement)]
    if len(paragraphs) > MAX_SIBLING_PARAGRAPHS:
        return text  # not an article page; also bounds the substring tests below
    found = _squash(text)
    keys = {p: normalize_whitespace(p.text_content()[:BODY_MAX_CHARS]) for p in paragraphs}
    squashed = {p: _squash(key) for p, key in keys.items()}
    line_of: dict[lxml.html.HtmlElement, int] = {}
    for p in paragraphs:
        if len(squashed[p]) < MATCH_MIN_CHARS or squashed[p] not in found:
            continue
        # Paragraph -> output line, to re-insert additions in order; -1 when it is inside a
        # line rather than starting one (it still counts as used).
        line_of[p] = line_by_prefix.get(squashed[p][:MATCH_PREFIX_CHARS], -1)
    if len(line_of) < 2:
        return text

    # Containers trafilatura drew from are left alone (what it dropped there it dropped on
    # purpose); only their same-class siblings are searched.
    used: set[lxml.html.HtmlElement] = set()
    groups: set[tuple[lxml.html.HtmlElement, tuple[str, str]]] = set()
    for p in line_of:
        container = p.getparent()
        for _ in range(SIBLING_LEVELS):
            if container is None or container.tag in ("body", "html"):
                break
            used.add(container)
            parent = container.getparent()
            signature = _signature(container)
            if parent is not None and signature is not None:
                groups.add((parent, signature))
            container = parent

    additions: dict[lxml.html.HtmlElement, str] = {}
    for parent, signature in groups:
        for sibling in parent:
            if not isinstance(sibling, lxml.html.HtmlElement) or _signature(sibling) != signature:
                continue
            if sibling in used or _is_separate_article(sibling):
                continue
            for p in sibling.iter("p"):
                key = keys.get(p, "")
                if p in line_of or p in additions or len(key) < MIN_SIBLING_PARAGRAPH_CHARS:
                    continue
                # Already used, possibly with some inline text (links) dropped by trafilatura.
                head, tail = squashed[p][:MATCH_PREFIX_CHARS], squashed[p][-MATCH_PREFIX_CHARS:]
                if head in found or tail in found:
                    continue
                if _has_excluded_ancestor(p, sibling) or not _is_plain_paragraph(p, key):
                    continue
                if _link_density(p, len(key)) > MAX_SIBLING_LINK_DENSITY:
                    continue
                additions[p] = key
    if not additions or len(additions) > MAX_SIBLING_ADDITIONS:
        # Hundreds of same-class blocks are a listing or a pathological page, not a split body.
        return text

    # Re-insert in document order: each added paragraph goes after the line of the nearest
    # earlier matched paragraph (or first, when it precedes them all).
    inserts: dict[int, list[str]] = {}
    last_line = -1
    for p in paragraphs:
        if line_of.get(p, -1) >= 0:
            last_line = line_of[p]
        elif p in additions:
            inserts.setdefault(last_line, []).append(additions[p])
    out: list[str] = list(inserts.get(-1, []))
    for i, line in enumerate(lines):
        out.append(line)
        out.extend(inserts.get(i, []))
    return "\n".join(out)


def _is_boilerplate_line(line: str) -> bool:
    if len(line) > BOILERPLATE_MAX_CHARS:
        return False
    return any(pattern.search(line) for pattern in _BOILERPLATE_RES)


def _clean_lines(text: str) -> str:
    out: list[str] = []
    for raw in text.split("\n"):
        line = normalize_whitespace(raw)
        row = _TABLE_ROW_RE.match(line)
        if row:
            line = " ".join(cell.strip() for cell in row.group(1).split("|") if cell.strip())
        if line and not _is_boilerplate_line(line):
            out.append(line)
    return "\n".join(out)


def _html_fragment_text(value: str) -> str:
    """Plain text of a JSON-LD articleBody, which some sites fill with HTML."""
    if "<" not in value:
        return normalize_whitespace(value, keep_newlines=True)
    fragment = _parse_tree(f"<html><body>{value}</body></html>")
    if fragment is None:
        return normalize_whitespace(re.sub(r"<[^>]+>", " ", value), keep_newlines=True)
    for br in fragment.iter("br"):
        br.tail = "\n" + (br.tail or "")
    for block in fragment.iter("p", "div", "li", "h1", "h2", "h3", "h4", "blockquote"):
        block.tail = "\n" + (block.tail or "")
    return normalize_whitespace(fragment.text_content(), keep_newlines=True)


def _extract_body(tree: lxml.html.HtmlElement, ld: list[dict[str, Any]]) -> str:
    text = _trafilatura_text(tree)
    if len(text) < MIN_BODY_CHARS:
        recall_text = _trafilatura_text(tree, favor_recall=True)
        if len(recall_text) > len(text):
            text = recall_text
    if text:
        text = _add_sibling_chunks(tree, text)
    text = _clean_lines(text)
    ld_body = _ld_first_str_raw(ld, "articleBody")
    if ld_body:
        ld_text = _clean_lines(_html_fragment_text(ld_body[:BODY_MAX_CHARS]))
        if len(ld_text) >= MIN_BODY_CHARS and len(ld_text) >= JSON_LD_BODY_RATIO * len(text):
            text = ld_text
    if not text:
        try:
            _, baseline_text, _ = trafilatura.baseline(tree)
        except (RecursionError, ValueError, TypeError, lxml.etree.LxmlError):
            baseline_text = ""
        text = _clean_lines((baseline_text or "")[:BODY_MAX_CHARS])
    return text[:BODY_MAX_CHARS]


def _ld_first_str_raw(objects: list[dict[str, Any]], key: str) -> str | None:
    for obj in objects:
        value = obj.get(key)
        if isinstance(value, str) and value.strip():
            return value
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
    if isinstance(html, bytes | bytearray):
        data = bytes(html)
        truncated = len(data) > max_bytes
        text = decode_html(data[:max_bytes], http_charset=http_charset, truncated=truncated)
    else:
        text = html[:max_bytes]
    fallback_canonical = _safe_canonical(url, None, None)
    if not text.strip() or _looks_like_binary(text):
        return _empty_page(url, fallback_canonical)
    tree = _parse_tree(_markup_prefix(text))
    if tree is None:
        return _empty_page(url, fallback_canonical)

    meta = _meta_map(tree)
    ld = _json_ld_objects(tree)
    rel_canonical = next(
        (
            str(link.get("href"))
            for link in tree.iter("link")
            if "canonical" in (link.get("rel") or "").lower().split() and link.get("href")
        ),
        None,
    )
    canonical = _safe_canonical(url, rel_canonical, meta.get("og:url"))
    base = canonical or url or None

    title_el = tree.find(".//title")
    h1 = tree.find(".//h1")
    title = next(
        (
            t
            for t in (
                _clean_optional(meta.get("og:title")),
                _ld_first_str(ld, "headline"),
                _clean_optional(meta.get("twitter:title")),
                _clean_optional(h1.text_content() if h1 is not None else None),
                _clean_optional(title_el.text_content() if title_el is not None else None),
            )
            if t
        ),
        None,
    )
    section = _clean_optional(meta.get("article:section")) or _ld_first_str(ld, "articleSection")
    author = _ld_author(ld) or next(
        (
            name
            for k in ("author", "article:author", "parsely-author", "dc.creator", "byl")
            if k in meta and not meta[k].startswith("http") and (name := author_name(meta[k]))
        ),
        None,
    )
    description = _clean_optional(
        meta.get("og:description") or meta.get("description") or meta.get("twitter:description")
    )

    body = _extract_body(tree, ld)
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
        is_opinion=_is_opinion(_ld_types(ld), section, canonical or url),
        is_extracted=True,
        is_language_guessed=declared is None and language is not None,
    )
