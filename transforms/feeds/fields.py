"""The text of a feed's fields: HTML to plain text, caps, bylines, languages.

What every reader of the package (RSS/Atom, JSON Feed, news sitemaps) does to a field before it
goes into a record: titles, authors and categories are capped at :data:`TITLE_MAX_CHARS` and
summaries at :data:`SUMMARY_MAX_CHARS`, whatever a parser expands; only declared or detected
HTML is turned into text (``plain_text``); a byline never keeps an e-mail address
(``author_name``); a language is its primary subtag (``normalize_language``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html.parser import HTMLParser

from transforms.text import normalize_whitespace

SUMMARY_MAX_CHARS = 1_000
# A headline, never a body (licensing: we keep a headline and a short snippet). Also the cap on
# the other one-line fields (feed title, author, category).
TITLE_MAX_CHARS = 300
PLAIN_TEXT_MAX_INPUT_CHARS = 64 * 1024
UNTITLED_TITLE_MAX_CHARS = 100
"""An item without a title is titled with at most this many characters of its summary."""
_PREFIX_CHARS_PER_KEPT_CHAR = 4
_PREFIX_MARGIN_CHARS = 256
ELLIPSIS = "\u2026"
_LANGUAGE_SEPARATOR_RE = re.compile(r"[\s_,;-]+")
_LANGUAGE_CODE_RE = re.compile(r"[a-z]{2,3}")
_EMAIL_RE = re.compile(r"(?:mailto:)?[^\s()<>\[\],;:\"]+@[^\s()<>\[\],;:\"]+\.[^\s()<>\[\],;:\"]+", re.IGNORECASE)
_MAILTO_RE = re.compile(r"\bmailto:", re.IGNORECASE)
_EMPTY_BRACKETS_RE = re.compile(r"\(\s*\)|<\s*>|\[\s*\]")
CONTROL_CHARS_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SKIPPED_HTML_TAGS = frozenset({"script", "style", "noscript", "template", "head", "title"})
_BLOCK_HTML_TAGS = frozenset(
    {"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "td", "th",
     "blockquote", "pre", "section", "article", "header", "footer", "figure", "figcaption", "hr",
     "table", "dd", "dt"}
)  # fmt: skip


def author_name(value: object) -> str:
    """A byline name without e-mail addresses: ``Jane Doe (mailto:jane@example.com)`` -> ``Jane Doe``.

    An e-mail address is personal data and no reader needs it, so none is ever kept; an author given
    only as an address has no name. feedparser cuts ``Name (mailto:x@y)`` to ``Name (mailto:``,
    whose remains go too. What else the byline says stays as written, brackets included, as
    feedparser's ``author_detail.name`` keeps it: ``Jane Doe (https://jane.example)``,
    ``Jane Doe (Reuters)``. A bracket left without its pair by a removed address goes, and so do
    the brackets around a name that an address preceded (``jane@example.com (Jane Doe)``).

    >>> [author_name(v) for v in ("Jane Doe (mailto:", "jane@example.com (Jane Doe)", "a@b.example", "Ann <a@b.c>")]
    ['Jane Doe', 'Jane Doe', '', 'Ann']
    >>> [author_name(v) for v in ("Jane Doe (https://jane.example)", "Jane Doe (Reuters) (mailto:j@r.example)")]
    ['Jane Doe (https://jane.example)', 'Jane Doe (Reuters)']
    """
    text = plain_text(value)
    text = _MAILTO_RE.sub(" ", _EMAIL_RE.sub(" ", text))
    text = _EMPTY_BRACKETS_RE.sub(" ", text)
    text = normalize_whitespace(_without_unpaired_brackets(text)).strip(" ,;:")
    while len(text) > 1 and _BRACKET_PAIRS.get(text[0]) == text[-1] and _pairs_with_last(text):
        text = text[1:-1].strip(" ,;:")  # "(Jane Doe)": the name an address stood before
    return truncate_title(text)


_BRACKET_PAIRS = {"(": ")", "[": "]", "<": ">"}


def _without_unpaired_brackets(text: str) -> str:
    """``text`` less every bracket that closes nothing or is never closed.

    >>> _without_unpaired_brackets("Jane (a (b) ] c")
    'Jane a (b)  c'
    """
    closers = {close: open_ for open_, close in _BRACKET_PAIRS.items()}
    open_at: list[int] = []
    unpaired: set[int] = set()
    for i, ch in enumerate(text):
        if ch in _BRACKET_PAIRS:
            open_at.append(i)
        elif ch in closers:
            if open_at and text[open_at[-1]] == closers[ch]:
                open_at.pop()
            else:
                unpaired.add(i)
    unpaired.update(open_at)
    return "".join(ch for i, ch in enumerate(text) if i not in unpaired) if unpaired else text


def _pairs_with_last(text: str) -> bool:
    """Whether the bracket opening ``text`` is the one its last character closes (``(a) (b)`` is not)."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == text[0]:
            depth += 1
        elif ch == text[-1]:
            depth -= 1
            if depth == 0:
                return i == len(text) - 1
    return False


def byline(names: Iterable[str]) -> str | None:
    """Several authors joined with ", " (as pages' bylines are), capped as a headline."""
    joined = ", ".join(unique_texts(names))
    return truncate_title(joined) if joined else None


def title_from_summary(summary: str, limit: int = UNTITLED_TITLE_MAX_CHARS) -> str:
    """The title of an item that has none: the first words of its summary, as feed readers show it.

    RSS 2.0 lets an item have only a description (microblogs, Mastodon, some wires), and a headline
    is what every page lists: an empty one made the item a blank line. The item's guid is not
    affected (it was taken before).

    >>> title_from_summary("Rain is expected across the north of the country from Tuesday evening onwards.", 40)
    'Rain is expected across the north of…'
    >>> title_from_summary("Short note."), title_from_summary("")
    ('Short note.', '')
    """
    return truncate_text(summary, limit)


class _TextExtractor(HTMLParser):
    """HTML to text: drops script/style, turns block elements into breaks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED_HTML_TAGS:
            self._skip_depth += 1
        elif tag in _BLOCK_HTML_TAGS:
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED_HTML_TAGS:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag in _BLOCK_HTML_TAGS:
            self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._skip_depth:
            self.parts.append(data)


def plain_text(value: object, *, max_input_chars: int = PLAIN_TEXT_MAX_INPUT_CHARS,
                keep_chars: int | None = None) -> str:
    """Plain text from a title/summary that may hold HTML or entities; whitespace collapsed.

    Only the first ``max_input_chars`` characters are read: we keep at most
    :data:`SUMMARY_MAX_CHARS` of the result, and a huge body should not cost a huge parse. With
    ``keep_chars``, only the first ``keep_chars`` characters of the result matter (and whether there
    are more): the HTML is parsed a growing prefix at a time until the text of a prefix runs well
    past them (a full article in ``content:encoded`` yields its first paragraphs' text, #20).

    >>> plain_text("<p>Caf&eacute; &amp; <b>bar</b></p>\\n <script>x()</script>")
    'Café & bar'
    >>> plain_text("<p>" + "word " * 5000 + "</p>", keep_chars=20)[:20]
    'word word word word '
    """
    if not isinstance(value, str) or not value:
        return ""
    value = value[:max_input_chars]
    if "<" not in value and "&" not in value:
        return normalize_whitespace(value)
    if keep_chars is not None:
        prefix_chars = _PREFIX_CHARS_PER_KEPT_CHAR * keep_chars
        while prefix_chars < len(value):
            # The text of a prefix is a prefix of the whole text, but for its last few characters
            # (a tag or a character reference cut at the end): a margin keeps them out of the result.
            parser = _TextExtractor()
            parser.feed(value[:prefix_chars])
            text = normalize_whitespace("".join(parser.parts))
            if len(text) > keep_chars + _PREFIX_MARGIN_CHARS:
                return text[: keep_chars + 1]
            prefix_chars *= 4
    parser = _TextExtractor()
    parser.feed(value)
    parser.close()
    return normalize_whitespace("".join(parser.parts))


def plain_line(value: object) -> str:
    """:func:`plain_text` cut to :data:`TITLE_MAX_CHARS`: for titles, names and categories."""
    return truncate_title(plain_text(value))


def truncate_title(title: str, limit: int = TITLE_MAX_CHARS) -> str:
    """A headline of at most ``limit`` characters, cut at a word boundary with an ellipsis.

    Feeds and pages sometimes put the whole article into a title field (``og:title``, an
    entity that expands); by product rule a body is never stored, only a headline and a
    snippet.

    Args:
        title: Plain text, whitespace already normalised.
        limit: The most characters kept, the ellipsis included.

    Returns:
        ``title`` unchanged if it fits, else its head and an ellipsis.

    Raises:
        ValueError: ``limit`` is below 2 (no room for a character and the ellipsis).

    >>> truncate_title("Budget rises", limit=20)
    'Budget rises'
    >>> truncate_title("The budget will rise next year", limit=20)
    'The budget will\u2026'
    """
    if limit < 2:
        raise ValueError(f"limit must be >= 2, got {limit}")
    return truncate_text(title, limit)


def truncate_text(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word boundary with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - len(ELLIPSIS)]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS


def normalize_language(value: object) -> str | None:
    """The primary subtag of a declared language: ``en_US ``, ``en US``, ``EN-us`` -> ``en``.

    One writer clusters a language whatever its region, and a language names object keys, so only
    a two- or three-letter (ISO 639) primary subtag is kept. Anything else, ``und`` too, is unknown:
    ``None``, so the next declaration (the feed's, the page's, the publisher's) decides.

    >>> [normalize_language(v) for v in (" en_US ", "en US", "EN-us", "fil", "de, en", "English", "und", None)]
    ['en', 'en', 'en', 'fil', 'de', None, None, None]
    """
    if not isinstance(value, str):
        return None
    primary = _LANGUAGE_SEPARATOR_RE.split(value.strip().lower(), maxsplit=1)[0]
    return primary if _LANGUAGE_CODE_RE.fullmatch(primary) and primary != "und" else None


def unique_texts(values: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for value in values:
        if value and value not in seen:
            seen[value] = None
    return tuple(seen)
