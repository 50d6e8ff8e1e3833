"""Canonical article URLs and the article ids derived from them.

One story is often reachable under many addresses: with tracking parameters, through a
redirect wrapper, as an AMP variant, with a fragment or a default port. Everything that keys on
an article (dedup, ids, clicks) goes through :func:`canonicalize_url` first so those variants
collapse to one string.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from urllib.parse import parse_qsl, quote, urljoin, urlsplit, urlunsplit

import idna

ARTICLE_ID_BYTES = 8  # 16 hex characters
MAX_UNWRAP_DEPTH = 3
MAX_URL_CHARS = 8_192
"""A longer URL is refused before it is split or matched (issue 32): common servers refuse a request
line past 8 KB, and an article's address is stored in every row that names it."""

# Query keys that only say how a reader arrived, never which page they asked for.
TRACKING_PARAMS = frozenset(
    {
        "fbclid",
        "gclid",
        "gclsrc",
        "dclid",
        "gbraid",
        "wbraid",
        "msclkid",
        "yclid",
        "twclid",
        "ttclid",
        "igshid",
        "mc_cid",
        "mc_eid",
        "ref",
        "ref_src",
        "ref_url",
        "referrer",
        "ocid",
        "cmpid",
        "icid",
        "ito",
        "smid",
        "smtyp",
        "_ga",
        "_gl",
        "_hsenc",
        "_hsmi",
        "__twitter_impression",
        "mkt_tok",
        "vero_id",
        "oly_anon_id",
        "oly_enc_id",
        "s_cid",
        "wt.mc_id",
        "spm",
        "at_medium",
        "at_campaign",
        "at_custom1",
        "at_custom2",
        "at_custom3",
        "at_custom4",
        "cmp",
        "sr_share",
    }
)
TRACKING_PREFIXES = ("utm_", "pk_", "mtm_", "hsa_")

# (host, path) of redirect wrappers -> query keys that carry the target, in order of preference.
_REDIRECT_WRAPPERS: dict[tuple[str, str], tuple[str, ...]] = {
    ("www.google.com", "/url"): ("q", "url"),
    ("google.com", "/url"): ("q", "url"),
    ("l.facebook.com", "/l.php"): ("u",),
    ("lm.facebook.com", "/l.php"): ("u",),
    ("m.facebook.com", "/l.php"): ("u",),
    ("l.instagram.com", "/"): ("u",),
    ("www.youtube.com", "/redirect"): ("q",),
    ("out.reddit.com", "/"): ("url",),
    ("href.li", "/"): ("url",),
    ("t.umblr.com", "/redirect"): ("z",),
    ("l.messenger.com", "/l.php"): ("u",),
}

_DEFAULT_PORTS = {"http": 80, "https": 443}
_PERCENT_RE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# RFC 3986 section 3.3: pchar = unreserved / pct-encoded / sub-delims / ":" / "@", plus "/".
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
_QUERY_SAFE = "/:@!$'()*,;-._~"
_AMP_QUERY_VALUES = frozenset({"", "1", "true", "yes"})


def _normalize_percent_escapes(component: str, safe: str) -> str:
    """Decode escaped unreserved characters, upper-case the other escapes, escape the rest.

    >>> _normalize_percent_escapes("/caf%c3%a9/%7Euser/a b", _PATH_SAFE)
    '/caf%C3%A9/~user/a%20b'
    """

    def _fix(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()

    # "%" is kept safe so existing escapes survive quote(); a stray "%" not followed by two
    # hex digits is escaped first so it cannot be mistaken for one later.
    component = re.sub(r"%(?![0-9A-Fa-f]{2})", "%25", component)
    return quote(_PERCENT_RE.sub(_fix, component), safe=safe)


def _remove_dot_segments(path: str) -> str:
    """Resolve "." and ".." segments (RFC 3986 section 5.2.4).

    >>> _remove_dot_segments("/a/b/../c/./d")
    '/a/c/d'
    >>> _remove_dot_segments("/a/..")
    '/'
    """
    if "." not in path:
        return path
    output: list[str] = []
    segments = path.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if len(output) > 1:
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    result = "/".join(output)
    return result if result.startswith("/") else "/" + result


def _is_tracking_param(key: str) -> bool:
    lowered = key.lower()
    return lowered in TRACKING_PARAMS or lowered.startswith(TRACKING_PREFIXES)


def _strip_amp_path(path: str) -> str:
    """Remove AMP markers that only ever mean "AMP rendering of the same page".

    >>> _strip_amp_path("/2019/11/story/amp/")
    '/2019/11/story/'
    >>> _strip_amp_path("/2019/11/story.amp.html")
    '/2019/11/story.html'
    >>> _strip_amp_path("/tag/amp")
    '/tag/amp'
    """
    # "/amp" alone could be a real section ("/tag/amp", "/amp" on a guitar site), so only a
    # final "amp" segment below a path at least two segments deep is treated as a marker.
    segments = [s for s in path.split("/") if s]
    if len(segments) >= 3 and segments[-1].lower() == "amp" and segments[-2].lower() != "tag":
        trailing = "/" if path.endswith("/") else ""
        return "/" + "/".join(segments[:-1]) + trailing
    if path.lower().endswith(".amp.html"):
        return path[: -len(".amp.html")] + ".html"
    return path


def _unwrap_redirect(url: str) -> str:
    """Follow known redirect wrappers (Google, Facebook, ...) to the URL they point at."""
    for _ in range(MAX_UNWRAP_DEPTH):
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        keys = _REDIRECT_WRAPPERS.get((host, parts.path or "/"))
        if keys is None:
            return url
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        target = next((params[k] for k in keys if params.get(k)), None)
        if target is None or urlsplit(target).scheme.lower() not in _DEFAULT_PORTS:
            return url
        url = target
    return url


# WHATWG URL "forbidden domain code points" that urlsplit lets through in a host: a host holding
# one is not a name any resolver would look up, and two spellings of it could key one article.
_FORBIDDEN_HOST_CHARS = frozenset(" #%/:<>?@[\\]^|\x7f")
MAX_HOST_CHARS = 253
MAX_LABEL_CHARS = 63


_IPV4_MAX_PARTS = 4


def _ipv4_number(part: str) -> int | None:
    """One part of an IPv4 host: ``0x``-prefixed hex, ``0``-prefixed octal or decimal; None if none."""
    if part[:2] in ("0x", "0X"):
        digits, radix = part[2:], 16
    elif len(part) > 1 and part.startswith("0"):
        digits, radix = part[1:], 8
    else:
        digits, radix = part, 10
    if not digits:
        return 0 if radix == 16 else None  # "0x" alone is zero; "" is no number
    try:
        return int(digits, radix) if digits.isalnum() and digits.isascii() else None
    except ValueError:
        return None


def _ipv4_host(host: str) -> str | None:
    """The dotted quad a host ending in a number stands for (WHATWG URL "IPv4 parser"); None for a name.

    Raises:
        ValueError: The host ends in a number but is no IPv4 address: browsers refuse such a URL,
            and a resolver would read some of these as an address, others as a name.
    """
    parts = host.split(".")
    last = parts[-1]
    if not last or not (last.isdigit() and last.isascii()) and _ipv4_number(last) is None:
        return None
    numbers = [_ipv4_number(p) for p in parts] if len(parts) <= _IPV4_MAX_PARTS else [None]
    if any(n is None for n in numbers):
        raise ValueError(f"invalid host {host!r}: ends in a number but is not an IPv4 address")
    *head, tail = [n for n in numbers if n is not None]
    if any(n > 255 for n in head) or tail >= 256 ** (_IPV4_MAX_PARTS + 1 - len(numbers)):
        raise ValueError(f"invalid host {host!r}: an IPv4 address out of range")
    value = tail
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return str(ipaddress.IPv4Address(value))


def normalize_host(host: str) -> str:
    """A URL host as it goes on the wire: lower case, IDNA per UTS #46 (non-transitional), checked.

    IDNA 2003 (Python's ``"idna"`` codec) maps ``ß`` to ``ss``, so ``straße.de`` became
    ``strasse.de``, a different domain; UTS #46 keeps it (``xn--strae-oqa.de``), as browsers do.
    An IPv6 literal comes back compressed, without brackets. A host whose last label is a number is
    an IPv4 address in one of the forms ``inet_aton`` (so the resolver) and browsers accept
    (``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``127.1``): it comes back as a dotted quad, so an
    address check sees the address a fetch would reach (WHATWG URL "IPv4 parser").

    Args:
        host: The host part of a URL, without brackets or port.

    Returns:
        The normalised host.

    Raises:
        ValueError: The host is empty, holds spaces, control characters or a WHATWG forbidden
            domain code point (``|``, ``<``, ``%``, ...), has an empty or over-long label, is
            not valid IDNA, or ends in a number but is no IPv4 address (``1.2.3.4.5``, ``a.09``).

    >>> normalize_host("Straße.DE."), normalize_host("bücher.de"), normalize_host("::FFFF:1.2.3.4")
    ('xn--strae-oqa.de', 'xn--bcher-kva.de', '::ffff:102:304')
    >>> [normalize_host(h) for h in ("2130706433", "0x7F000001", "0177.0.0.1", "127.1", "10.0x10.1")]
    ['127.0.0.1', '127.0.0.1', '127.0.0.1', '127.0.0.1', '10.16.0.1']
    >>> normalize_host("exa mple.com")
    Traceback (most recent call last):
    ...
    ValueError: invalid host 'exa mple.com': holds a space, a control or a forbidden character
    """
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host).compressed
        except ValueError as e:
            raise ValueError(f"invalid IPv6 host {host!r}") from e
    host = host.rstrip(".")
    if not host or any(ch in _FORBIDDEN_HOST_CHARS or ord(ch) < 0x20 or 0x80 <= ord(ch) < 0xA0 for ch in host):
        raise ValueError(f"invalid host {host!r}: holds a space, a control or a forbidden character")
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=True, transitional=False).decode("ascii")
        except (idna.IDNAError, UnicodeError) as e:
            raise ValueError(f"invalid international host {host!r}: {e}") from e
    host = host.lower()
    ipv4 = _ipv4_host(host)
    if ipv4 is not None:
        return ipv4
    labels = host.split(".")
    if len(host) > MAX_HOST_CHARS or any(not label or len(label) > MAX_LABEL_CHARS for label in labels):
        raise ValueError(f"invalid host {host!r}: empty or over-long label")
    return host


def canonicalize_url(url: str) -> str:
    """Reduce a URL to the one form we key articles on.

    Lower-cases scheme and host, drops userinfo, default ports and the fragment, unwraps
    known redirect wrappers, removes tracking parameters and AMP markers, sorts the remaining
    query parameters and normalises percent-encoding and dot segments of the path.

    Args:
        url: An absolute http(s) URL.

    Returns:
        The canonical form of ``url``.

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL with a valid host (see
            :func:`normalize_host`), its port is invalid, or it is longer than ``MAX_URL_CHARS``.

    >>> canonicalize_url("HTTPS://Example.COM:443/a/../News/Story?utm_source=x&b=2&a=1#top")
    'https://example.com/News/Story?a=1&b=2'
    >>> canonicalize_url("https://www.google.com/url?q=https://example.com/x%3Ffbclid%3D1&sa=D")
    'https://example.com/x'
    >>> canonicalize_url("http://example.com")
    'http://example.com/'
    """
    if len(url) > MAX_URL_CHARS:
        raise ValueError(f"URL of {len(url):,} characters, over the {MAX_URL_CHARS:,}-character cap: {url[:80]!r}...")
    url = _unwrap_redirect(url.strip())
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ValueError(f"invalid URL: {url!r}") from e
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError(f"not an http(s) URL: {url!r}")
    if not parts.hostname:
        raise ValueError(f"URL has no host: {url!r}")
    host = normalize_host(parts.hostname)
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"

    path = _normalize_percent_escapes(_remove_dot_segments(parts.path or "/"), _PATH_SAFE)
    path = _strip_amp_path(path)

    kept: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if _is_tracking_param(key):
            continue
        if key.lower() == "amp" and value.lower() in _AMP_QUERY_VALUES:
            continue
        if key.lower() == "outputtype" and value.lower() == "amp":
            continue
        kept.append((key, value))
    query = "&".join(
        f"{quote(k, safe=_QUERY_SAFE)}={quote(v, safe=_QUERY_SAFE)}" if v else quote(k, safe=_QUERY_SAFE)
        for k, v in sorted(kept)
    )
    return urlunsplit((scheme, netloc, path, query, ""))


def normalize_feed_url(url: str) -> str:
    """The one spelling of a feed's address: two URLs that fetch the same document come out the same.

    Only equivalences that hold for every server are applied (RFC 3986 §6.2.2, RFC 9110 §4.2.3):
    scheme and host case, the host as :func:`normalize_host` gives it (IDNA, an IPv4 address in
    any form as a dotted quad), a default port, an empty path, percent-encoding case and escaped
    unreserved characters, dot segments, and the fragment, which is never sent. Unlike
    :func:`canonicalize_url` nothing else is touched: a feed's query parameters are its own.

    Args:
        url: An absolute http(s) URL.

    Returns:
        The normalised URL.

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL with a valid host and port.

    >>> normalize_feed_url("HTTP://Case.Example:80/feed"), normalize_feed_url("https://a.example:8443?x=%7e&B=1#top")
    ('http://case.example/feed', 'https://a.example:8443/?x=~&B=1')
    >>> normalize_feed_url("http://0x7f000001/a/./b/../rss"), normalize_feed_url("http://[::FFFF:7f00:1]:80/")
    ('http://127.0.0.1/a/rss', 'http://[::ffff:7f00:1]/')
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as e:
        raise ValueError(f"invalid URL: {url[:200]!r}: {e}") from e
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError(f"not an http(s) URL: {url[:200]!r}")
    if not parts.hostname:
        raise ValueError(f"URL has no host: {url[:200]!r}")
    host = normalize_host(parts.hostname)
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    netloc = (f"{userinfo}@" if userinfo else "") + (host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}")
    path = _normalize_percent_escapes(_remove_dot_segments(parts.path or "/"), _PATH_SAFE)
    query = _normalize_percent_escapes(parts.query, _PATH_SAFE + "?") if parts.query else ""
    return urlunsplit((scheme, netloc, path, query, ""))


def _resolve_candidate(candidate: str | None, base: str | None) -> str | None:
    if candidate is None or len(candidate) > MAX_URL_CHARS or not candidate.strip():
        return None
    candidate = candidate.strip()
    try:
        absolute = urljoin(base, candidate) if base else candidate
        return canonicalize_url(absolute)
    except ValueError:
        return None


def _is_root_path(url: str) -> bool:
    parts = urlsplit(url)
    return parts.path in ("", "/") and not parts.query


def choose_canonical_url(fetched_url: str, rel_canonical: str | None, og_url: str | None) -> str:
    """Pick the address a page says is its own, falling back to where we fetched it.

    Order: ``<link rel=canonical>``, then ``og:url``, then ``fetched_url``. Relative values are
    resolved against ``fetched_url``. A declared URL on another domain is accepted (syndicated
    copies point at the original) as long as it is http(s). A declared URL that is just a site
    root while the fetched URL is not is ignored: CMS templates that stamp the home page as
    canonical on every article are common, and accepting it would merge unrelated articles.

    Args:
        fetched_url: The URL the page was fetched from (may be empty when unknown).
        rel_canonical: The ``href`` of ``<link rel="canonical">``, if any.
        og_url: The ``content`` of ``<meta property="og:url">``, if any.

    Returns:
        The canonicalized chosen URL.

    Raises:
        ValueError: Neither the declared URLs nor ``fetched_url`` are valid http(s) URLs.

    >>> choose_canonical_url("https://ex.com/a?utm_source=rss", "/a-story", None)
    'https://ex.com/a-story'
    >>> choose_canonical_url("https://ex.com/a", "javascript:void(0)", "https://ex.com/b")
    'https://ex.com/b'
    >>> choose_canonical_url("https://ex.com/news/a", "https://ex.com/", None)
    'https://ex.com/news/a'
    """
    fetched = _resolve_candidate(fetched_url, None)
    for candidate in (rel_canonical, og_url):
        resolved = _resolve_candidate(candidate, fetched_url or None)
        if resolved is None:
            continue
        if fetched is not None and _is_root_path(resolved) and not _is_root_path(fetched):
            continue
        return resolved
    if fetched is None:
        raise ValueError(f"no valid http(s) URL among {fetched_url!r}, {rel_canonical!r}, {og_url!r}")
    return fetched


def article_id_from_url(canonical_url: str) -> str:
    """Stable 16-hex-character id of an article: blake2b of its canonical URL.

    Args:
        canonical_url: Output of :func:`canonicalize_url` (not re-canonicalized here).

    Returns:
        16 lowercase hex characters.

    >>> article_id_from_url("https://example.com/")
    '14ba2eb79c27555b'
    >>> len(article_id_from_url("https://example.com/a"))
    16
    """
    return hashlib.blake2b(canonical_url.encode("utf-8"), digest_size=ARTICLE_ID_BYTES).hexdigest()


def absolute_http_url(value: object, base: str | None) -> str | None:
    """``value`` resolved against ``base``; None unless the result is an http(s) URL with a host, and
    None for a value longer than ``MAX_URL_CHARS``.

    >>> absolute_http_url(" /a?b ", "https://x.example/feed"), absolute_http_url("javascript:x()", "https://x.example/")
    ('https://x.example/a?b', None)
    >>> absolute_http_url("//cdn.example/i.png", "http://x.example/"), absolute_http_url(None, None)
    ('http://cdn.example/i.png', None)
    """
    if not isinstance(value, str) or len(value) > MAX_URL_CHARS or not value.strip():
        return None
    value = value.strip()
    try:
        resolved = urljoin(base, value) if base else value
        parts = urlsplit(resolved)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return resolved
