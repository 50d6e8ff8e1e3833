"""What kind of document a body is, and whether any XML parser may see it.

The safety gate runs before any XML parser: refusal of any entity declaration anywhere in the
document and of any DOCTYPE internal subset (billion laughs, external entities / XXE), in every
encoding a parser could decode it with. Then the format: JSON Feed by its first character, a news
sitemap by its root element, RSS/Atom for the rest. Also the Content-Type reading the gate and
the parsers share (``extract_mime_type``).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Literal

from transforms.errors import FeedRejectedError
from transforms.text import declared_xml_encoding

_MARKUP_PROBE = "<!DOCTYPE x [<!ENTITY % y SYSTEM 'z'>]>"
# A declaration up to its internal subset ("[") or its end: name and quoted external ids.
_DECLARATION_HEAD_RE = re.compile(r"""<!(?:[^\[>"']+|"[^"]*"|'[^']*')*""")
_DOCTYPE_HEAD_RE = re.compile(r"""<!DOCTYPE(?:[^\[>"']+|"[^"]*"|'[^']*')*""", re.IGNORECASE)
_ENTITY_OPEN_RE = re.compile(r"<!ENTITY", re.IGNORECASE)
# Name and the keyword after it: an external entity names SYSTEM/PUBLIC right after its name,
# an internal one a quoted value. Bounded, so the scan stays linear whatever follows.
_ENTITY_DECL_RE = re.compile(r"""<!ENTITY\s+(%\s+)?([^\s<>"'%&]{1,100})""", re.IGNORECASE)
_EXTERNAL_ENTITY_RE = re.compile(r"""<!ENTITY\s+(?:%\s+)?[^\s<>"'%&]{1,100}\s+(?:SYSTEM|PUBLIC)\b""", re.IGNORECASE)
_ENTITY_NAMES_SHOWN = 5
_ENTITY_DECLS_READ = 64
_SUBSET_END_RE = re.compile(r"\]\s*>")
_CHARSET_RE = re.compile(r"""charset\s*=\s*["']?([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_HTTP_WHITESPACE = " \t\r\n"
_HTTP_TOKEN_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# One value of a comma-separated header: a comma inside a quoted string does not end it.
_HEADER_VALUE_RE = re.compile(r"""(?:"(?:[^"\\]|\\.)*"?|[^,"])*""")
# One ";"-separated MIME type parameter: a name, then "=" and either a quoted string (anything
# after its closing quote is dropped) or a plain value up to the next ";" (WHATWG MIME Sniffing).
_MIME_PARAMETER_RE = re.compile(r"""([^;=]*)(?:=[ \t\r\n]*(?:"((?:[^"\\]|\\.)*)"?)?([^;]*))?;?""")
_ROOT_RE = re.compile(r"<(?![?!])([A-Za-z_][\w.:-]*)")


FeedFormat = Literal["json_feed", "news_sitemap", "rss_atom"]
"""The formats :func:`~transforms.feeds.parse.parse_feed` reads, each by its own module."""


@dataclass(frozen=True, slots=True)
class SniffedDocument:
    """What a body is: its format, and its text decoded for scanning (the RSS/Atom reader reads
    ``skipHours``/``skipDays`` from it)."""

    format: FeedFormat
    text: str


def sniff_document(body: bytes, url: str, content_type: str) -> SniffedDocument:
    """The format of ``body``, once the safety gate has passed it.

    JSON (a body whose first character is ``{``) never reaches an XML parser, so markup quoted in
    its strings is only text and is not scanned. Any other body is refused if it declares an
    entity or has a DOCTYPE internal subset in any encoding a parser could read it with; then its
    root element names the format: ``<urlset>``/``<sitemapindex>`` a news sitemap, anything else
    RSS/Atom (whose reader says when it is neither).

    Raises:
        FeedRejectedError: the body is unsafe to hand to an XML parser (see :func:`_unsafe_dtd_reason`).
    """
    texts = _sniff_texts(body, content_type)
    text = texts[0]
    if text.lstrip("\ufeff \t\r\n").startswith("{"):
        return SniffedDocument("json_feed", text)
    for sniffed in texts:
        reason = _unsafe_dtd_reason(sniffed)
        if reason is not None:
            raise FeedRejectedError(reason, url=url)
    if _root_element_name(text) in ("urlset", "sitemapindex"):
        return SniffedDocument("news_sitemap", text)
    return SniffedDocument("rss_atom", text)


def extract_mime_type(content_type: str | None) -> tuple[str, str | None] | None:
    """The MIME type a Content-Type header value stands for: its essence and charset.

    Repeated Content-Type headers arrive joined by ", " (httpx, RFC 9110 §5.3). They are read
    as browsers read them (WHATWG Fetch "extract a MIME type"): the last value that parses wins,
    and keeps the charset of an earlier one only while the essence stays the same. Unlike
    WHATWG, whitespace around "=" and a single-quoted charset are tolerated, as servers send them.

    Args:
        content_type: The header value, e.g. ``text/html; charset=windows-1251``.

    Returns:
        ``(essence, charset)``: the essence lowercased, the charset unquoted as sent (None when
        there is none, or when it is not a token, as no encoding label is); None when no value
        parses.

    >>> extract_mime_type("text/html; charset=windows-1251, text/html")
    ('text/html', 'windows-1251')
    >>> extract_mime_type("text/plain; charset=windows-1251, text/html")
    ('text/html', None)
    >>> extract_mime_type("nonsense") is None
    True
    """
    mime_type: tuple[str, str | None] | None = None
    charset: str | None = None
    for value in _split_header_values(content_type or ""):
        parsed = _parse_mime_type(value)
        if parsed is None or parsed[0] == "*/*":
            continue
        if mime_type is None or parsed[0] != mime_type[0]:
            mime_type = parsed
            charset = parsed[1]
        else:
            mime_type = (parsed[0], parsed[1] or charset)
    return mime_type


def _split_header_values(value: str) -> list[str]:
    """WHATWG "get, decode, and split": the comma-separated values of a header, trimmed."""
    values: list[str] = []
    pos = 0
    while pos <= len(value):
        match = _HEADER_VALUE_RE.match(value, pos)
        assert match is not None  # the pattern matches the empty string
        values.append(match.group().strip(" \t"))
        pos = match.end() + 1  # past the comma
    return values


def _parse_mime_type(value: str) -> tuple[str, str | None] | None:
    """Essence and charset of one MIME type (WHATWG "parse a MIME type"); None if it does not parse."""
    essence, _, parameters = value.partition(";")
    kind, slash, subtype = essence.strip(_HTTP_WHITESPACE).partition("/")
    if not (slash and _HTTP_TOKEN_RE.fullmatch(kind) and _HTTP_TOKEN_RE.fullmatch(subtype)):
        return None
    pos = 0
    while pos < len(parameters):
        match = _MIME_PARAMETER_RE.match(parameters, pos)
        assert match is not None  # the pattern matches the empty string
        pos = match.end()
        name, quoted, plain = match.groups()
        if plain is None or name.strip(_HTTP_WHITESPACE).lower() != "charset":
            continue
        charset = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else plain.strip(_HTTP_WHITESPACE)
        charset = charset.strip("'")
        if charset:  # the first non-empty charset parameter counts
            return f"{kind}/{subtype}".lower(), charset if _HTTP_TOKEN_RE.fullmatch(charset) else None
    return f"{kind}/{subtype}".lower(), None


def _sniff_texts(body: bytes, content_type: str) -> list[str]:
    """The body decoded for scanning markup: by BOM/NUL pattern, else latin-1.

    Also decoded with any declared encoding (HTTP charset or XML declaration) that is not
    ASCII-compatible (UTF-7, UTF-16...), so that markup cannot hide from the scan behind an
    encoding that feedparser would decode.
    """
    head = body[:4]
    if head.startswith((b"\x00\x00\xfe\xff", b"\x00\x00\x00<")):
        encoding = "utf-32-be"
    elif head.startswith((b"\xff\xfe\x00\x00", b"<\x00\x00\x00")):
        encoding = "utf-32-le"
    elif head.startswith((b"\xfe\xff", b"\x00<", b"\x00\n", b"\x00 ")):
        encoding = "utf-16-be"
    elif head.startswith((b"\xff\xfe", b"<\x00", b"\n\x00", b" \x00")):
        encoding = "utf-16-le"
    elif head.startswith(b"\x4c\x6f\xa7\x94"):  # "<?xm" in EBCDIC
        encoding = "cp037"
    else:
        encoding = "latin-1"
    texts = [body.decode(encoding, "replace")]
    charset = _CHARSET_RE.search(content_type)
    declared = (declared_xml_encoding(texts[0][:1024]), charset.group(1) if charset else None)
    for name in {d.lower() for d in declared if d}:
        try:
            if _MARKUP_PROBE.encode(name) == _MARKUP_PROBE.encode("ascii"):
                continue  # ASCII-compatible: markup bytes read the same in the first text
            texts.append(body.decode(name, "replace"))
        except (LookupError, UnicodeError, ValueError, TypeError):
            continue  # unknown or unusable codec: feedparser cannot use it either
    return texts


def _unsafe_dtd_reason(text: str) -> str | None:
    """Why a document must be refused before parsing (entities, an internal subset), or ``None``.

    Two rules, each a plain linear scan that needs no notion of where a DOCTYPE, comment or
    literal ends, so nothing in the document can hide a declaration from it:

    * any ``<!ENTITY`` anywhere is refused. Tracking the end of the internal subset is not
      enough: it once ended at the first ``]>``, even inside ``<!-- ]> -->``, and feedparser
      itself gathers ``<!ENTITY`` lines found before the root element into a new internal
      subset (``sanitizer.replace_doctype``), so a DOCTYPE without ``[`` can declare entities.
      A feed never needs one; one quoted raw in a CDATA section is refused too, a rare loss.
    * any DOCTYPE with an internal subset is refused, entities or not: no feed in the captured
      corpus or in feedparser's conformance suite has one except the two that declare entities.

    A DOCTYPE without an internal subset (RSS 0.91's Netscape DTD) is fine: feedparser never
    fetches external DTDs. Every DOCTYPE in the text is checked, not only the first, because
    feedparser's fallback parser reads documents with junk before the prolog.
    """
    count = len(_ENTITY_OPEN_RE.findall(text))
    if count:
        external = _EXTERNAL_ENTITY_RE.search(text)
        if external:
            name = _entity_name(text, external.start())
            return f"document declares an external entity ({name}); refusing to parse (XXE)"
        # Names are for the message only: read a few declarations, not a million.
        heads = itertools.islice(_ENTITY_OPEN_RE.finditer(text), _ENTITY_DECLS_READ)
        names = ", ".join(sorted({_entity_name(text, d.start()) for d in heads})[:_ENTITY_NAMES_SHOWN])
        return f"document declares {count} entit{'y' if count == 1 else 'ies'} ({names}); refusing entity expansion"
    for head in _DOCTYPE_HEAD_RE.finditer(text):
        if text.startswith("[", head.end()):
            return "DOCTYPE has an internal subset; refusing it (it can declare entities and no feed needs one)"
    return None


def _entity_name(text: str, start: int) -> str:
    """The name declared by the ``<!ENTITY`` at ``start`` (``%name`` for a parameter entity)."""
    match = _ENTITY_DECL_RE.match(text, start)
    if match is None:
        return "unnamed"
    return ("%" if match.group(1) else "") + match.group(2)[:40]


def _root_element_name(text: str) -> str | None:
    """Local name of the first element, skipping the prolog (declaration, comments, DOCTYPE)."""
    pos = 0
    while True:
        lt = text.find("<", pos)
        if lt < 0:
            return None
        if text.startswith("<?", lt):
            pos = _end_of(text, "?>", lt)
        elif text.startswith("<!--", lt):
            pos = _end_of(text, "-->", lt)
        elif text.startswith("<!", lt):
            head = _DECLARATION_HEAD_RE.match(text, lt)
            pos = head.end() if head else lt + 2
            if text.startswith("[", pos):
                end = _SUBSET_END_RE.search(text, pos)
                pos = end.end() if end else len(text)
        else:
            match = _ROOT_RE.match(text, lt)
            if match:
                return match.group(1).rsplit(":", 1)[-1].lower()
            pos = lt + 1


def _end_of(text: str, marker: str, start: int) -> int:
    end = text.find(marker, start)
    return len(text) if end < 0 else end + len(marker)
