"""robots.txt parsing and matching: Google's compliance tests, the wild corpus, unit cases."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from corpus_paths import CORPUS

from transforms.robots import (
    ROBOTS_MAX_BYTES,
    RobotsRules,
    is_allowed,
    parse_robots,
    robots_policy_for_status,
)

SPEC_DIR = CORPUS / "robots" / "spec"
WILD_DIR = CORPUS / "robots" / "wild" / "sites"
SPEC_EXPECTATIONS = 400  # corpus README: 204 ALLOWED + 196 DISALLOWED

needs_corpus = pytest.mark.skipif(
    not SPEC_DIR.is_dir(), reason=f"robots corpus not found at {SPEC_DIR} (set NEWSROOM_CORPUS)"
)


# --- a small reader for the protocol-buffer text format -----------------------------------

_SIMPLE_ESCAPES = {
    "n": b"\n", "t": b"\t", "r": b"\r", "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v",
    "\\": b"\\", "'": b"'", '"': b'"', "?": b"?",
}  # fmt: skip


def _read_string(text: str, pos: int) -> tuple[bytes, int]:
    """One C-style string literal starting at ``text[pos]`` (a quote) -> (bytes, next pos)."""
    quote = text[pos]
    pos += 1
    out = bytearray()
    while True:
        ch = text[pos]
        if ch == quote:
            return bytes(out), pos + 1
        if ch == "\n":
            raise ValueError(f"unterminated string at {pos}")
        if ch != "\\":
            out += ch.encode("utf-8")
            pos += 1
            continue
        esc = text[pos + 1]
        if esc in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[esc]
            pos += 2
        elif esc in "xX":
            end = pos + 2
            while end < pos + 4 and text[end] in "0123456789abcdefABCDEF":
                end += 1
            out.append(int(text[pos + 2 : end], 16))
            pos = end
        elif esc in "01234567":
            end = pos + 1
            while end < pos + 4 and text[end] in "01234567":
                end += 1
            out.append(int(text[pos + 1 : end], 8) & 0xFF)
            pos = end
        elif esc in "uU":
            width = 4 if esc == "u" else 8
            out += chr(int(text[pos + 2 : pos + 2 + width], 16)).encode("utf-8")
            pos += 2 + width
        else:
            raise ValueError(f"unknown escape \\{esc} at {pos}")


def _tokenize(text: str) -> list[tuple[str, object]]:
    tokens: list[tuple[str, object]] = []
    pos = 0
    while pos < len(text):
        ch = text[pos]
        if ch.isspace() or ch == ",":
            pos += 1
        elif ch == "#":
            end = text.find("\n", pos)
            pos = len(text) if end < 0 else end
        elif ch in "[]{}:":
            tokens.append(("punct", ch))
            pos += 1
        elif ch in "\"'":
            # Adjacent literals concatenate, as in C.
            value, pos = _read_string(text, pos)
            if tokens and tokens[-1][0] == "string":
                prev = tokens.pop()[1]
                assert isinstance(prev, bytes)
                value = prev + value
            tokens.append(("string", value))
        else:
            end = pos
            while end < len(text) and (text[end].isalnum() or text[end] in "_.-+"):
                end += 1
            if end == pos:
                raise ValueError(f"unexpected {ch!r} at {pos}")
            tokens.append(("ident", text[pos:end]))
            pos = end
    return tokens


def parse_textproto(text: str) -> dict[str, list[object]]:
    """Parse protobuf text format into ``{field: [values...]}`` (every field repeated)."""
    tokens = _tokenize(text)
    pos = 0

    def parse_value() -> object:
        nonlocal pos
        kind, value = tokens[pos]
        if value == "{":
            pos += 1
            message = parse_fields("}")
            pos += 1
            return message
        pos += 1
        return value

    def parse_fields(closer: str | None) -> dict[str, list[object]]:
        nonlocal pos
        fields: dict[str, list[object]] = {}
        while pos < len(tokens) and tokens[pos][1] != closer:
            kind, name = tokens[pos]
            if kind != "ident":
                raise ValueError(f"expected a field name, got {name!r}")
            pos += 1
            if tokens[pos][1] == ":":
                pos += 1
            values = fields.setdefault(str(name), [])
            if tokens[pos][1] == "[":
                pos += 1
                while tokens[pos][1] != "]":
                    values.append(parse_value())
                pos += 1
            else:
                values.append(parse_value())
        return fields

    return parse_fields(None)


def test_textproto_reader_concatenates_and_unescapes() -> None:
    parsed = parse_textproto(
        '# comment\ntests: [ { robotstxt: "a\\n" "\\xEF\\101\'" test_expectations: [ { x: FOO }, { x: "y" } ] } ]'
    )
    (test,) = parsed["tests"]
    assert isinstance(test, dict)
    assert test["robotstxt"] == [b"a\n\xefA'"]
    assert test["test_expectations"] == [{"x": ["FOO"]}, {"x": [b"y"]}]


# --- Google's compliance tests ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SpecCase:
    file: str
    robotstxt: bytes
    url: str
    user_agent: str
    expected_allowed: bool


def _load_spec_cases() -> list[SpecCase]:
    if not SPEC_DIR.is_dir():
        return []
    cases: list[SpecCase] = []
    for path in sorted(SPEC_DIR.rglob("*.textproto")):
        for test in parse_textproto(path.read_text(encoding="utf-8"))["tests"]:
            assert isinstance(test, dict)
            body = b"".join(test.get("robotstxt", [b""]))
            for expectation in test["test_expectations"]:
                assert isinstance(expectation, dict)
                (url,) = expectation["testurl"]
                (agent,) = expectation["useragent"]
                (outcome,) = expectation["expected_outcome"]
                assert outcome in ("ALLOWED", "DISALLOWED")
                cases.append(
                    SpecCase(
                        file=str(path.relative_to(SPEC_DIR)),
                        robotstxt=body,
                        url=url.decode("utf-8"),
                        user_agent=agent.decode("utf-8"),
                        expected_allowed=outcome == "ALLOWED",
                    )
                )
    return cases


SPEC_CASES = _load_spec_cases()


@needs_corpus
def test_spec_has_400_expectations() -> None:
    assert len(SPEC_CASES) == SPEC_EXPECTATIONS
    assert sum(c.expected_allowed for c in SPEC_CASES) == 204


@needs_corpus
@pytest.mark.parametrize(
    "case",
    SPEC_CASES or [SpecCase("missing", b"", "/", "x", True)],
    ids=[f"{c.file}:{i}" for i, c in enumerate(SPEC_CASES)] or ["missing"],
)
def test_google_spec(case: SpecCase) -> None:
    rules = parse_robots(case.robotstxt)
    # Google does not exempt /robots.txt (stress/327748, 369883 x2, 860237 expect it disallowed),
    # nor percent-normalise the URL and patterns (non-ascii-paths x3); our defaults follow
    # RFC 9309 §2.2.2 and do both. Checked separately below.
    allowed = is_allowed(
        rules, case.user_agent, case.url, is_robots_txt_exempt=False, is_percent_normalised=False
    )
    assert allowed is case.expected_allowed, (
        f"{case.file}: {case.user_agent} {case.url}\n{case.robotstxt.decode('utf-8', 'replace')}"
    )


# --- the wild corpus --------------------------------------------------------------------------


# About 1 s for 4,231 files, so not marked slow.
@pytest.mark.skipif(not WILD_DIR.is_dir(), reason=f"robots corpus not found at {WILD_DIR}")
def test_wild_robots_files_parse() -> None:
    files = sorted(p for p in WILD_DIR.iterdir() if p.is_file())
    assert len(files) == 4231
    started = time.perf_counter()
    with_groups = 0
    for path in files:
        rules = parse_robots(path.read_bytes())
        with_groups += bool(rules.groups)
        # Matching must not raise either, for a generic and a specific crawler.
        is_allowed(rules, "newsroom", f"https://{path.name}/news/2024/01/story.html?id=1")
        is_allowed(rules, "Googlebot", f"https://{path.name}/")
        rules.crawl_delay("newsroom")
    elapsed = time.perf_counter() - started
    print(f"wild robots: {len(files)} files, {with_groups} with groups, {elapsed:.2f}s")
    assert with_groups > 3500


# --- unit cases ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "agent", "url", "expected"),
    [
        ("User-agent: *\nDisallow: /", "newsroom", "https://a.example/robots.txt", True),
        ("User-agent: *\nDisallow:", "newsroom", "https://a.example/x", True),
        ("User-agent: *\nDisallow: /\nUser-agent: newsroom\nAllow: /news", "newsroom", "https://a.example/x", True),
        ("User-agent: *\nDisallow: /\nUser-agent: newsroom\nDisallow: /a", "newsroom", "https://a.example/x", True),
        ("User-agent: *\nDisallow: /\nUser-agent: other\nAllow: /", "newsroom", "https://a.example/x", False),
        ("User-agent: *\nAllow: /p\nDisallow: /p", "newsroom", "https://a.example/p", True),
        ("User-agent: *\nDisallow: /*.pdf$", "newsroom", "https://a.example/a/b.pdf", False),
        ("User-agent: *\nDisallow: /*.pdf$", "newsroom", "https://a.example/a/b.pdf?x", True),
        ("User-agent: *\nDisallow: /a%2fb", "newsroom", "https://a.example/a%2Fb", False),
        ("Disallow: /\nUser-agent: *\nDisallow: /x", "newsroom", "https://a.example/y", True),
        ("User-agent: *\nDisallow: /\n", "newsroom/1.0 (+https://n.example)", "https://a.example/y", False),
        ("User-agent: newsroom\nDisallow: /\n", "newsroom/1.0 (+https://n.example)", "https://a.example/y", False),
        ("User-agent: *\nDisallow: /*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*z", "n", "https://a.example/" + "a/" * 5000, True),
    ],
    ids=[
        "robots-txt-always-allowed", "empty-disallow", "specific-group-wins", "specific-group-no-match",
        "other-specific-group-ignored", "allow-wins-tie", "dollar-anchor", "dollar-anchor-query",
        "percent-case", "rules-before-agent-ignored", "full-ua-global", "full-ua-specific",
        "many-wildcards-no-backtracking",
    ],
)  # fmt: skip
def test_is_allowed_cases(body: str, agent: str, url: str, expected: bool) -> None:
    assert is_allowed(parse_robots(body), agent, url) is expected


def test_crawl_delay_and_sitemaps() -> None:
    rules = parse_robots(
        "Sitemap: https://a.example/s1.xml\n"
        "User-agent: *\nCrawl-delay: 10\nDisallow: /x\n"
        "User-agent: newsroom\nCrawl-delay: 1.5\nAllow: /\n"
        "User-agent: bad\nCrawl-delay: soon\n"
        "sitemap: https://a.example/news.xml\n"
    )
    assert rules.sitemaps == ("https://a.example/s1.xml", "https://a.example/news.xml")
    assert rules.crawl_delay("newsroom") == 1.5
    assert rules.crawl_delay("NewsRoom/2.0") == 1.5
    assert rules.crawl_delay("other") == 10.0
    assert rules.crawl_delay("bad") is None
    assert parse_robots("").crawl_delay("newsroom") is None


def test_parse_cap_ignores_bytes_after_500_kib() -> None:
    filler = b"# " + b"x" * (ROBOTS_MAX_BYTES) + b"\n"
    rules = parse_robots(b"User-agent: *\nDisallow: /a\n" + filler + b"Disallow: /b\n")
    assert not is_allowed(rules, "n", "https://a.example/a")
    assert is_allowed(rules, "n", "https://a.example/b")


def test_str_and_bytes_bodies_agree() -> None:
    text = "\ufeffUser-agent: *\r\nDisallow: /ツ\r\n"
    for body in (text, text.encode("utf-8")):
        rules = parse_robots(body)
        assert not is_allowed(rules, "n", "https://a.example/%E3%83%84")


@pytest.mark.parametrize(
    ("status", "policy"),
    [(200, "parse"), (204, "parse"), (301, "allow_all"), (401, "allow_all"), (403, "allow_all"),
     (404, "allow_all"), (410, "allow_all"), (429, "disallow_all"), (500, "disallow_all"),
     (503, "disallow_all"), (None, "disallow_all"), (100, "disallow_all")],
    ids=lambda v: str(v),
)  # fmt: skip
def test_robots_policy_for_status(status: int | None, policy: str) -> None:
    assert robots_policy_for_status(status) == policy


@needs_corpus
def test_spec_robots_txt_urls_are_exempt_by_default() -> None:
    cases = [c for c in SPEC_CASES if c.url.endswith("/robots.txt")]
    assert len(cases) >= 4
    assert all(is_allowed(parse_robots(c.robotstxt), c.user_agent, c.url) for c in cases)


@needs_corpus
def test_spec_cases_where_rfc_percent_normalisation_differs_from_google() -> None:
    """Google matches the caller's URL as given and ``%62%61%7A`` literally; RFC 9309 §2.2.2 does
    not. These three expectations, and only these, flip under the default."""
    differing = [
        (c.url, c.robotstxt.splitlines()[-1])
        for c in SPEC_CASES
        if is_allowed(parse_robots(c.robotstxt), c.user_agent, c.url, is_robots_txt_exempt=False)
        is not c.expected_allowed
    ]
    assert differing == [
        ("http://foo.bar/foo/bar/ツ", "Allow: /foo/bar/ツ".encode()),
        ("http://foo.bar/foo/bar/ツ", b"Allow: /foo/bar/%E3%83%84"),
        ("http://foo.bar/foo/bar/baz", b"Allow: /foo/bar/%62%61%7A"),
    ]


@pytest.mark.parametrize(
    ("pattern", "path"),
    [("/café/", "/caf%c3%a9/story"), ("/café/", "/caf%C3%A9/story"), ("/café/", "/café/story"),
     ("/caf%c3%a9/", "/caf%C3%A9/story"), ("/foo/bar/%62%61%7A", "/foo/bar/baz"),
     ("/foo/bar/baz", "/foo/bar/%62%61%7a"), ("/%7ejoe/", "/~joe/x"), ("/~joe/", "/%7Ejoe/x"),
     ("/a%2fb", "/a%2Fb"), ("/*.pdf$", "/x/%61.pdf"), ("/%2A", "/%2a")],
    ids=["plain-pattern-lower-url", "plain-pattern-upper-url", "raw-non-ascii-url", "lower-pattern",
         "rfc-unreserved-pattern", "rfc-unreserved-url", "tilde-pattern", "tilde-url", "reserved-case",
         "wildcard-anchor-kept", "escaped-star-is-literal"],
)  # fmt: skip
def test_percent_normalised_pattern_matches_equivalent_url(pattern: str, path: str) -> None:
    rules = parse_robots(f"User-agent: *\nDisallow: {pattern}\n")
    assert not is_allowed(rules, "newsroom", f"https://a.example{path}")


@pytest.mark.parametrize(
    ("pattern", "path"),
    [("/a%2Fb", "/a/b"), ("/a/b", "/a%2Fb"), ("/%2A", "/x"), ("/a$", "/a%24"), ("/*.pdf$", "/x.pdf?y")],
    ids=["escaped-slash-is-not-slash", "slash-is-not-escaped-slash", "escaped-star-not-wildcard",
         "escaped-dollar-not-anchor", "anchor"],
)  # fmt: skip
def test_reserved_escapes_stay_distinct(pattern: str, path: str) -> None:
    rules = parse_robots(f"User-agent: *\nDisallow: {pattern}\n")
    assert is_allowed(rules, "newsroom", f"https://a.example{path}")


def test_parse_cap_drops_the_line_the_cap_cuts() -> None:
    head = b"User-agent: *\nDisallow: /a\n"
    head += b"#" * (ROBOTS_MAX_BYTES - len(head) - len(b"\nDisallow: /b")) + b"\n"
    assert len(head + b"Disallow: /b") == ROBOTS_MAX_BYTES
    rules = parse_robots(head + b"Disallow: /bc\n")  # the cap falls inside "/bc"
    assert not is_allowed(rules, "n", "https://a.example/a")
    assert is_allowed(rules, "n", "https://a.example/b")  # not "Disallow: /b"
    complete = parse_robots(head + b"Disallow: /b\n")  # the cap falls on the line break
    assert not is_allowed(complete, "n", "https://a.example/b")


def test_allow_all_and_disallow_all() -> None:
    assert is_allowed(RobotsRules.allow_all(), "n", "https://a.example/x")
    assert not is_allowed(RobotsRules.disallow_all(), "n", "https://a.example/x")
    assert is_allowed(RobotsRules.disallow_all(), "n", "https://a.example/robots.txt")


# --- from other robots.txt parsers' test suites (issue 32) ---------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path"),
    [("/foo-%24", "/foo-$"), ("/x/abc%24", "/x/abc$abc"), ("/file-with-a-%2A.html", "/file-with-a-*.html"),
     ("/x%2Ax/abc", "/x*x/abcdef"), ("/a%3Cd.html", "/a<d.html"), ("/a%3cd.html", "/a<d.html"),
     ("/a<d.html", "/a%3Cd.html"), ("/a<d.html", "/a%3cd.html"), ("/a<*", "/a%3Cd.html"),
     ("/x$/abc", "/x%24/abcdef"), ("/x*x$/abc", "/xabcx%24/abcdef"), ("/x/abc$", "/x/abc"),
     ("/a b", "/a%20b"), ("/a%20b", "/a b"), ('/q"x', "/q%22x"), ("/a{b}", "/a%7Bb%7D")],
    ids=["escaped-dollar-vs-dollar", "escaped-dollar-mid-url", "escaped-star-vs-star", "escaped-star-mid",
         "escaped-lt-vs-lt", "lower-escaped-lt-vs-lt", "lt-vs-escaped-lt", "lt-vs-lower-escaped-lt", "lt-then-wildcard",
         "mid-dollar-vs-escaped", "wildcard-mid-dollar-vs-escaped", "final-dollar-still-anchors", "space-vs-escaped",
         "escaped-vs-space", "quote-vs-escaped", "braces-vs-escaped"],
)  # fmt: skip
def test_escaped_and_literal_characters_match_both_ways(pattern: str, path: str) -> None:
    # RFC 9309 §2.2.3: "%24" and "%2A" in a pattern match "$" and "*" in the URL; a character a URI
    # cannot hold raw ("<", a space) is the same escaped or not, in the pattern or in the URL.
    rules = parse_robots(f"User-agent: *\nDisallow: {pattern}\n")
    assert not is_allowed(rules, "newsroom", f"https://a.example{path}")


@pytest.mark.parametrize(
    ("pattern", "path"),
    [("/x/abc%24", "/x/abc"), ("/x%2Ax/abc", "/xabcx/abc"), ("/x/abc$", "/x/abc%24"), ("/a%3Cd", "/a%3Dd")],
    ids=["escaped-dollar-is-no-anchor", "escaped-star-is-no-wildcard", "anchor-is-no-dollar", "other-escape"],
)
def test_escaped_special_characters_stay_literal(pattern: str, path: str) -> None:
    rules = parse_robots(f"User-agent: *\nDisallow: {pattern}\n")
    assert is_allowed(rules, "newsroom", f"https://a.example{path}")


UNKNOWN_BETWEEN_AGENTS = """User-agent: abc
Disallow: /content/2/
User-agent: *
Invalid_directive: /gb.html
Invalid_directive: /content/2/
User-agent: ia_archiver
Disallow: /
"""


def test_an_unknown_directive_ends_the_list_of_agents() -> None:
    # protego test_grouping_unknown_keys: "*" is not grouped with ia_archiver across the unknown lines,
    # so other crawlers may fetch everything, and ia_archiver nothing.
    rules = parse_robots(UNKNOWN_BETWEEN_AGENTS)
    assert [g.user_agents or ("*",) for g in rules.groups] == [("abc",), ("*",), ("ia_archiver",)]
    assert all(is_allowed(rules, "agent", f"https://a.example{p}") for p in ("/foo", "/content/2", "/gb.html"))
    assert not any(is_allowed(rules, "ia_archiver", f"https://a.example{p}") for p in ("/foo", "/bar"))
    # Rules after an unknown line still belong to the group above it.
    rules = parse_robots("User-agent: a\nHarry: Potter\nDisallow: /x\nUser-agent: b\nDisallow: /y\n")
    assert not is_allowed(rules, "a", "https://a.example/x") and is_allowed(rules, "a", "https://a.example/y")


@pytest.mark.parametrize("record", ["Sitemap: https://a.example/s.xml", "Crawl-delay: 5", "Host: a.example",
                                    "Request-rate: 1/10s", "Clean-param: ref /articles/"])
def test_a_known_record_never_ends_a_group(record: str) -> None:
    # RFC 9309 §2.2.4: "a 'Sitemaps' record MUST NOT terminate a group" (Google's ID_LineSyntax_Groups_OtherRules).
    rules = parse_robots(f"User-agent: BarBot\n{record}\nUser-agent: *\nDisallow: /\n")
    assert not is_allowed(rules, "BarBot", "https://a.example/") and not is_allowed(rules, "FooBot", "https://a.example/")


MOBILE = """User-agent: Googlebot
Disallow: /

User-agent: Googlebot-Mobile
Allow: /
Disallow: /desktop-only/

User-agent: *
Disallow: /private/
"""


def test_the_most_specific_group_of_a_crawler_wins() -> None:
    rules = parse_robots(MOBILE)
    mobile = ["Googlebot-Mobile", "Googlebot"]  # a variant answers to its base name too
    assert is_allowed(rules, mobile, "https://a.example/x")  # only the -Mobile group: Allow: /
    assert not is_allowed(rules, mobile, "https://a.example/desktop-only/1")
    assert is_allowed(rules, list(reversed(mobile)), "https://a.example/x")  # the order they are given in does not matter
    assert is_allowed(rules, "Googlebot-Mobile/2.1 Googlebot/2.1", "https://a.example/x")  # a header's products
    assert not is_allowed(rules, "Googlebot/2.1", "https://a.example/x")
    # A variant without a group of its own follows its base name's, not "*".
    only_base = parse_robots("User-agent: Googlebot\nDisallow: /news/\nUser-agent: *\nDisallow: /\n")
    assert is_allowed(only_base, ["Googlebot-News", "Googlebot"], "https://a.example/x")
    assert not is_allowed(only_base, ["Googlebot-News", "Googlebot"], "https://a.example/news/1")
    assert not is_allowed(only_base, "Googlebot-News", "https://a.example/x")  # a lone token is matched whole
    assert parse_robots(MOBILE.replace("Allow: /\n", "Crawl-delay: 3\n")).crawl_delay(mobile) == 3.0
