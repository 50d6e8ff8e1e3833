"""An HTML page from bytes to a tree, with the caps that keep a hostile page as cheap as a normal one.

Decoding trusts byte evidence over declarations (:func:`decode_html`); the tree is built from the
page up to its :data:`MAX_MARKUP_TAGS`-th tag (trafilatura's time grows with the element count:
200,000 elements took 23 s, 50,000 took 3.4 s, issue 32); a metadata value is read up to
:data:`META_MAX_CHARS`. Pure: bytes in, text or a tree out.
"""

from __future__ import annotations

import codecs
import re

import lxml.etree
import lxml.html

from transforms.feeds import extract_mime_type
from transforms.text import declared_xml_encoding

SNIFF_BYTES = 4096
MAX_MARKUP_TAGS = 25_000
"""The page is parsed up to its 25,000th ``<``; the pages corpus has at most 3,150 (median 1,486). At
25,000 the slowest markup measured (unclosed ``<p><b>`` pairs) takes trafilatura about 1.5 s."""
META_MAX_CHARS = 65_536
"""A metadata value is read up to this many characters (a title is then cut to 300, an author or a
section too); the pages corpus's longest is a 1,767-character description."""
_META_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
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


def looks_like_binary(text: str) -> bool:
    sample = text[:SNIFF_BYTES]
    if not sample:
        return True
    bad = sum(1 for ch in sample if ch == "\ufffd" or (ord(ch) < 32 and ch not in "\t\n\r\f"))
    return bad / len(sample) > 0.05


def markup_prefix(text: str, max_tags: int = MAX_MARKUP_TAGS) -> str:
    """``text`` up to its ``max_tags``-th ``<`` (the whole text when it has no more).

    A bound on the tree's size known before the tree is built: every element needs a ``<``.

    >>> markup_prefix("<p>a</p><p>b</p>", max_tags=3)
    '<p>a</p><p>b'
    """
    if text.count("<") <= max_tags:
        return text
    position = -1
    for _ in range(max_tags + 1):
        position = text.find("<", position + 1)
    return text[:position]


def parse_tree(text: str) -> lxml.html.HtmlElement | None:
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)
    try:
        tree = lxml.html.document_fromstring(text.encode("utf-8", errors="replace"), parser=parser)
    except (lxml.etree.ParserError, lxml.etree.XMLSyntaxError, ValueError):
        return None
    return tree if isinstance(tree, lxml.html.HtmlElement) else None
