"""robots.txt parsing and matching (RFC 9309), behaving like Google's ``robotstxt`` library.

The parser follows google/robotstxt ``robots.cc`` line by line, so that Google's compliance
tests (google/robotstxt-spec-test) pass:

* Lines end at CR, LF or CRLF; a UTF-8 BOM (or a prefix of one) at the very start is skipped.
* ``#`` starts a comment anywhere on a line. ``key: value`` or, when the colon is missing,
  exactly two whitespace-separated words (``disallow /``).
* Keys are matched by prefix, case-insensitively, with the typos Google accepts
  (``useragent``, ``user agent``, ``dissallow``, ``dissalow``, ``disalow``, ``diasllow``,
  ``disallaw``, ``site-map``).
* Consecutive ``user-agent`` lines form one group; a rule line closes the list of agents.
  Rules before the first ``user-agent`` line are ignored.
* A user-agent line's product token is its leading ``[A-Za-z_-]`` run, compared
  case-insensitively. ``*`` (alone or followed by whitespace) is the global group.
  If any group names the crawler, only those groups apply; otherwise the ``*`` groups do.
* Among matching rules the longest pattern wins, and ``Allow`` wins ties (RFC 9309 §2.2.2).
  ``*`` matches any run of characters; ``$`` at the end anchors the pattern.
* Patterns are percent-normalised as in Google's ``MaybeEscapePattern``: ``%xx`` escapes are
  upper-cased and non-ASCII bytes are escaped.
* ``Allow: /x/index.htm[l]`` also allows ``/x/`` (Google-specific).

On top of Google's matcher (the first two can be turned off, to run Google's compliance tests):

* ``/robots.txt`` itself is always allowed (RFC 9309 §2.2.2).
* The URL and the patterns are compared after the same percent-normalisation (RFC 9309
  §2.2.2, §2.2.3): escapes of unreserved characters (``%7E``, ``%62``) are decoded, other escapes
  are upper-cased, and every character a URI cannot hold raw (``<``, ``"``, a space, non-ASCII) is
  escaped; a ``*`` or ``$`` in the URL, and one escaped (``%2A``, ``%24``) or not special (a ``$``
  before the end) in a pattern, are the same literal character, while a pattern's bare ``*`` and
  final ``$`` keep their meaning. So ``Disallow: /foo-%24`` matches ``/foo-$``, ``Disallow: /a<b``
  matches ``/a%3Cb``, and the reverse. Google leaves the URL as the caller passed it and compares
  ``%62%61%7A`` literally (its test ``non-ascii-paths`` expects ``/foo/bar/baz`` not to match it),
  which lets ``/caf%c3%a9/`` escape ``Disallow: /café/``.
* A crawler may answer to several tokens (a variant and its base name, as Google's
  ``Googlebot-News`` is also ``Googlebot``; or the products of its ``User-Agent`` header): only the
  groups naming the most specific of them apply (Google's crawler documentation, "order of
  precedence for user agents"). Google's library combines the groups of every token it is given.
* A directive this parser does not know (``Invalid_directive: /x``, HTML junk such as ``<br />``)
  closes the list of agents as a rule line does, so the agents before it and after it are two
  groups, not one (protego; Google's library ignores the line). Records it knows that are not rules
  (``Sitemap``, ``Crawl-delay``, ``Host``, ...) never end a group (RFC 9309 §2.2.4).
* Only the first 500 KiB of the body are read (RFC 9309 §2.5; Google's limit); a line cut by
  the limit is dropped.
* ``Crawl-delay`` (not part of RFC 9309, but honoured by many crawlers) is kept per group.

The parser and the matcher are one room of about 600 lines because they follow google/robotstxt's
``robots.cc``, itself one file, line by line: kept together, a difference from it shows in a diff.
The cache of fetched verdicts that ingest runs share is :mod:`transforms.robots_cache`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

# RFC 9309 §2.5: crawlers MUST parse at least 500 kibibytes; Google stops there.
ROBOTS_MAX_BYTES = 500 * 1024
# robots.cc: kMaxLineLen = 2083 * 8; the line buffer keeps one byte for the NUL.
ROBOTS_MAX_LINE_BYTES = 2083 * 8 - 1
RobotsPolicy = Literal["allow_all", "disallow_all", "parse"]
_UTF8_BOM = b"\xef\xbb\xbf"
_LINE_BREAK_RE = re.compile(rb"\r\n|\r|\n")
_PRODUCT_TOKEN_RE = re.compile(r"[A-Za-z_-]*")
# A product of a User-Agent header (RFC 9110 §10.1.5): a token, "/" and a version; a comment is
# parenthesised (nested parentheses are rare enough to be cut at the first ")").
_CALLER_PRODUCT_RE = re.compile(r"(?:^|\s)([A-Za-z_-]+)/\S*")
_COMMENT_RE = re.compile(r"\([^)]*\)?")
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")
# RFC 3986 §2.3: escapes of these are equivalent to the characters themselves.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_USER_AGENT_KEYS = (b"user-agent", b"useragent", b"user agent")
_DISALLOW_KEYS = (b"disallow", b"dissallow", b"dissalow", b"disalow", b"diasllow", b"disallaw")
_SITEMAP_KEYS = (b"sitemap", b"site-map")
_CRAWL_DELAY_KEYS = (b"crawl-delay", b"crawl_delay", b"crawldelay", b"crawl delay")
# Records other crawlers read (Yandex's Host and Clean-param, request rates and visit times,
# content signals): not ours, but known records, so they do not end a group (RFC 9309 §2.2.4).
_OTHER_RECORD_KEYS = (b"host", b"clean-param", b"request-rate", b"visit-time", b"noindex", b"content-signal",
                      b"content-usage")
# RFC 3986 §2: the characters a URI holds raw; any other is compared percent-encoded.
_URI_CHARACTERS = _UNRESERVED | frozenset(b":/?#[]@!$&'()*+,;=%")


@dataclass(frozen=True, slots=True)
class RobotsRule:
    """One ``Allow``/``Disallow`` line of a group.

    ``pattern`` is escaped as Google does; ``normalised_pattern`` is its RFC 9309 form (see
    :func:`_normalise_pattern`). ``index_pattern`` is the extra ``/dir/$`` pattern that an
    ``Allow: /dir/index.html`` line also allows (Google-specific), or ``None``.
    """

    is_allow: bool
    pattern: str
    normalised_pattern: str
    line_number: int
    index_pattern: str | None = None
    normalised_index_pattern: str | None = None

    @classmethod
    def from_value(cls, is_allow: bool, value: bytes, line_number: int) -> RobotsRule:
        """The rule for a line's raw value.

        >>> RobotsRule.from_value(True, "/%7ejoe/café/index.html".encode(), 3)  # doctest: +NORMALIZE_WHITESPACE
        RobotsRule(is_allow=True, pattern='/%7Ejoe/caf%C3%A9/index.html',
                   normalised_pattern='/~joe/caf%C3%A9/index.html', line_number=3,
                   index_pattern='/%7Ejoe/caf%C3%A9/$', normalised_index_pattern='/~joe/caf%C3%A9/$')
        """
        pattern = _escape_pattern(value)
        normalised = _normalise_pattern(pattern)
        if not is_allow:
            return cls(is_allow, pattern, normalised, line_number)
        return cls(
            is_allow, pattern, normalised, line_number, _index_pattern(pattern), _index_pattern(normalised)
        )


@dataclass(frozen=True, slots=True)
class RobotsGroup:
    """A run of ``user-agent`` lines and the rules that follow them."""

    user_agents: tuple[str, ...]  # lower-cased product tokens; empty tokens are dropped
    is_global: bool  # one of the lines was ``*``
    rules: tuple[RobotsRule, ...]
    crawl_delay_seconds: float | None


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """A parsed robots.txt: its groups and sitemap URLs."""

    groups: tuple[RobotsGroup, ...]
    sitemaps: tuple[str, ...]
    # Set only by :meth:`disallow_all`: the site could not be asked (RFC 9309 §2.3.1.4).
    is_unreachable: bool = False

    @classmethod
    def allow_all(cls) -> RobotsRules:
        """Rules that allow everything (no robots.txt, or a 4xx for it).

        >>> is_allowed(RobotsRules.allow_all(), "newsroom", "https://a.example/x")
        True
        """
        return cls(groups=(), sitemaps=())

    @classmethod
    def disallow_all(cls) -> RobotsRules:
        """Rules that disallow everything (robots.txt unreachable or 5xx).

        >>> is_allowed(RobotsRules.disallow_all(), "newsroom", "https://a.example/x")
        False
        """
        return cls(groups=(), sitemaps=(), is_unreachable=True)

    def groups_for(self, user_agent: str | Sequence[str]) -> tuple[RobotsGroup, ...]:
        """The groups that apply to a crawler: those naming its most specific token, else the ``*`` groups.

        A crawler may answer to several tokens, a variant and the name it is a variant of (Google's
        ``Googlebot-News`` is also ``Googlebot``). Only the groups naming the most specific (the
        longest) of its tokens that any group names apply, as Google's crawlers choose ("order of
        precedence for user agents"); several groups naming that token are combined (RFC 9309 §2.2.1).

        >>> rules = parse_robots("User-agent: newsroom\\nDisallow: /a\\nUser-agent: newsroom-mobile\\nDisallow: /b")
        >>> [g.user_agents for g in rules.groups_for(["newsroom", "newsroom-mobile"])]
        [('newsroom-mobile',)]
        >>> [g.user_agents for g in rules.groups_for("newsroom-lite/1.0 newsroom/1.0 (+https://n.example/bot)")]
        [('newsroom',)]

        Args:
            user_agent: The crawler's product token (``newsroom``); a full ``User-Agent`` header,
                whose products (``token/version``, comments aside) are its tokens; or its tokens.

        Returns:
            The applicable groups in file order; empty if none applies.
        """
        tokens = _crawler_tokens(user_agent)
        named = {token for g in self.groups for token in g.user_agents}
        best = max((t for t in tokens if t in named), key=len, default=None)
        if best is not None:
            return tuple(g for g in self.groups if best in g.user_agents)
        return tuple(g for g in self.groups if g.is_global)

    def crawl_delay(self, user_agent: str | Sequence[str]) -> float | None:
        """The ``Crawl-delay`` in seconds for a crawler, or ``None`` if the file sets none.

        The first valid value in the applicable groups wins.

        >>> rules = parse_robots("User-agent: *\\nCrawl-delay: 2.5\\n")
        >>> rules.crawl_delay("newsroom")
        2.5
        """
        for group in self.groups_for(user_agent):
            if group.crawl_delay_seconds is not None:
                return group.crawl_delay_seconds
        return None


def _product_token(user_agent: str) -> str:
    """The product token a robots.txt group is matched on: the leading ``[A-Za-z_-]`` run.

    >>> _product_token("newsroom/0.1 (+https://example.org/bot)")
    'newsroom'
    >>> _product_token("Foo Bar")
    'Foo'
    """
    match = _PRODUCT_TOKEN_RE.match(user_agent)
    return match.group(0) if match else ""


def _crawler_tokens(user_agent: str | Sequence[str]) -> list[str]:
    """The caller's product tokens, lower-cased; invalid ones are dropped.

    Google matches the caller's string as a whole, so ``"Foo Bar"`` names no group (spec test
    ``user-agent-name``). A ``User-Agent`` header (``newsroom/0.1 (+url)``) is reduced to the tokens
    of its products, each the name before a ``/`` (RFC 9110 §10.1.5); its comments name nothing.

    >>> _crawler_tokens("NewsRoom/0.1 (+https://n.example/bot; other/1)"), _crawler_tokens("Foo Bar")
    (['newsroom'], [])
    >>> _crawler_tokens("newsroom-eu/2 newsroom/2"), _crawler_tokens(["Googlebot-News", "Googlebot", "bad token"])
    (['newsroom-eu', 'newsroom'], ['googlebot-news', 'googlebot'])
    """
    if isinstance(user_agent, str):
        products = _CALLER_PRODUCT_RE.findall(_COMMENT_RE.sub(" ", user_agent)) if "/" in user_agent else []
        candidates = products or [user_agent]
    else:
        candidates = list(user_agent)
    return [t.lower() for t in candidates if _PRODUCT_TOKEN_RE.fullmatch(t) and t]


def robots_policy_for_status(status: int | None) -> RobotsPolicy:
    """What to do with a robots.txt response, from its HTTP status (RFC 9309 §2.3.1).

    ``None`` means the server could not be reached (DNS, connect, timeout). Redirects are
    expected to be followed by the fetcher; a 3xx that arrives here means the redirect chain
    was abandoned, which RFC 9309 §2.3.1.2 lets us treat as "unavailable" (allow all).
    429 is treated like 5xx, as Google documents, so a rate-limited crawler backs off.

    >>> robots_policy_for_status(200), robots_policy_for_status(404), robots_policy_for_status(503)
    ('parse', 'allow_all', 'disallow_all')
    >>> robots_policy_for_status(None)
    'disallow_all'
    """
    if status is None:
        return "disallow_all"
    if 200 <= status < 300:
        return "parse"
    if status == 429:
        return "disallow_all"
    if 300 <= status < 500:
        return "allow_all"
    # 5xx and anything nonsensical (1xx, >599): the file is unreachable (§2.3.1.4).
    return "disallow_all"


def parse_robots(body: bytes | str) -> RobotsRules:
    """Parse a robots.txt body.

    Never raises for any input: lines that do not parse are skipped, as RFC 9309 §2.2 asks.

    Args:
        body: The response body. ``str`` input is encoded as UTF-8. Only the first
            :data:`ROBOTS_MAX_BYTES` bytes are read; if the body is longer, the line the
            limit cuts is dropped too.

    Returns:
        The groups (in file order) and the sitemap URLs.

    >>> rules = parse_robots(b"User-agent: *\\nDisallow: /private\\nSitemap: https://a.example/s.xml")
    >>> rules.sitemaps
    ('https://a.example/s.xml',)
    >>> is_allowed(rules, "newsroom", "https://a.example/private/1")
    False
    """
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)
    data = _first_lines(data, ROBOTS_MAX_BYTES)
    # robots.cc skips a UTF-8 BOM, or any leading prefix of one, at the start of the file.
    skip = 0
    while skip < len(_UTF8_BOM) and skip < len(data) and data[skip] == _UTF8_BOM[skip]:
        skip += 1
    data = data[skip:]

    groups: list[RobotsGroup] = []
    sitemaps: list[str] = []
    agents: list[str] = []
    is_global = False
    rules: list[RobotsRule] = []
    delay: float | None = None
    in_agent_lines = False  # the last directive that matters for grouping was a user-agent line

    def close_group() -> None:
        if agents or is_global:
            groups.append(RobotsGroup(tuple(agents), is_global, tuple(rules), delay))

    for line_number, raw in enumerate(_LINE_BREAK_RE.split(data), start=1):
        pair = _split_key_value(raw[:ROBOTS_MAX_LINE_BYTES])
        if pair is None:
            continue
        key, value = pair
        lowered = key.lower()
        if lowered.startswith(_USER_AGENT_KEYS):
            if not in_agent_lines:
                close_group()
                agents, is_global, rules, delay = [], False, [], None
                in_agent_lines = True
            text = value.decode("latin-1")
            # Google-specific: "* foo" is still the global agent.
            if text[:1] == "*" and (len(text) == 1 or text[1].isspace()):
                is_global = True
            else:
                token = _product_token(text).lower()
                if token and token not in agents:
                    agents.append(token)
        elif lowered.startswith(b"allow") or lowered.startswith(_DISALLOW_KEYS):
            if not (agents or is_global) and not in_agent_lines:
                continue  # rules before any user-agent line belong to no group
            in_agent_lines = False
            rules.append(RobotsRule.from_value(lowered.startswith(b"allow"), value, line_number))
        elif lowered.startswith(_SITEMAP_KEYS):
            if value:
                sitemaps.append(value.decode("utf-8", "replace"))
        elif lowered.startswith(_CRAWL_DELAY_KEYS):
            parsed = _parse_crawl_delay(value)
            if parsed is not None and delay is None and (agents or is_global):
                delay = parsed
        elif not lowered.startswith(_OTHER_RECORD_KEYS):
            # Unknown: most often a rule mistyped past the typos above, so it closes the list of
            # agents as a rule does; the agents after it start a group of their own.
            in_agent_lines = False
    close_group()
    return RobotsRules(groups=tuple(groups), sitemaps=tuple(sitemaps))


def is_allowed(
    rules: RobotsRules,
    user_agent: str | Sequence[str],
    url: str,
    *,
    is_robots_txt_exempt: bool = True,
    is_percent_normalised: bool = True,
) -> bool:
    """Whether a crawler may fetch a URL under these rules.

    Args:
        rules: From :func:`parse_robots`, :meth:`RobotsRules.allow_all` or
            :meth:`RobotsRules.disallow_all`.
        user_agent: The crawler's product token (``[A-Za-z_-]+``), a full ``User-Agent``
            header ``token/version ...`` (its products are its tokens), or its tokens; the most
            specific that a group names decides (:meth:`RobotsRules.groups_for`). Anything else
            (``"Foo Bar"``) names no group, as in Google's matcher.
        url: An absolute URL (or a path). Only its path, params and query are matched; the
            fragment is ignored.
        is_robots_txt_exempt: RFC 9309 §2.2.2 says ``/robots.txt`` is implicitly allowed.
            Google's matcher does not special-case it (four of its compliance tests expect
            ``/robots.txt`` to be disallowed by ``Disallow: /``); pass ``False`` to match it.
        is_percent_normalised: RFC 9309 §2.2.2: compare the path and the patterns after the
            same percent-normalisation, so ``/%7ejoe`` matches ``/~joe`` and ``/caf%c3%a9``
            matches ``/café``. Google compares the caller's URL as given, and an escaped
            unreserved character in a pattern literally (two of its compliance tests in
            ``non-ascii-paths`` expect that); pass ``False`` to match it.

    Returns:
        ``True`` if allowed.

    >>> rules = parse_robots("User-agent: *\\nDisallow: /\\nAllow: /news/*.html$")
    >>> is_allowed(rules, "newsroom", "https://a.example/news/1.html")
    True
    >>> is_allowed(rules, "newsroom", "https://a.example/news/1.html?x=1")
    False
    >>> is_allowed(rules, "newsroom", "https://a.example/robots.txt")
    True
    >>> rules = parse_robots("User-agent: *\\nDisallow: /café/\\nDisallow: /%7ejoe/")
    >>> is_allowed(rules, "newsroom", "https://a.example/caf%c3%a9/1"), is_allowed(rules, "n", "/~joe/")
    (False, False)
    """
    path = _path_params_query(url)
    if is_percent_normalised:
        path = _normalise_path(path)
    if is_robots_txt_exempt and path == "/robots.txt":  # RFC 9309 §2.2.2
        return True
    if rules.is_unreachable:
        return False

    # robots.cc RobotsMatcher::disallow(): when a group names us, only its rules count, and no
    # matching non-empty rule there means "allowed" even if the global group would disallow.
    # An empty pattern ("Disallow:") matches with length 0 and means "allow all".
    allow, disallow = _best_matches(rules.groups_for(user_agent), path, is_percent_normalised)
    return not (disallow > 0 and disallow > allow)


def _best_matches(groups: tuple[RobotsGroup, ...], path: str, is_normalised: bool) -> tuple[int, int]:
    """Longest matching Allow and Disallow pattern lengths (-1 when none matches)."""
    allow = disallow = -1
    for group in groups:
        for rule in group.rules:
            if is_normalised:
                pattern, index_pattern = rule.normalised_pattern, rule.normalised_index_pattern
            else:
                pattern, index_pattern = rule.pattern, rule.index_pattern
            if rule.is_allow:
                if len(pattern) > allow:
                    if _matches(path, pattern):
                        allow = len(pattern)
                    elif index_pattern is not None and len(index_pattern) > allow:
                        if _matches(path, index_pattern):
                            allow = len(index_pattern)
            elif len(pattern) > disallow and _matches(path, pattern):
                disallow = len(pattern)
    return allow, disallow


def _matches(path: str, pattern: str) -> bool:
    """Whether a robots.txt pattern matches the start of a path.

    Equivalent to robots.cc ``RobotsMatchStrategy::Matches``: ``*`` matches any run of
    characters and a final ``$`` anchors the end; a ``$`` elsewhere is literal. Greedy
    leftmost search of the literal pieces is exact for ``*``-only globs and never backtracks.
    """
    anchored = pattern.endswith("$")
    if anchored:
        pattern = pattern[:-1]
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return path == pattern if anchored else path.startswith(pattern)
    first, *middle, last = pieces
    if not path.startswith(first):
        return False
    pos = len(first)
    for piece in middle:
        found = path.find(piece, pos)
        if found < 0:
            return False
        pos = found + len(piece)
    if anchored:
        return len(path) - len(last) >= pos and path.endswith(last)
    return path.find(last, pos) >= 0


def _split_key_value(line: bytes) -> tuple[bytes, bytes] | None:
    """robots.cc ``GetKeyAndValueFrom``: ``(key, value)`` or ``None`` for a line to skip."""
    line = line.split(b"\0", 1)[0]  # the C parser sees a NUL as the end of the line
    line = line.split(b"#", 1)[0].strip()
    key, sep, value = line.partition(b":")
    if not sep:
        # Google-specific: accept whitespace instead of the colon if the line is exactly
        # two words ("disallow /").
        words = line.split(None, 1)
        if len(words) != 2 or len(words[1].split()) != 1:
            return None
        key, value = words
    key = key.strip()
    if not key:
        return None
    return key, value.strip()


def _escape_pattern(value: bytes) -> str:
    """robots.cc ``MaybeEscapePattern``: upper-case ``%xx`` and percent-encode non-ASCII bytes.

    >>> _escape_pattern("/a%2fb/ツ".encode())
    '/a%2Fb/%E3%83%84'
    """
    if value.isascii() and b"%" not in value:
        return value.decode("ascii")
    return _percent_form(value)


_PLAIN_RE = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!&'()+,;=]*")


def _normalise_path(text: str) -> str:
    """RFC 9309 §2.2.2 / RFC 3986 §6.2.2 normal form of a URL's path, to match normalised patterns.

    Escapes of unreserved characters are decoded, other escapes are upper-cased, and every
    character a URI cannot hold raw (non-ASCII, ``<``, a space, ...) is UTF-8 percent-encoded.
    ``*`` and ``$`` are escaped too: in a pattern they are special, so a pattern names them
    literally as ``%2A`` and ``%24`` (RFC 9309 §2.2.3). Other reserved characters stay as they
    are, escaped or not, so ``%2F`` is never a separator.

    >>> _normalise_path("/caf%c3%a9/%7ejoe/%62%61%7A/ツ?q=%2f&r=*%2A$<b>%")
    '/caf%C3%A9/~joe/baz/%E3%83%84?q=%2F&r=%2A%2A%24%3Cb%3E%'
    """
    return text if _PLAIN_RE.fullmatch(text) else _normal_form(text, is_pattern=False)


def _normalise_pattern(text: str) -> str:
    """A pattern in :func:`_normalise_path`'s form, its bare ``*`` and final ``$`` still special.

    A ``$`` before the end is literal (as in Google's matcher) and becomes ``%24``.

    >>> _normalise_pattern("/a$b/*%2a<%24$")
    '/a%24b/*%2A%3C%24$'
    """
    return text if _PLAIN_RE.fullmatch(text.replace("*", "").removesuffix("$")) else _normal_form(text, is_pattern=True)


def _normal_form(text: str, *, is_pattern: bool) -> str:
    data = text.encode("utf-8", "surrogatepass")
    out: list[str] = []
    i = 0
    n = len(data)
    while i < n:
        byte = data[i]
        if byte == 0x25 and i + 2 < n and data[i + 1] in _HEX_DIGITS and data[i + 2] in _HEX_DIGITS:
            octet = int(data[i + 1 : i + 3], 16)
            out.append(chr(octet) if octet in _UNRESERVED else f"%{octet:02X}")
            i += 3
            continue
        if is_pattern and (byte == 0x2A or (byte == 0x24 and i == n - 1)):
            out.append(chr(byte))  # the wildcard, the end anchor
        elif byte in (0x2A, 0x24) or byte not in _URI_CHARACTERS:
            out.append(f"%{byte:02X}")
        else:
            out.append(chr(byte))
        i += 1
    return "".join(out)


def _percent_form(data: bytes) -> str:
    """``data`` with ``%xx`` escapes upper-cased and non-ASCII bytes percent-encoded (Google's form)."""
    out: list[str] = []
    i = 0
    n = len(data)
    while i < n:
        byte = data[i]
        if byte == 0x25 and i + 2 < n and data[i + 1] in _HEX_DIGITS and data[i + 2] in _HEX_DIGITS:
            out.append(f"%{int(data[i + 1 : i + 3], 16):02X}")
            i += 3
            continue
        out.append(f"%{byte:02X}" if byte >= 0x80 else chr(byte))
        i += 1
    return "".join(out)


def _first_lines(data: bytes, limit: int) -> bytes:
    """The first ``limit`` bytes of ``data``, less a line the limit cuts (RFC 9309 §2.5).

    >>> _first_lines(b"ab\\ncd\\nef", 4), _first_lines(b"ab\\ncd\\nef", 6), _first_lines(b"ab\\ncd", 9)
    (b'ab\\n', b'ab\\ncd\\n', b'ab\\ncd')
    >>> _first_lines(b"ab\\ncd\\r\\nef", 5)  # the limit falls just before a line break
    b'ab\\ncd'
    """
    if len(data) <= limit:
        return data
    head = data[:limit]
    if data[limit] in b"\r\n":
        return head
    cut = max(head.rfind(b"\n"), head.rfind(b"\r"))
    return head[: cut + 1]


def _index_pattern(pattern: str) -> str | None:
    """Google-specific: ``Allow: /dir/index.htm[l]`` also allows ``/dir/`` exactly."""
    slash = pattern.rfind("/")
    if slash >= 0 and pattern.startswith("/index.htm", slash):
        return pattern[: slash + 1] + "$"
    return None


def _parse_crawl_delay(value: bytes) -> float | None:
    try:
        seconds = float(value.split()[0]) if value.split() else math.nan
    except ValueError:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def _path_params_query(url: str) -> str:
    """robots.cc ``GetPathParamsQuery``: path, params and query of a URL, starting with ``/``.

    >>> _path_params_query("http://foo.bar?x=1#y")
    '/?x=1'
    >>> _path_params_query("//foo.bar/a;b")
    '/a;b'
    """
    search_start = 2 if url.startswith("//") else 0
    early_path = _find_first_of(url, "/?;", search_start)
    protocol_end = url.find("://", search_start)
    if protocol_end >= 0 and 0 <= early_path < protocol_end:
        # A path, param or query starts before "://", so "://" is not the scheme separator.
        protocol_end = -1
    protocol_end = search_start if protocol_end < 0 else protocol_end + 3
    path_start = _find_first_of(url, "/?;", protocol_end)
    if path_start < 0:
        return "/"
    hash_pos = url.find("#", search_start)
    if 0 <= hash_pos < path_start:
        return "/"
    path_end = len(url) if hash_pos < 0 else hash_pos
    path = url[path_start:path_end]
    return path if path.startswith("/") else "/" + path


def _find_first_of(text: str, chars: str, start: int) -> int:
    positions = [p for p in (text.find(c, start) for c in chars) if p >= 0]
    return min(positions) if positions else -1
