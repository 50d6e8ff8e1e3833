"""Small text helpers: whitespace normalisation, datelines and the stored snippet."""

from __future__ import annotations

import re
import unicodedata

SNIPPET_LIMIT = 200
ELLIPSIS = "\u2026"
# A description shorter than this is a tagline ("Breaking news"), not a lede.
MIN_LEDE_CHARS = 60
MIN_SNIPPET_WORDS = 2
"""A snippet of one word ("Analysis…", a lone kicker or a cut-off stub) says nothing (issue 14)."""
SNIPPET_READ_CHARS = 20_000
"""Only the head of a body or a description is read for a snippet (issue 32: every text a regular
expression sees is capped): a snippet is 200 characters and the lede test reads 5,000."""

_INLINE_SPACE_RE = re.compile(r"[^\S\n]+")
_BLANK_LINES_RE = re.compile(r"\n\s*\n+")
_ZERO_WIDTH_RE = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad]")


def normalize_whitespace(text: str, *, keep_newlines: bool = False) -> str:
    """Collapse runs of whitespace to one space (or one newline) and strip the ends.

    Also applies NFC and removes zero-width characters and soft hyphens, which break
    tokenisation without being visible.

    Args:
        text: Any text.
        keep_newlines: Keep line breaks (one per run of blank lines) instead of joining lines.

    Returns:
        The normalised text.

    >>> normalize_whitespace("  a\\t b\\n\\n c \\u200b")
    'a b c'
    >>> normalize_whitespace("a  \\n\\n\\n  b", keep_newlines=True)
    'a\\nb'
    """
    text = _ZERO_WIDTH_RE.sub("", unicodedata.normalize("NFC", text))
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not keep_newlines:
        return " ".join(text.split())
    lines = (_INLINE_SPACE_RE.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


_DATE_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_MONTHS = frozenset(
    "jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june july august "
    "september october november december".split())
_WEEKDAYS = frozenset("mon tue tues wed thu thur thurs fri sat sun monday tuesday wednesday thursday friday "
                      "saturday sunday".split())
_ZONES = frozenset("am pm gmt utc bst cet cest eet eest edt est cdt cst mdt mst pdt pst et ct mt pt ist aest aedt "
                   "sgt hkt jst wib myt hrs".split())
_DATELINE_OPENERS = frozenset("posted updated published edited first last release released modified date".split())
_DATELINE_WORDS = _DATELINE_OPENERS | frozenset("at on time by a p".split())
_DATELINE_PUNCT = frozenset(",.:;-\u2013\u2014/|@()[]+")
_DATELINE_TAIL = " ,.:;-\u2013\u2014|)]"
_YEAR_TOKEN_RE = re.compile(r"^(?:19|20)\d\d$")
_CLOCK_TOKEN_RE = re.compile(r"^\d{1,2}(?:am|pm)$")
_NUMBER_TOKEN_RE = re.compile(r"^\d{1,4}(?:st|nd|rd|th)?$")


def _dateline_end(text: str) -> int:
    """Where a leading dateline ends in ``text`` (0 when it opens with none).

    A dateline is a run of date and time words ("Posted", "Updated: Sep 27, 2013 5:50 PM EDT",
    "Saturday, 28 September 2013 01:43", "05/02/2013") that names a month, a weekday or a clock
    time and holds a number, and that ends on what closes a date: a year, a clock time's minutes,
    am/pm or a time zone. "On Saturday, 12 people died" opens with no dateline: its run ends on a
    bare number.
    """
    end = 0
    named = has_number = False
    previous = ""
    for match in _DATE_TOKEN_RE.finditer(text):
        token = match.group().casefold()
        if (not previous and (token in _DATELINE_WORDS or token in _DATELINE_PUNCT) and token not in _DATELINE_OPENERS
                and match.group() != "on"):
            break  # "On February 29, 2012, AMD announced ..." opens a sentence; "on July 2 2013 7:41 AM" none
        closes = False
        if token in _MONTHS or token in _WEEKDAYS:
            named = True
        elif _YEAR_TOKEN_RE.match(token):
            has_number = closes = True
            named = named or previous == "/"  # "03/08/2013"
        elif _CLOCK_TOKEN_RE.match(token):
            has_number = named = closes = True
        elif _NUMBER_TOKEN_RE.match(token):
            has_number = True
            if previous == ":":
                named = closes = True
        elif token in _ZONES or (token == "m" and previous == "."):  # "PM", "p. m."
            closes = True
        elif not (token in _DATELINE_WORDS or token in _DATELINE_PUNCT):
            break
        if closes and named and has_number:
            end = match.end()
        previous = token
    return end


def is_dateline(text: str | None) -> bool:
    """Whether a text is only a date line ("4 August 2013 Last updated at 19:47 GMT"): never a
    headline (issue 14).

    >>> is_dateline("4 August 2013 Last updated at 19:47 GMT"), is_dateline("Saturday, August 24, 2013")
    (True, True)
    >>> is_dateline("May 2 protests end"), is_dateline("2 dead in crash"), is_dateline("")
    (False, False, False)
    """
    text = (text or "").strip()
    end = _dateline_end(text)
    return end > 0 and not text[end:].strip(_DATELINE_TAIL)


def strip_dateline(text: str) -> str:
    """``text`` without the date line it opens with, if any (and if anything follows it).

    >>> strip_dateline("Jan 5, 2011 \u2013 4:35 PM Pierre Thomas, the running back, was placed on injured reserve.")
    'Pierre Thomas, the running back, was placed on injured reserve.'
    >>> strip_dateline("On Saturday, 12 people died.")
    'On Saturday, 12 people died.'
    """
    rest = text
    while end := _dateline_end(rest):  # "Published time: ... Edited time: ..." holds two
        if not (rest := rest[end:].lstrip(_DATELINE_TAIL)):
            return text
    return rest


def _truncate_at_word(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - len(ELLIPSIS) + 1]
    # Cut at the last space that fits, so the ellipsis follows a whole word.
    space = cut.rfind(" ")
    head = cut[:space] if space > 0 else cut[: limit - len(ELLIPSIS)]
    head = head.rstrip(" ,;:-\u2013\u2014")
    return head + ELLIPSIS


def _is_good_lede(description: str, text: str) -> bool:
    if len(description) < MIN_LEDE_CHARS:
        return False
    if description.endswith(("...", ELLIPSIS)) and len(description) < SNIPPET_LIMIT // 2:
        return False
    # A description that shares no words with the body is site boilerplate
    # ("The best news from ..."), not a summary of this article.
    if text:
        desc_words = set(re.findall(r"\w{4,}", description.lower()))
        body_words = set(re.findall(r"\w{4,}", text[:5000].lower()))
        if desc_words and len(desc_words & body_words) / len(desc_words) < 0.3:
            return False
    return True


def snippet_from_text(text: str, description: str | None, limit: int = SNIPPET_LIMIT, *,
                      title: str | None = None) -> str:
    """The short excerpt we store for an article: at most ``limit`` characters.

    Prefers the page's description when it reads like a lede (long enough and about the
    body); otherwise the start of the body. What readers see under the headline is what is left
    after the headline it repeats and a date line it opens with; a source left with less than a
    lede's length (a description that was only the headline and a few words) gives way to the
    next, and if none is that long the longest is kept, but never a single word ("Analysis…",
    issue 14). Cut at a word boundary with "…" when cut.

    Args:
        text: The article body (plain text); its first ``SNIPPET_READ_CHARS`` characters are read.
        description: og:description or meta description, if any (its first ``SNIPPET_READ_CHARS``).
        limit: Maximum length of the result in characters.
        title: The headline; a snippet that merely repeats it at its start loses that part,
            since readers see the headline right above the snippet.

    Returns:
        The snippet; empty when both inputs are empty.

    Raises:
        ValueError: ``limit`` is smaller than 2.

    >>> snippet_from_text("One two three four five six", None, limit=15)
    'One two three…'
    >>> snippet_from_text("", None)
    ''
    >>> snippet_from_text("Big fire downtown Crews fought the blaze all night.", None, title="Big fire downtown")
    'Crews fought the blaze all night.'
    """
    if limit < 2:
        raise ValueError(f"limit must be >= 2, got {limit}")
    body = normalize_whitespace(text[:SNIPPET_READ_CHARS])
    desc = normalize_whitespace((description or "")[:SNIPPET_READ_CHARS])
    sources = [desc, body] if desc and _is_good_lede(desc, body) else [body, desc]
    shown = [strip_dateline(_drop_leading_title(source, title)) for source in sources if source]
    for candidate in shown:
        if len(candidate) >= MIN_LEDE_CHARS:
            return _truncate_at_word(candidate, limit)
    usable = [c for c in shown if is_usable_snippet(c)]
    return _truncate_at_word(max(usable, key=len), limit) if usable else ""


def is_usable_snippet(snippet: str | None) -> bool:
    """Whether a snippet says something: at least ``MIN_SNIPPET_WORDS`` words.

    >>> is_usable_snippet("Analysis\u2026"), is_usable_snippet("\u2026"), is_usable_snippet("Crews fought the blaze.")
    (False, False, True)
    """
    return len(re.findall(r"\w+", snippet or "")) >= MIN_SNIPPET_WORDS


def _drop_leading_title(source: str, title: str | None) -> str:
    headline = normalize_whitespace((title or "")[:SNIPPET_READ_CHARS])
    if len(headline) < 8 or not source.lower().startswith(headline.lower()):
        return source
    rest = source[len(headline):].lstrip(" .:;,-–—|")
    return rest or source


_XML_ENCODING_RE = re.compile(r"""^(?:\ufeff|\xef\xbb\xbf)?\s*<\?xml\s[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9._:-]+)["']""",
                              re.IGNORECASE)


def declared_xml_encoding(head: str | bytes) -> str | None:
    """The ``encoding`` of an XML declaration at the start of a document (after a byte-order mark
    and whitespace), as written; None without one. Bytes are read one character per byte.

    >>> declared_xml_encoding(b'<?xml version="1.0" encoding="windows-1251"?><rss/>')
    'windows-1251'
    >>> declared_xml_encoding("\\ufeff<?xml version='1.0' encoding='UTF-8'?>"), declared_xml_encoding("<rss/>")
    ('UTF-8', None)
    """
    text = head.decode("latin-1") if isinstance(head, bytes) else head
    match = _XML_ENCODING_RE.match(text)
    return match.group(1) if match else None
