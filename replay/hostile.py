"""Hostile documents for the ``hostile_pages`` fault: feed items and article pages built to cost a
crawler memory and time (issue 32).

Each kind is one item added at the top of the publisher's RSS feed, with its page at
``/articles/hostile/{kind}``:

* ``long-title``: a 1 MB title without a space, in the feed and in the page (``<title>``,
  ``og:title``, ``<h1>``);
* ``long-lede``: a 1 MB description without a space, in the feed and in the page (its meta
  description and its first paragraph);
* ``long-body``: a body of one 1 MB Latin "word" and one 1 MB run of Han characters (4 MB);
* ``entities``: a title of 10,000 character references, in the feed (numeric, ``&amp;``) and in the
  page (named, numeric, ``&amp;``);
* ``nested``: 4.5 MB of unclosed nested markup (``<div><p><b>`` repeated), under the usual 5 MB page
  cap, so it is parsed;
* ``nested-100mb``: 100 MB of nested markup, gzip-encoded (about 100 KB on the wire), so only a cap
  applied while decoding stops it.

Pure functions of their arguments (the compressed page is built once per process and kept).
"""

from __future__ import annotations

import zlib
from datetime import datetime
from email.utils import format_datetime
from html import escape

HOSTILE_KINDS = ("long-title", "long-lede", "long-body", "entities", "nested", "nested-100mb")
HOSTILE_PATH = "/articles/hostile/"
LONG_CHARS = 1_000_000
ENTITY_REFERENCES = 10_000
NESTED_BYTES = 4_500_000
NESTED_100MB_BYTES = 100_000_000
_NESTED_UNIT = "<div><p><b>"
_GZIPPED: dict[int, bytes] = {}


def _long_word(seed: str, chars: int = LONG_CHARS) -> str:
    """A run of ``chars`` letters without a space (varied, so no parser can take it for one repeated token)."""
    unit = (seed + "abcdefghijklmnopqrstuvwxyz")[:26]
    return (unit * (chars // len(unit) + 1))[:chars]


def _entity_title(named: bool) -> str:
    """A title of ``ENTITY_REFERENCES`` references: ``&eacute;`` (in HTML only), ``&#233;``, ``&amp;``."""
    units = ("&eacute;", "&#233;", "&amp;") if named else ("&#233;", "&amp;")
    return "".join(units[i % len(units)] for i in range(ENTITY_REFERENCES))


def hostile_url(base_url: str, kind: str) -> str:
    return f"{base_url}{HOSTILE_PATH}{kind}"


def hostile_items(base_url: str, now: datetime) -> str:
    """The RSS ``<item>``s of every kind, published at ``now`` (already XML: put them in a ``<channel>``)."""
    out = []
    for kind in HOSTILE_KINDS:
        title = {"long-title": _long_word("title"), "entities": _entity_title(named=False)}.get(
            kind, f"Hostile page: {kind}")
        description = _long_word("lede") if kind == "long-lede" else f"A page built to cost a crawler: {kind}."
        # The entity title is written as references on purpose; everything else is escaped text.
        title_xml = title if kind == "entities" else escape(title, quote=False)
        url = hostile_url(base_url, kind)
        out.append(f"<item><title>{title_xml}</title><link>{escape(url)}</link><guid isPermaLink=\"false\">"
                   f"hostile-{kind}</guid><pubDate>{format_datetime(now, usegmt=True)}</pubDate>"
                   f"<description>{escape(description, quote=False)}</description></item>\n")
    return "".join(out)


def hostile_page(kind: str) -> tuple[bytes, dict[str, str]]:
    """The page of ``kind`` and the headers to send with it (``Content-Encoding`` for the gzipped one).

    Raises:
        KeyError: not a hostile kind.
    """
    if kind not in HOSTILE_KINDS:
        raise KeyError(kind)
    if kind == "nested-100mb":
        return _gzipped_nested(NESTED_100MB_BYTES), {"Content-Encoding": "gzip"}
    if kind == "nested":
        units = NESTED_BYTES // len(_NESTED_UNIT)
        return (_page_head("Nested markup", "Nested markup") + _NESTED_UNIT * units).encode(), {}
    paragraph = "<p>The council met on Monday to discuss the budget for the schools of the city.</p>"
    if kind == "long-title":
        title = _long_word("title")
        return (_page_head(title, "A page whose title has no space.") + f"<h1>{title}</h1>{paragraph * 3}"
                + _page_tail()).encode(), {}
    if kind == "long-lede":
        lede = _long_word("lede")
        return (_page_head("A page whose lede has no space", lede) + f"<h1>A page whose lede has no space</h1>"
                f"<p>{lede}</p>{paragraph * 3}" + _page_tail()).encode(), {}
    if kind == "long-body":
        body = f"<p>{_long_word('body')}</p><p>{'漢' * LONG_CHARS}</p>"
        return (_page_head("A page whose body has no space", "A body without spaces.")
                + f"<h1>A page whose body has no space</h1>{body}" + _page_tail()).encode(), {}
    title = _entity_title(named=True)
    return (_page_head(title, "A title of character references.", escaped=True) + f"<h1>{title}</h1>"
            f"{paragraph * 3}" + _page_tail()).encode(), {}


def _page_head(title: str, description: str, *, escaped: bool = False) -> str:
    """The start of a page up to its ``<article>``; ``escaped``: ``title`` is already HTML (references)."""
    shown = title if escaped else escape(title)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{shown}</title>'
            f'<meta property="og:title" content="{shown}"><meta name="description" content="{escape(description)}">'
            f"</head><body><article>")


def _page_tail() -> str:
    return "</article></body></html>"


def _gzipped_nested(size: int) -> bytes:
    """``size`` bytes of nested markup, gzipped a megabyte at a time (never held whole); built once."""
    if size not in _GZIPPED:
        compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip container
        chunk = (_NESTED_UNIT * (1_000_000 // len(_NESTED_UNIT))).encode()
        head = _page_head("Nested markup", "Nested markup").encode()
        parts = [compressor.compress(head)]
        left = size - len(head)
        while left > 0:
            parts.append(compressor.compress(chunk[: min(left, len(chunk))]))
            left -= len(chunk)
        parts.append(compressor.flush())
        _GZIPPED[size] = b"".join(parts)
    return _GZIPPED[size]
