from __future__ import annotations

import re

import pytest

from transforms.canonical_url import article_id_from_url, canonicalize_url, choose_canonical_url

CANONICALIZE_CASES = [
    ("https://example.com/a", "https://example.com/a", "already-canonical"),
    ("HTTPS://Example.COM/News/Story", "https://example.com/News/Story", "lowercase-scheme-host-not-path"),
    ("http://example.com", "http://example.com/", "empty-path-becomes-slash"),
    ("http://example.com:80/a", "http://example.com/a", "drop-default-http-port"),
    ("https://example.com:443/a", "https://example.com/a", "drop-default-https-port"),
    ("https://example.com:8443/a", "https://example.com:8443/a", "keep-other-port"),
    ("https://example.com/a#comments", "https://example.com/a", "drop-fragment"),
    ("https://user:pw@example.com/a", "https://example.com/a", "drop-userinfo"),
    (
        "https://example.com/a?utm_source=rss&utm_medium=feed&utm_campaign=x",
        "https://example.com/a",
        "drop-utm",
    ),
    (
        "https://example.com/a?fbclid=IwAR0&gclid=abc&mc_cid=1&mc_eid=2&ref=hp&ocid=msn&cmpid=x&_ga=1&igshid=z",
        "https://example.com/a",
        "drop-click-ids",
    ),
    ("https://example.com/a?UTM_Source=x&id=5", "https://example.com/a?id=5", "tracking-case-insensitive"),
    ("https://example.com/a?b=2&a=1&c=3", "https://example.com/a?a=1&b=2&c=3", "sort-query"),
    ("https://example.com/a?id=5&utm_source=x#x", "https://example.com/a?id=5", "keep-real-param"),
    ("https://example.com/caf%c3%a9", "https://example.com/caf%C3%A9", "uppercase-escapes"),
    ("https://example.com/%7Euser/%41bc", "https://example.com/~user/Abc", "decode-unreserved"),
    ("https://example.com/caf\u00e9 x", "https://example.com/caf%C3%A9%20x", "encode-non-ascii-and-space"),
    ("https://example.com/a%2Fb", "https://example.com/a%2Fb", "keep-encoded-slash"),
    ("https://example.com/a/./b/../c", "https://example.com/a/c", "dot-segments"),
    ("https://EXAMPLE.com./a", "https://example.com/a", "trailing-dot-host"),
    ("https://b\u00fccher.de/a", "https://xn--bcher-kva.de/a", "idna-host"),
    (
        "https://www.google.com/url?sa=t&q=https%3A%2F%2Fexample.com%2Fa%3Futm_source%3Dg&usg=x",
        "https://example.com/a",
        "unwrap-google-url",
    ),
    (
        "https://l.facebook.com/l.php?u=https%3A%2F%2Fexample.com%2Fstory%3Ffbclid%3D1&h=AT0",
        "https://example.com/story",
        "unwrap-facebook",
    ),
    (
        "https://news.google.com/rss/articles/CBMiX2h0dHBz?oc=5",
        "https://news.google.com/rss/articles/CBMiX2h0dHBz?oc=5",
        "google-news-left-alone",
    ),
    (
        "https://www.google.com/url?q=javascript:alert(1)",
        "https://www.google.com/url?q=javascript:alert(1)",
        "no-unwrap-to-non-http",
    ),
    ("https://example.com/2019/11/19/story/amp", "https://example.com/2019/11/19/story", "strip-amp-segment"),
    (
        "https://example.com/2019/11/19/story/amp/",
        "https://example.com/2019/11/19/story/",
        "strip-amp-segment-slash",
    ),
    ("https://example.com/2019/story.amp.html", "https://example.com/2019/story.html", "strip-amp-html"),
    ("https://example.com/story?amp", "https://example.com/story", "strip-amp-query"),
    ("https://example.com/story?amp=1&id=2", "https://example.com/story?id=2", "strip-amp-query-1"),
    ("https://example.com/story?outputType=amp", "https://example.com/story", "strip-outputtype-amp"),
    ("https://example.com/tag/amp", "https://example.com/tag/amp", "keep-amp-tag-page"),
    ("https://example.com/amp", "https://example.com/amp", "keep-top-level-amp"),
    ("https://example.com/story?amp=guitar", "https://example.com/story?amp=guitar", "keep-amp-real-value"),
    ("  https://example.com/a  ", "https://example.com/a", "strip-spaces"),
    # UTS #46, not IDNA 2003: "ß" stays a letter of its own, so the click goes to the right domain (#16).
    ("https://stra\u00dfe.de/a", "https://xn--strae-oqa.de/a", "uts46-keeps-sharp-s"),
    ("https://\u03c4\u03b5\u03c3\u03c4\u03c2.gr/", "https://xn--qxa0accc.gr/", "uts46-keeps-final-sigma"),
    ("https://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com/a", "https://example.com/a", "uts46-maps-fullwidth"),
    ("http://[::FFFF:1.2.3.4]:8080/a", "http://[::ffff:102:304]:8080/a", "ipv6-literal-compressed"),
]


@pytest.mark.parametrize(
    ("url", "expected"),
    [(u, e) for u, e, _ in CANONICALIZE_CASES],
    ids=[i for _, _, i in CANONICALIZE_CASES],
)
def test_canonicalize_url(url: str, expected: str) -> None:
    assert canonicalize_url(url) == expected


@pytest.mark.parametrize(
    "url", [u for u, _, _ in CANONICALIZE_CASES], ids=[i for _, _, i in CANONICALIZE_CASES]
)
def test_canonicalize_url_is_idempotent(url: str) -> None:
    once = canonicalize_url(url)
    assert canonicalize_url(once) == once


@pytest.mark.parametrize(
    "url",
    [
        "",
        "example.com/a",
        "/relative/path",
        "ftp://example.com/a",
        "mailto:a@example.com",
        "https://",
        "http://example.com:99999/",
        # Hosts no resolver would look up (#16): WHATWG forbidden domain code points, controls, empty labels.
        "http://exa mple.com/a",
        "http://exa\x00mple.com/a",
        "http://a|b.example/a",
        "http://a<b>.example/a",
        "http://a^b.example/a",
        "http://a%41.example/a",
        "http://a..example/a",
        "http://" + "a" * 64 + ".example/a",
        "http://xn--a.example\u200b\u0000/a",
        "http://\u2488.example/a",
    ],
    ids=["empty", "no-scheme", "relative", "ftp", "mailto", "no-host", "bad-port", "host-space",
         "host-nul", "host-pipe", "host-angle", "host-caret", "host-percent", "host-empty-label",
         "host-long-label", "host-control-after-idna", "host-disallowed-by-uts46"],
)
def test_canonicalize_url_rejects_invalid(url: str) -> None:
    with pytest.raises(ValueError):
        canonicalize_url(url)


CHOOSE_CASES = [
    ("https://ex.com/a?utm_source=x", None, None, "https://ex.com/a", "fetched-only"),
    (
        "https://ex.com/a",
        "https://ex.com/canon",
        "https://ex.com/og",
        "https://ex.com/canon",
        "rel-canonical-first",
    ),
    ("https://ex.com/a", None, "https://ex.com/og", "https://ex.com/og", "og-url-second"),
    ("https://ex.com/news/a", "/news/a-story", None, "https://ex.com/news/a-story", "relative-canonical"),
    ("https://ex.com/news/a", "b-story", None, "https://ex.com/news/b-story", "relative-no-slash"),
    ("https://ex.com/a", "//cdn.ex.com/a", None, "https://cdn.ex.com/a", "protocol-relative"),
    (
        "https://syndicator.com/a",
        "https://original.org/story",
        None,
        "https://original.org/story",
        "cross-domain-ok",
    ),
    (
        "https://ex.com/a",
        "javascript:void(0)",
        "https://ex.com/og",
        "https://ex.com/og",
        "invalid-canonical-skipped",
    ),
    ("https://ex.com/a", "ftp://ex.com/a", None, "https://ex.com/a", "non-http-skipped"),
    ("https://ex.com/a", "   ", "", "https://ex.com/a", "blank-ignored"),
    (
        "https://ex.com/news/a",
        "https://ex.com/",
        "https://ex.com/news/a-og",
        "https://ex.com/news/a-og",
        "root-canonical-ignored",
    ),
    ("https://ex.com/", "https://ex.com/", None, "https://ex.com/", "root-canonical-on-root-ok"),
    ("", "https://ex.com/canon", None, "https://ex.com/canon", "unknown-fetched-absolute-canonical"),
    (
        "https://ex.com/a",
        "https://ex.com/a/amp?utm_campaign=x",
        None,
        "https://ex.com/a/amp",
        "canonical-canonicalized",
    ),
]


@pytest.mark.parametrize(
    ("fetched", "rel", "og", "expected"),
    [c[:4] for c in CHOOSE_CASES],
    ids=[c[4] for c in CHOOSE_CASES],
)
def test_choose_canonical_url(fetched: str, rel: str | None, og: str | None, expected: str) -> None:
    assert choose_canonical_url(fetched, rel, og) == expected


def test_choose_canonical_url_nothing_valid_raises() -> None:
    with pytest.raises(ValueError):
        choose_canonical_url("", "/relative", "not a url")


def test_article_id_golden_value() -> None:
    assert article_id_from_url("https://example.com/") == "14ba2eb79c27555b"


def test_article_id_shape_and_stability() -> None:
    a = article_id_from_url("https://example.com/a")
    assert re.fullmatch(r"[0-9a-f]{16}", a)
    assert a == article_id_from_url("https://example.com/a")
    assert a != article_id_from_url("https://example.com/b")


def test_variants_share_an_article_id() -> None:
    variants = [
        "https://Example.com/2019/story/amp?utm_source=twitter#top",
        "https://example.com:443/2019/story?fbclid=x",
        "https://www.google.com/url?q=https://example.com/2019/story",
    ]
    ids = {article_id_from_url(canonicalize_url(v)) for v in variants}
    assert len(ids) == 1


def test_a_url_past_the_cap_is_refused_before_it_is_parsed() -> None:
    from transforms.canonical_url import MAX_URL_CHARS, absolute_http_url

    long = "https://example.com/" + "a" * MAX_URL_CHARS
    with pytest.raises(ValueError, match="character cap"):
        canonicalize_url(long)
    assert absolute_http_url(long, None) is None
    assert choose_canonical_url("https://example.com/a", long, None) == "https://example.com/a"
