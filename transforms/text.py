"""Small text helpers: whitespace normalisation and the stored snippet."""

from __future__ import annotations

import re
import unicodedata

SNIPPET_LIMIT = 200
ELLIPSIS = "\u2026"
# A description shorter than this is a tagline ("Breaking news"), not a lede.
MIN_LEDE_CHARS = 60

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
    body); otherwise the start of the body. Cut at a word boundary with "…" when cut.

    Args:
        text: The article body (plain text).
        description: og:description or meta description, if any.
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
    body = normalize_whitespace(text)
    desc = normalize_whitespace(description or "")
    source = desc if desc and _is_good_lede(desc, body) else body
    if not source:
        source = desc
    return _truncate_at_word(_drop_leading_title(source, title), limit)


def _drop_leading_title(source: str, title: str | None) -> str:
    headline = normalize_whitespace(title or "")
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
