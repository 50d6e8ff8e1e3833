"""The replay site's fault matrix, seen from a plain HTTP client: what each fault puts on the wire."""

from __future__ import annotations

import gzip
import io
import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from corpus_paths import CLUSTERING_CORPORA

from replay.site import FAULTS, HUGE_FEED_BYTES, RETRY_AFTER_429_SECONDS, ReplaySite

pytestmark = pytest.mark.integration

CORPORA = CLUSTERING_CORPORA
START = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPRedirectHandler())


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_RAW = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def _get(url: str, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    try:
        with _RAW.open(urllib.request.Request(url), timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _post(url: str, payload: object) -> tuple[int, object]:
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST")
    try:
        with _RAW.open(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def site() -> Iterator[ReplaySite]:
    s = ReplaySite.from_corpora(CORPORA, seed=7, start=START, limit=120, span_hours=1.0)
    s.start(port=0)
    s.set_clock(START + timedelta(hours=2))
    try:
        yield s
    finally:
        s.stop()


def _feed(site: ReplaySite, fault: str | None) -> str:
    publisher = next(p for p in site.publishers if p.language == "en")
    site.set_faults({publisher.publisher_id: fault})  # type: ignore[dict-item]
    return publisher.rss_url


def test_control_endpoint_sets_lists_and_clears_faults(site: ReplaySite) -> None:
    pid = site.publishers[0].publisher_id
    assert _post(f"{site.control_url}/_replay/faults", {pid: "http_500"}) == (200, {pid: "http_500"})
    assert _get(site.publishers[0].rss_url)[0] == 500
    assert json.loads(_get(f"{site.control_url}/_replay/faults")[2]) == {pid: "http_500"}
    status, body = _post(f"{site.control_url}/_replay/faults", {pid: "nonsense"})
    assert status == 400 and body["faults"] == list(FAULTS)  # type: ignore[index]
    assert _post(f"{site.control_url}/_replay/faults", {pid: None}) == (200, {})
    assert _get(site.publishers[0].rss_url)[0] == 200


def test_constructor_faults() -> None:
    with ReplaySite.from_corpora(CORPORA, seed=7, start=START, limit=30, faults={"x": "http_429"}) as s:
        assert s.faults == {"x": "http_429"}
    with pytest.raises(ValueError, match="unknown faults"):
        ReplaySite.from_corpora(CORPORA, seed=7, start=START, limit=30, faults={"x": "bogus"})  # type: ignore[dict-item]


@pytest.mark.parametrize(("fault", "status", "retry_after"),
                         [("http_500", 500, None), ("http_503", 503, "120"), ("http_429", 429, str(RETRY_AFTER_429_SECONDS))],
                         ids=["500", "503", "429"])
def test_status_faults(site: ReplaySite, fault: str, status: int, retry_after: str | None) -> None:
    got, headers, _ = _get(_feed(site, fault))
    assert got == status and headers.get("Retry-After") == retry_after


def test_redirect_loop_never_ends(site: ReplaySite) -> None:
    url = _feed(site, "redirect_loop")
    seen = []
    for _ in range(6):
        status, headers, _ = _get(url)
        assert status == 302
        url = url.split("?")[0] + headers["Location"][headers["Location"].index("?"):]
        seen.append(url)
    assert len(set(seen)) == 6


def test_document_faults(site: ReplaySite) -> None:
    _, _, bomb = _get(_feed(site, "gzip_bomb"))
    assert len(bomb) < 1_000_000 and len(gzip.decompress(bomb)) > 50_000_000
    _, _, laughs = _get(_feed(site, "billion_laughs"))
    assert b"<!ENTITY lol9" in laughs and b"<item>" in laughs
    _, headers, wrong = _get(_feed(site, "wrong_charset"))
    assert "utf-8" in headers["Content-Type"] and b"caf\xe9" in wrong
    _, _, dates = _get(_feed(site, "garbage_dates"))
    assert b"<pubDate>32 Foo" in dates
    _, _, huge = _get(_feed(site, "huge_feed"))
    assert len(huge) >= HUGE_FEED_BYTES and b"<item>" in huge


def test_hostile_pages_add_their_items_to_the_feed_and_serve_their_pages(site: ReplaySite) -> None:
    from replay.hostile import HOSTILE_KINDS, LONG_CHARS, NESTED_100MB_BYTES, hostile_url

    url = _feed(site, "hostile_pages")
    base = url.removesuffix("/feeds/rss.xml")
    _, _, feed = _get(url)
    _, _, normal = _get(_feed(site, None))
    assert feed.count(b"<item>") == normal.count(b"<item>") + len(HOSTILE_KINDS)
    assert b"<title>" + b"titleabcdefghijklmnopqrstu" * 10 in feed and b"&#233;&amp;" * 5_000 in feed
    _feed(site, "hostile_pages")
    _, _, title_page = _get(hostile_url(base, "long-title"))
    assert len(title_page) > 3 * LONG_CHARS and b" " not in title_page[title_page.index(b"<title>"):][:LONG_CHARS]
    status, headers, nested = _get(hostile_url(base, "nested-100mb"))
    assert status == 200 and headers["Content-Encoding"] == "gzip" and len(nested) < 1_000_000
    inflated = gzip.GzipFile(fileobj=io.BytesIO(nested))
    assert sum(len(chunk) for chunk in iter(lambda: inflated.read(2**20), b"")) >= NESTED_100MB_BYTES
    assert _get(base + "/articles/hostile/no-such-kind")[0] == 404
    assert _get(hostile_url(base, "nested"))[0] == 200
    _feed(site, None)
    assert _get(hostile_url(base, "nested"))[0] == 404  # served only while the fault is on


def test_timeout_and_slow_drip_hold_the_client(site: ReplaySite) -> None:
    with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
        _get(_feed(site, "timeout"), timeout=0.5)
    started = time.monotonic()
    with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
        with _RAW.open(_feed(site, "slow_drip"), timeout=5) as response:
            while time.monotonic() - started < 1.0:
                assert len(response.read(16)) <= 16
            raise TimeoutError("still dripping after 1 s")
    site.set_faults({p.publisher_id: None for p in site.publishers})
