"""Finding the feed behind a source a reader suggests (``POST /v1/subscriptions``, issue 30).

The reader gives a site's or a feed's address. This fetches it as ingest fetches (the same
address rule, ``newsroom.addresses``: every connection, every redirect, checked after DNS and
made to the address checked, so a name that resolves to a private address is refused and a DNS
answer that changes in between is never followed), and decides:

* the address is a feed (RSS, Atom, RDF or JSON Feed, by its content, not its content type): that
  feed;
* it is a page naming feeds (``<link rel="alternate" type="application/rss+xml" href="...">``,
  also Atom and JSON Feed): the first of them that is a feed;
* else: no feed here (422), and nothing is written.

Bounded like everything that reads what others wrote: at most ``MAX_REDIRECTS`` redirects, the
deadline ``sources_fetch_seconds`` for it all, ``MAX_BODY_BYTES`` of each body (decoded), the page
read up to its ``MAX_TAGS``-th tag, feeds parsed by defusedxml (no entities, no DTD), titles cut to
``MAX_TITLE_CHARS``. It runs on the serving replica, on a worker thread of the request.
"""

from __future__ import annotations

import html.parser
import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpcore
import httpx
from defusedxml import DefusedXmlException
from defusedxml import ElementTree as SafeET

from newsroom.addresses import AddressRefusedError, Network, networks, resolve_checked
from serving.errors import SourceRefusedError

MAX_URL_CHARS = 2048
MAX_REDIRECTS = 5
MAX_BODY_BYTES = 2_000_000
MAX_TAGS = 5000
MAX_TITLE_CHARS = 200
MAX_CANDIDATES = 3
"""Feeds a page names that are tried, in its order."""
FEED_LINK_TYPES = ("application/rss+xml", "application/atom+xml", "application/feed+json", "application/rdf+xml",
                   "application/json")
ACCEPT = "application/rss+xml, application/atom+xml, application/feed+json, application/xml;q=0.9, text/html;q=0.8"
_REDIRECTS = {301, 302, 303, 307, 308}
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True, slots=True)
class DiscoveredFeed:
    feed_url: str
    site_url: str
    title: str
    kind: str
    """``rss``, ``atom`` or ``json`` (a registry feed's kinds)."""


def check_source_url(url: str) -> str:
    """The address as it will be fetched, or SourceRefusedError (422) for one that cannot be.

    >>> check_source_url(" HTTPS://Example.COM/news ")
    'https://example.com/news'
    """
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise SourceRefusedError(f"the address is longer than {MAX_URL_CHARS} characters")
    if _CONTROL.search(url) or " " in url:
        raise SourceRefusedError("the address holds spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise SourceRefusedError("not an address that can be fetched") from e
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise SourceRefusedError("only http and https addresses of a site or a feed are taken")
    if parts.username is not None or parts.password is not None:
        raise SourceRefusedError("an address with a user name or password is not taken")
    host = parts.hostname.lower()
    netloc = host if port is None else f"{host}:{port}"
    if ":" in host:
        netloc = f"[{host}]" if port is None else f"[{host}]:{port}"
    return urlunsplit((parts.scheme.lower(), netloc, parts.path or "/", parts.query, ""))


class _CheckedBackend(httpcore.NetworkBackend):
    """Resolve once per connection, check every address, connect to a checked one (as ingest does)."""

    def __init__(self, allowed: tuple[Network, ...]) -> None:
        self._allowed = allowed
        self._backend = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None) -> httpcore.NetworkStream:
        error: httpcore.ConnectError | None = None
        for address in resolve_checked(host, port, self._allowed):
            try:
                return self._backend.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                                 socket_options=socket_options)
            except httpcore.ConnectError as e:
                error = e
        assert error is not None
        raise error

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _client(private_networks: tuple[str, ...], deadline_seconds: float, user_agent: str) -> httpx.Client:
    context = httpx.create_ssl_context(trust_env=False)
    transport = httpx.HTTPTransport(verify=context, trust_env=False)
    transport._pool = httpcore.ConnectionPool(ssl_context=context, max_connections=2,
                                              network_backend=_CheckedBackend(networks(private_networks)))
    per_step = min(deadline_seconds, 10.0)
    return httpx.Client(transport=transport, follow_redirects=False, trust_env=False,
                        timeout=httpx.Timeout(per_step), headers={"User-Agent": user_agent, "Accept": ACCEPT})


@dataclass(frozen=True, slots=True)
class _Fetched:
    url: str
    content_type: str
    body: bytes


def _fetch(client: httpx.Client, url: str, deadline: float) -> _Fetched:
    for _ in range(MAX_REDIRECTS + 1):
        url = check_source_url(url)
        if time.monotonic() > deadline:
            raise SourceRefusedError("the site took too long to answer", status=502)
        try:
            with client.stream("GET", url) as response:
                if response.status_code in _REDIRECTS:
                    location = response.headers.get("location")
                    if not location:
                        raise SourceRefusedError("the site redirects to nowhere")
                    url = urljoin(url, location)
                    continue
                if response.status_code != 200:
                    raise SourceRefusedError(f"the site answered HTTP {response.status_code}")
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_BODY_BYTES:
                        raise SourceRefusedError(f"the page is larger than {MAX_BODY_BYTES // 1_000_000} MB")
                    if time.monotonic() > deadline:
                        raise SourceRefusedError("the site took too long to answer", status=502)
                return _Fetched(url, response.headers.get("content-type", ""), bytes(body))
        except AddressRefusedError as e:
            if e.kind == "dns":
                raise SourceRefusedError("the site's name does not resolve") from e
            raise SourceRefusedError("the site's address is not public: it cannot be fetched") from e
        except httpx.HTTPError as e:
            raise SourceRefusedError("the site could not be reached", status=502) from e
    raise SourceRefusedError(f"the site redirects more than {MAX_REDIRECTS} times")


def _clean(text: object) -> str:
    return " ".join(_CONTROL.sub(" ", str(text or "")).split())[:MAX_TITLE_CHARS]


def feed_kind_and_title(body: bytes) -> tuple[str, str] | None:
    """``(kind, title)`` when ``body`` is a feed (RSS, RDF, Atom or JSON Feed), else None.

    >>> feed_kind_and_title(b'<rss version="2.0"><channel><title>Daily</title></channel></rss>')
    ('rss', 'Daily')
    >>> feed_kind_and_title(b'<!doctype html><html><title>x</title></html>') is None
    True
    """
    text = body.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            return None
        if isinstance(doc, dict) and str(doc.get("version", "")).startswith("https://jsonfeed.org/version/"):
            return "json", _clean(doc.get("title"))
        return None
    if not text.startswith(b"<"):
        return None
    try:
        root = SafeET.fromstring(text)
    except (SafeET.ParseError, DefusedXmlException, ValueError, RecursionError):
        return None
    tag = root.tag.rsplit("}", 1)[-1].lower()
    if tag == "feed":
        title = next((c.text for c in root if c.tag.rsplit("}", 1)[-1] == "title"), "")
        return "atom", _clean(title)
    if tag in ("rss", "rdf"):
        channel = next((c for c in root if c.tag.rsplit("}", 1)[-1] == "channel"), None)
        title = next((c.text for c in channel if c.tag.rsplit("}", 1)[-1] == "title"), "") if channel is not None else ""
        return "rss", _clean(title)
    return None


class _FeedLinks(html.parser.HTMLParser):
    """The feeds a page names (``<link rel="alternate" type=... href=...>``) and its title, up to ``MAX_TAGS`` tags."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.title = ""
        self._tags = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._tags += 1
        if self._tags > MAX_TAGS:
            raise _Enough
        values = {k.lower(): (v or "") for k, v in attrs}
        if tag == "link" and "alternate" in values.get("rel", "").lower().split() and \
                values.get("type", "").split(";")[0].strip().lower() in FEED_LINK_TYPES and values.get("href"):
            self.links.append(values["href"].strip())
        self._in_title = tag == "title" and not self.title

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data


class _Enough(Exception):
    pass


def feed_links(page: bytes, base_url: str) -> tuple[list[str], str]:
    """The absolute addresses of the feeds a page names (its order, each once) and its title."""
    parser = _FeedLinks()
    try:
        parser.feed(page.decode("utf-8", "replace"))
        parser.close()
    except _Enough:
        pass
    return list(dict.fromkeys(urljoin(base_url, link) for link in parser.links)), _clean(parser.title)


def discover_feed(url: str, *, private_networks: tuple[str, ...], deadline_seconds: float,
                  user_agent: str) -> DiscoveredFeed:
    """The feed at ``url``, or the first feed the page at ``url`` names. Raises SourceRefusedError."""
    start = check_source_url(url)
    deadline = time.monotonic() + deadline_seconds
    with _client(private_networks, deadline_seconds, user_agent) as client:
        first = _fetch(client, start, deadline)
        found = feed_kind_and_title(first.body)
        if found is not None:
            kind, title = found
            parts = urlsplit(first.url)
            return DiscoveredFeed(first.url, f"{parts.scheme}://{parts.netloc}/", title or parts.netloc, kind)
        links, page_title = feed_links(first.body, first.url)
        for link in links[:MAX_CANDIDATES]:
            try:
                candidate = _fetch(client, link, deadline)
            except SourceRefusedError as e:
                if e.status == 502 or "not public" in str(e):
                    raise
                continue
            found = feed_kind_and_title(candidate.body)
            if found is not None:
                kind, title = found
                return DiscoveredFeed(candidate.url, first.url, title or page_title or urlsplit(first.url).netloc,
                                      kind)
    raise SourceRefusedError("no feed here: the address is neither a feed nor a page naming one "
                             "(<link rel=\"alternate\" type=\"application/rss+xml\">)")
