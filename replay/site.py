"""The replay HTTP server: one loopback host per publisher plus a control host, on one port.

Each publisher is served at ``127.0.1.{i}:{port}`` so per-host politeness and robots.txt are
real; admin endpoints live on ``127.0.0.1:{port}/_replay/``. One handler class serves every
socket and dispatches on the address the request arrived at.
"""

from __future__ import annotations

import bisect
import csv
import errno
import hashlib
import io
import json
import logging
import re
import socketserver
import struct
import threading
import time
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from replay.corpus import (
    CorpusArticle,
    Publisher,
    ReplayArticle,
    build_publishers,
    build_schedule,
    load_corpus,
    sample_corpus,
)
from replay.hostile import HOSTILE_PATH, hostile_items, hostile_page
from replay.hub import Hub
from replay.render import (
    FEED_SIZE,
    render_atom,
    render_page,
    render_robots,
    render_rss,
    render_sitemap,
)

logger = logging.getLogger(__name__)

CONTROL_HOST = "127.0.0.1"
RELATED_STORIES = 4
BIND_ATTEMPTS = 20
POLL_INTERVAL_SECONDS = 0.1
HUB_PATH = "/hub"
HUB_TICK_SECONDS = 1.0
"""With a speed clock, the hub looks for newly released articles this often (wall time)."""
PUBLISHERS_CSV_COLUMNS = ("publisher_id", "name", "domain", "base_url", "region", "language", "tier",
                          "authority", "paywalled", "opted_out", "feed_url", "section")

ClockMode = Literal["manual", "speed"]
PathKind = Literal["feed", "page", "robots", "sitemap", "not_found"]
Fault = Literal["timeout", "slow_drip", "http_500", "http_503", "http_429", "redirect_loop", "gzip_bomb",
                "billion_laughs", "wrong_charset", "huge_feed", "garbage_dates", "pages_503", "hostile_pages"]
FAULTS: tuple[Fault, ...] = ("timeout", "slow_drip", "http_500", "http_503", "http_429", "redirect_loop",
                             "gzip_bomb", "billion_laughs", "wrong_charset", "huge_feed", "garbage_dates",
                             "pages_503", "hostile_pages")
PAGE_FAULTS: frozenset[Fault] = frozenset({"pages_503", "hostile_pages"})
"""Faults of the article pages: the feeds answer as usual (``hostile_pages`` adds its items to them)."""
FAULT_HANG_SECONDS = 30.0
"""A ``timeout`` feed holds the connection this long (or until the fault is cleared) without answering."""
DRIP_BYTES = 16
DRIP_INTERVAL_SECONDS = 0.2
RETRY_AFTER_429_SECONDS = 600
RETRY_AFTER_503_SECONDS = 120
HUGE_FEED_BYTES = 10_500_000
BOMB_INFLATED_BYTES = 64 * 1024 * 1024
_BILLION_LAUGHS = (
    '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE rss [\n <!ENTITY lol "lol">\n'
    + "".join(f' <!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">\n' for i in range(1, 10))
    + "]>\n"
)


class ClockError(ValueError):
    """The simulated clock was asked to move backward."""

    def __init__(self, now: datetime, requested: datetime) -> None:
        super().__init__(f"clock only moves forward: now={now.isoformat()} requested={requested.isoformat()}")
        self.now = now
        self.requested = requested


class _Clock:
    """Simulated time: moved by hand (manual) or running at ``speed`` times wall time."""

    def __init__(self, start: datetime, speed: float | None) -> None:
        self._lock = threading.Lock()
        self._anchor = start
        self._speed = speed
        self._wall_anchor: float | None = None

    @property
    def mode(self) -> ClockMode:
        return "manual" if self._speed is None else "speed"

    def run(self) -> None:
        """Start the speed clock (no-op in manual mode)."""
        with self._lock:
            if self._speed is not None and self._wall_anchor is None:
                self._wall_anchor = time.monotonic()

    def now(self) -> datetime:
        with self._lock:
            return self._now_locked()

    def _now_locked(self) -> datetime:
        if self._speed is None or self._wall_anchor is None:
            return self._anchor
        elapsed = (time.monotonic() - self._wall_anchor) * self._speed
        return self._anchor + timedelta(seconds=elapsed)

    def set(self, when: datetime) -> datetime:
        with self._lock:
            now = self._now_locked()
            if when < now:
                raise ClockError(now, when)
            self._anchor = when
            if self._wall_anchor is not None:
                self._wall_anchor = time.monotonic()
            return when


@dataclass(frozen=True, slots=True)
class _Cached:
    body: bytes
    etag: str
    last_modified: datetime
    content_type: str


def _cached(body: bytes, last_modified: datetime, content_type: str) -> _Cached:
    etag = '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'
    return _Cached(body, etag, last_modified, content_type)


class _HostServer(ThreadingHTTPServer):
    """One listening socket; ``publisher`` is None for the control host."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # crawlers open many connections at once; the default backlog is 5

    def __init__(self, address: tuple[str, int], site: ReplaySite, publisher: Publisher | None) -> None:
        self.site = site
        self.publisher = publisher
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(), a reverse DNS lookup per socket; skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class ReplaySite:
    """A corpus served as about 20 publishers on loopback, released on a simulated clock.

    Build with ``from_corpora``, then ``start()``. ``publishers`` and ``articles`` (the schedule,
    reprints included) are available once the port is known, i.e. after ``start()``.
    """

    def __init__(
        self,
        corpus: Sequence[CorpusArticle],
        *,
        seed: int,
        start: datetime,
        span_hours: float = 6.0,
        speed: float | None = None,
        faults: Mapping[str, Fault] | None = None,
    ) -> None:
        if start.tzinfo is None:
            raise ValueError("start must be timezone-aware")
        if speed is not None and speed <= 0:
            raise ValueError(f"speed must be positive, got {speed}")
        self._corpus = tuple(corpus)
        self._seed = seed
        self._start = start.astimezone(UTC)
        self._span_hours = span_hours
        self._clock = _Clock(self._start, speed)
        self._servers: list[_HostServer] = []
        self._threads: list[threading.Thread] = []
        self._port: int | None = None
        self._publishers: tuple[Publisher, ...] = ()
        self._articles: tuple[ReplayArticle, ...] = ()
        self._by_publisher: dict[str, list[ReplayArticle]] = {}
        self._times: dict[str, list[datetime]] = {}
        self._by_path: dict[tuple[str, str], ReplayArticle] = {}
        self._cache: dict[tuple[str, ...], _Cached] = {}
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()
        self._faults: dict[str, Fault] = {}
        self._fault_changed = threading.Condition()
        self._stopping = threading.Event()
        self._hub: Hub | None = None
        self._topics: dict[str, tuple[Publisher, Literal["rss", "atom"]]] = {}
        self.set_faults(dict(faults or {}))

    @classmethod
    def from_corpora(
        cls,
        paths: Sequence[Path | str],
        *,
        seed: int = 7,
        start: datetime,
        span_hours: float = 6.0,
        limit: int | None = None,
        speed: float | None = None,
        faults: Mapping[str, Fault] | None = None,
    ) -> ReplaySite:
        """Load clustering JSONL files and build a site over them (not started).

        Args:
            paths: corpus files (``clustering/*.jsonl`` format).
            seed: drives publisher names, assignment, times and reprints.
            start: simulated time at which the clock starts (timezone-aware).
            span_hours: events start spread over this long after ``start``.
            limit: keep at most this many corpus articles (a seeded-hash sample), before reprints.
            speed: None for a manual clock; else simulated seconds per wall second.
            faults: publisher id -> fault served on that publisher's feeds (see ``set_faults``).
        """
        corpus = sample_corpus(load_corpus([Path(p) for p in paths]), seed=seed, limit=limit)
        return cls(corpus, seed=seed, start=start, span_hours=span_hours, speed=speed, faults=faults)

    # --- lifecycle -----------------------------------------------------------------------

    def start(self, port: int = 0) -> None:
        """Bind every host on one port (0 picks a free one) and serve in background threads.

        Raises:
            OSError: ``port`` was given and is taken, or no free port was found.
            RuntimeError: already started.
        """
        if self._servers:
            raise RuntimeError("ReplaySite already started")
        attempts = BIND_ATTEMPTS if port == 0 else 1
        for attempt in range(attempts):
            try:
                self._bind_all(port)
                break
            except OSError as e:
                if e.errno != errno.EADDRINUSE or attempt == attempts - 1:
                    raise
                logger.debug("replay_bind_retry attempt=%d", attempt)
        for server in self._servers:
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": POLL_INTERVAL_SECONDS},
                name=f"replay-{server.server_name}", daemon=True,
            )
            thread.start()
            self._threads.append(thread)
        self._clock.run()
        if self._clock.mode == "speed":
            ticker = threading.Thread(target=self._tick_hub, name="replay-hub-tick", daemon=True)
            ticker.start()
            self._threads.append(ticker)
        logger.info("replay_started control_url=%s publishers=%d articles=%d",
                    self.control_url, len(self._publishers), len(self._articles))

    def _bind_all(self, port: int) -> None:
        servers: list[_HostServer] = []
        try:
            control = _HostServer((CONTROL_HOST, port), self, None)
            servers.append(control)
            actual = control.server_address[1]
            languages = {a.language for a in self._corpus}
            publishers = build_publishers(self._seed, actual, languages)
            for publisher in publishers:
                servers.append(_HostServer((publisher.host, actual), self, publisher))
        except BaseException:
            for server in servers:
                server.server_close()
            raise
        self._install_schedule(actual, publishers)
        self._servers = servers

    def _install_schedule(self, port: int, publishers: tuple[Publisher, ...]) -> None:
        articles = build_schedule(self._corpus, publishers, seed=self._seed, start=self._start,
                                  span_hours=self._span_hours)
        by_publisher: dict[str, list[ReplayArticle]] = {p.publisher_id: [] for p in publishers}
        for article in articles:  # already sorted by (published_at, article_id)
            by_publisher[article.publisher_id].append(article)
        host_of = {p.publisher_id: p.host for p in publishers}
        self._port = port
        self._publishers = publishers
        self._articles = articles
        self._by_publisher = by_publisher
        self._times = {pid: [a.published_at for a in items] for pid, items in by_publisher.items()}
        self._by_path = {(host_of[a.publisher_id], urlsplit(a.url).path): a for a in articles}
        self._cache = {}
        self._topics = {}
        for p in publishers:
            self._topics[p.rss_url] = (p, "rss")
            self._topics[p.atom_url] = (p, "atom")
        self._hub = Hub(f"http://{CONTROL_HOST}:{port}{HUB_PATH}", self._clock.now, self._hub_content)

    def _hub_content(self, topic: str) -> tuple[bytes, str, int] | None:
        """A topic's current document and version (its count of released articles), for the hub."""
        found = self._topics.get(topic)
        if found is None:
            return None
        publisher, fmt = found
        doc = self._feed(publisher, fmt)
        return doc.body, doc.content_type, len(self.released(publisher.publisher_id))

    def _tick_hub(self) -> None:
        while not self._stopping.wait(HUB_TICK_SECONDS):
            if self._hub is not None:
                self._hub.distribute()

    def stop(self) -> None:
        """Stop serving and close every socket (safe to call twice)."""
        servers, self._servers = self._servers, []
        self._stopping.set()
        with self._fault_changed:
            self._fault_changed.notify_all()
        # shutdown() waits for a poll cycle; do all hosts at once.
        stoppers = [threading.Thread(target=s.shutdown) for s in servers]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()
        for server in servers:
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads = []

    def __enter__(self) -> ReplaySite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- public state --------------------------------------------------------------------

    def _require_started(self) -> None:
        if self._port is None:
            raise RuntimeError("ReplaySite not started: the port, and so every URL, is not known yet")

    @property
    def port(self) -> int:
        self._require_started()
        assert self._port is not None
        return self._port

    @property
    def control_url(self) -> str:
        return f"http://{CONTROL_HOST}:{self.port}"

    @property
    def publishers(self) -> tuple[Publisher, ...]:
        self._require_started()
        return self._publishers

    @property
    def articles(self) -> tuple[ReplayArticle, ...]:
        """The whole schedule, reprints included, sorted by (published_at, article_id)."""
        self._require_started()
        return self._articles

    @property
    def now(self) -> datetime:
        return self._clock.now()

    @property
    def hub(self) -> Hub:
        """The site's WebSub hub (advertised by every feed as ``rel="hub"``)."""
        self._require_started()
        assert self._hub is not None
        return self._hub

    @property
    def hub_url(self) -> str:
        return self.hub.hub_url

    @property
    def clock_mode(self) -> ClockMode:
        return self._clock.mode

    def set_clock(self, when: datetime) -> datetime:
        """Move the simulated clock to ``when``.

        Raises:
            ValueError: ``when`` is naive.
            ClockError: ``when`` is earlier than now.
        """
        if when.tzinfo is None:
            raise ValueError("clock time must be timezone-aware")
        moved = self._clock.set(when.astimezone(UTC))
        if self._hub is not None:
            # Newly released articles go out to the hub's subscribers before the move is answered,
            # so a test (or the demo) that moves the clock and then ingests sees the pushes.
            self._hub.distribute()
        return moved

    @property
    def faults(self) -> dict[str, Fault]:
        with self._fault_changed:
            return dict(self._faults)

    def set_faults(self, faults: Mapping[str, Fault | None]) -> dict[str, Fault]:
        """Set (or, with None, clear) the fault each publisher's feeds serve; returns every fault.

        Faults: ``timeout`` (no answer for FAULT_HANG_SECONDS), ``slow_drip`` (the body at
        DRIP_BYTES per DRIP_INTERVAL_SECONDS), ``http_500``, ``http_503`` (Retry-After 120),
        ``http_429`` (Retry-After 600), ``redirect_loop``, ``gzip_bomb`` (64 MiB of zeros),
        ``billion_laughs`` (the feed behind nested entity declarations), ``wrong_charset`` (cp1252
        bytes declared as UTF-8), ``huge_feed`` (the feed padded past 10 MB), ``garbage_dates``,
        ``pages_503`` (the feeds are fine, the article pages answer 503) and ``hostile_pages`` (the RSS
        feed also lists the hostile items of :mod:`replay.hostile`, whose pages are served as built).

        Raises:
            ValueError: an unknown fault name.
        """
        unknown = {str(f) for f in faults.values() if f is not None and f not in FAULTS}
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {', '.join(FAULTS)}")
        with self._fault_changed:
            for publisher_id, fault in faults.items():
                if fault is None:
                    self._faults.pop(publisher_id, None)
                else:
                    self._faults[publisher_id] = fault
            self._fault_changed.notify_all()
            return dict(self._faults)

    def _hang(self, publisher_id: str, fault: Fault, seconds: float) -> None:
        """Wait until ``seconds`` pass, the fault is cleared or changed, or the site stops."""
        deadline = time.monotonic() + seconds
        with self._fault_changed:
            while not self._stopping.is_set() and self._faults.get(publisher_id) == fault:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._fault_changed.wait(left)

    def released(self, publisher_id: str, now: datetime | None = None) -> list[ReplayArticle]:
        """A publisher's articles released at ``now`` (default: the clock), oldest first."""
        self._require_started()
        when = self.now if now is None else now
        count = bisect.bisect_right(self._times[publisher_id], when)
        return self._by_publisher[publisher_id][:count]

    def stats(self) -> dict[str, object]:
        """Request counts per publisher and path kind (admin requests are not counted)."""
        with self._lock:
            counts = dict(self._counts)
        kinds = ("feed", "page", "robots", "sitemap", "not_found", "not_modified")
        hosts: dict[str, dict[str, int | str]] = {}
        totals = dict.fromkeys(kinds, 0)
        for p in self._publishers:
            row: dict[str, int | str] = {"host": p.host}
            for kind in kinds:
                n = counts.get((p.publisher_id, kind), 0)
                row[kind] = n
                totals[kind] += n
            hosts[p.publisher_id] = row
        # A 304 is also counted under its path kind, so it is not added to the total twice.
        total = sum(totals.values()) - totals["not_modified"]
        return {"total": total, "by_kind": totals, "hosts": hosts}

    def _count(self, publisher_id: str, kind: str) -> None:
        with self._lock:
            self._counts[(publisher_id, kind)] += 1

    # --- documents -----------------------------------------------------------------------

    def _feed(self, publisher: Publisher, fmt: Literal["rss", "atom"]) -> _Cached:
        released = self.released(publisher.publisher_id)
        key = ("feed", fmt, publisher.publisher_id, str(len(released)))
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        newest = list(reversed(released[-FEED_SIZE:]))
        updated_at = newest[0].published_at if newest else self._start
        render = render_rss if fmt == "rss" else render_atom
        content_type = f"application/{fmt}+xml; charset=utf-8"
        hub_url = self._hub.hub_url if self._hub is not None else None
        doc = _cached(render(publisher, newest, updated_at, hub_url=hub_url), updated_at, content_type)
        with self._lock:
            self._cache[key] = doc
        return doc

    def _hostile_feed(self, publisher: Publisher, doc: _Cached) -> _Cached:
        """The RSS feed ``doc`` with the hostile items first (published at the feed's own time)."""
        key = ("hostile", doc.etag)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        text = doc.body.decode("utf-8")
        at = text.find("<item>") if "<item>" in text else text.find("</channel>")
        body = (text[:at] + hostile_items(publisher.base_url, doc.last_modified) + text[at:]).encode("utf-8")
        hostile = _cached(body, doc.last_modified, doc.content_type)
        with self._lock:
            self._cache[key] = hostile
        return hostile

    def _page(self, publisher: Publisher, article: ReplayArticle) -> _Cached:
        key = ("page", article.article_id)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        items = self._by_publisher[publisher.publisher_id]
        index = items.index(article)
        related = list(reversed([a for a in items[:index] if a.published_at < article.published_at]))
        doc = _cached(render_page(publisher, article, related[:RELATED_STORIES]), article.published_at,
                      "text/html; charset=utf-8")
        with self._lock:
            self._cache[key] = doc
        return doc

    def _publishers_json(self) -> list[dict[str, object]]:
        return [
            {
                "publisher_id": p.publisher_id, "name": p.name, "domain": p.domain, "host": p.host,
                "base_url": p.base_url, "region": p.region, "language": p.language, "tier": p.tier,
                "authority": p.authority, "paywalled": p.paywalled, "opted_out": p.opted_out,
                "is_wire": p.is_wire, "section": p.section, "feed_url": p.rss_url,
                "feeds": {"rss": p.rss_url, "atom": p.atom_url},
            }
            for p in self._publishers
        ]

    def _publishers_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(PUBLISHERS_CSV_COLUMNS)
        for p in self._publishers:
            writer.writerow([p.publisher_id, p.name, p.domain, p.base_url, p.region, p.language, p.tier,
                             p.authority, str(p.paywalled).lower(), str(p.opted_out).lower(), p.rss_url,
                             p.section or ""])
        return out.getvalue()

    def _schedule_json(self) -> list[dict[str, object]]:
        now = self.now
        return [
            {
                "article_id": a.article_id, "publisher_id": a.publisher_id, "url": a.url,
                "feed_url": a.feed_url, "title": a.title, "language": a.language,
                "published_at": a.published_at.isoformat(), "event": a.event, "reprint_of": a.reprint_of,
                "edits": list(a.edits), "released": a.published_at <= now,
            }
            for a in self._articles
        ]


_BOMB: list[bytes] = []
_DATE_RE = re.compile(rb"<(pubDate|published|updated)>[^<]*</(?:pubDate|published|updated)>")


def _gzip_bomb() -> bytes:
    """At least BOMB_INFLATED_BYTES of zeros, gzipped (about 420 KB on the wire); built once.

    Written by hand rather than by ``gzip.compress``: deflating 64 MiB took 3 s on a loaded
    2-core machine, inside the first request for it, so the client's deadline ran out and the
    fault read as ``timeout`` instead of ``too_large``. The stream is one fixed-Huffman block
    (RFC 1951 §3.2.6): a literal zero, then matches of 258 bytes at distance 1, eight of which
    fill 13 whole bytes, so the block is a few prefix bytes and one 13-byte unit repeated.
    """
    if not _BOMB:
        _BOMB.append(_gzip_of_zeros(BOMB_INFLATED_BYTES))
    return _BOMB[0]


def _gzip_of_zeros(at_least: int) -> bytes:
    bits: list[int] = []

    def value(v: int, n: int) -> None:  # header fields: least significant bit first
        bits.extend((v >> i) & 1 for i in range(n))

    def code(c: int, n: int) -> None:  # Huffman codes: most significant bit first
        bits.extend((c >> (n - 1 - i)) & 1 for i in range(n))

    def match() -> None:
        code(0b11000101, 8)  # length 258: fixed code of symbol 285, no extra bits
        code(0, 5)  # distance 1: fixed code 0, no extra bits

    value(1, 1)  # the last block
    value(1, 2)  # fixed Huffman codes
    code(0b00110000, 8)  # literal 0
    match()  # 24 bits so far: whole bytes
    prefix, bits[:] = _packed(bits), []
    for _ in range(8):
        match()
    unit = _packed(bits)
    units = max(0, -(-(at_least - 1 - 258) // (258 * 8)))
    size = 1 + 258 * (1 + 8 * units)
    crc, zeros, left = 0, bytes(1 << 20), size
    while left:
        crc, left = zlib.crc32(zeros[: min(left, len(zeros))], crc), left - min(left, len(zeros))
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # gzip, deflate, no name, no mtime (RFC 1952)
    end_of_block = b"\x00"  # symbol 256 (seven zero bits), padded to the byte
    return header + prefix + unit * units + end_of_block + struct.pack("<II", crc, size & 0xFFFFFFFF)


def _packed(bits: list[int]) -> bytes:
    """Deflate's bit order: the first bit is the least significant bit of the first byte."""
    assert len(bits) % 8 == 0
    return bytes(sum(bit << j for j, bit in enumerate(bits[i : i + 8])) for i in range(0, len(bits), 8))


def _faulty_feed(body: bytes, fault: Fault) -> bytes:
    """The feed document, spoiled the way ``fault`` says (its items stay in it)."""
    text = body.decode("utf-8")
    decl, _, rest = text.partition("?>") if text.startswith("<?xml") else ("", "", text)
    if fault == "billion_laughs":
        return (_BILLION_LAUGHS + rest.lstrip()).replace("</title>", " &lol9;</title>", 1).encode()
    if fault == "wrong_charset":
        marked = rest.replace("</title>", " \u2014 caf\u00e9 \u00a9</title>", 1)
        return (decl + "?>" + marked if decl else marked).encode("cp1252", errors="replace")
    if fault == "garbage_dates":
        return _DATE_RE.sub(lambda m: b"<" + m.group(1) + b">32 Foo 20x6 99:99:99 ZZZ</" + m.group(1) + b">", body)
    if fault == "huge_feed":
        padding = "<!-- " + "x" * (HUGE_FEED_BYTES - len(body)) + " -->"
        head, sep, tail = text.partition(">\n")
        return (head + sep + padding + tail).encode()
    raise ValueError(f"not a document fault: {fault}")


def _parse_time(value: str) -> datetime:
    when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    if when.tzinfo is None:
        raise ValueError("time must carry a UTC offset")
    return when.astimezone(UTC)


class _Handler(BaseHTTPRequestHandler):
    server: _HostServer
    protocol_version = "HTTP/1.1"
    server_version = "newsroom-replay/0.1"
    timeout = 15
    disable_nagle_algorithm = True  # headers and body are separate writes; avoid the 40 ms delayed-ACK stall

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        logger.debug("replay_request host=%s " + format, self.server.server_name, *args)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def do_POST(self) -> None:
        self._head = False  # the handler lives as long as a keep-alive connection
        path = urlsplit(self.path).path
        if self.server.publisher is not None or path not in ("/_replay/clock", "/_replay/faults", HUB_PATH):
            self._send(405 if self.server.publisher is None else 404, b"", "text/plain")
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path == HUB_PATH:
            form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", errors="replace")).items()}
            status, message = self.server.site.hub.handle_request(form)
            self._send(status, (message + "\n").encode(), "text/plain; charset=utf-8")
            return
        if path == "/_replay/faults":
            self._post_faults(raw)
            return
        try:
            payload = json.loads(raw or b"{}")
            when = _parse_time(str(payload["now"]))
        except (ValueError, KeyError, TypeError) as e:
            self._send_json(400, {"error": f"expected JSON {{\"now\": iso}}: {e}"})
            return
        try:
            self.server.site.set_clock(when)
        except ClockError as e:
            self._send_json(409, {"error": str(e), "now": e.now.isoformat()})
            return
        self._send_json(200, {"now": self.server.site.now.isoformat()})

    def _post_faults(self, raw: bytes) -> None:
        """``{publisher_id: fault or null}``: set or clear faults; answers with every fault."""
        try:
            payload = json.loads(raw or b"{}")
            if not isinstance(payload, dict):
                raise ValueError("expected a JSON object")
            faults = self.server.site.set_faults(payload)
        except ValueError as e:
            self._send_json(400, {"error": f"expected JSON {{publisher_id: fault|null}}: {e}", "faults": list(FAULTS)})
            return
        self._send_json(200, faults)

    # --- dispatch ------------------------------------------------------------------------

    def _dispatch(self, *, head: bool) -> None:
        self._head = head
        path = urlsplit(self.path).path
        publisher = self.server.publisher
        if publisher is None:
            self._control(path)
        else:
            self._publisher(publisher, path)

    def _control(self, path: str) -> None:
        site = self.server.site
        if path == "/_replay/clock":
            self._send_json(200, {"now": site.now.isoformat(), "mode": site.clock_mode})
        elif path == "/_replay/publishers":
            self._send_json(200, site._publishers_json())
        elif path == "/_replay/publishers.csv":
            self._send(200, site._publishers_csv().encode(), "text/csv; charset=utf-8")
        elif path == "/_replay/stats":
            self._send_json(200, site.stats())
        elif path == "/_replay/schedule":
            self._send_json(200, site._schedule_json())
        elif path == "/_replay/faults":
            self._send_json(200, site.faults)
        elif path == "/_replay/hub":
            self._send_json(200, {"hub_url": site.hub_url, "subscriptions": site.hub.subscriptions(),
                                  "counts": dict(site.hub.counts)})
        else:
            self._send_json(404, {"error": "not found"})

    def _publisher(self, publisher: Publisher, path: str) -> None:
        site = self.server.site
        pid = publisher.publisher_id
        doc: _Cached | None = None
        kind: PathKind = "not_found"
        if path == "/robots.txt":
            kind = "robots"
            doc = _cached(render_robots(publisher), site._start, "text/plain; charset=utf-8")
        elif path in ("/feeds/rss.xml", "/feeds/atom.xml"):
            kind = "feed"
            doc = site._feed(publisher, "rss" if path.endswith("rss.xml") else "atom")
            fault = site.faults.get(pid)
            if fault == "hostile_pages" and path.endswith("rss.xml"):
                doc = site._hostile_feed(publisher, doc)
            if fault is not None and fault not in PAGE_FAULTS:
                site._count(pid, kind)
                site._count(pid, "fault")
                self._serve_fault(publisher, fault, doc)
                return
        elif path == "/sitemap.xml":
            kind = "sitemap"
            released = site.released(pid)
            updated_at = released[-1].published_at if released else site._start
            doc = _cached(render_sitemap(released, publisher), updated_at, "application/xml; charset=utf-8")
        elif path.startswith(HOSTILE_PATH) and site.faults.get(pid) == "hostile_pages":
            site._count(pid, "fault")
            try:
                body, headers = hostile_page(path.removeprefix(HOSTILE_PATH))
            except KeyError:
                body, headers = b"", {}
            try:
                if not body:
                    self._send(404, b"no such hostile page\n", "text/plain; charset=utf-8")
                else:
                    self._send(200, body, "text/html; charset=utf-8", extra=headers)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client stopped reading at its cap: expected
            return
        elif path.startswith("/articles/") and site.faults.get(pid) == "pages_503":
            site._count(pid, "fault")
            self._send(503, b"replay fault pages_503\n", "text/plain; charset=utf-8")
            return
        elif path.startswith("/articles/"):
            article = site._by_path.get((publisher.host, path))
            if article is not None and article.published_at <= site.now:
                kind = "page"
                doc = site._page(publisher, article)
        site._count(pid, kind)
        if doc is None:
            self._send(404, b"<!DOCTYPE html><title>Not found</title><h1>Page not found</h1>\n",
                       "text/html; charset=utf-8")
            return
        if self._is_not_modified(doc):
            site._count(pid, "not_modified")
            self.send_response(304)
            self.send_header("ETag", doc.etag)
            self.send_header("Last-Modified", format_datetime(doc.last_modified, usegmt=True))
            self.end_headers()
            return
        self._send(200, doc.body, doc.content_type, doc)

    def _serve_fault(self, publisher: Publisher, fault: Fault, doc: _Cached) -> None:
        try:
            self._write_fault(publisher, fault, doc)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (caps, timeouts): expected

    def _write_fault(self, publisher: Publisher, fault: Fault, doc: _Cached) -> None:
        site = self.server.site
        if fault == "timeout":
            site._hang(publisher.publisher_id, fault, FAULT_HANG_SECONDS)
            self.close_connection = True
            return
        if fault == "slow_drip":
            self._drip(publisher, doc)
        elif fault in ("http_500", "http_503", "http_429"):
            status = int(fault.removeprefix("http_"))
            retry = {503: RETRY_AFTER_503_SECONDS, 429: RETRY_AFTER_429_SECONDS}.get(status)
            self._send(status, f"replay fault {fault}\n".encode(), "text/plain; charset=utf-8",
                       extra={"Retry-After": str(retry)} if retry else None)
        elif fault == "redirect_loop":
            hop = int((urlsplit(self.path).query.partition("hop=")[2] or "0").split("&")[0] or 0) + 1
            self._send(302, b"", "text/plain", extra={"Location": f"{urlsplit(self.path).path}?hop={hop}"})
        elif fault == "gzip_bomb":
            self._send(200, _gzip_bomb(), doc.content_type, extra={"Content-Encoding": "gzip"})
        else:
            body = _faulty_feed(doc.body, fault)
            content_type = doc.content_type
            self._send(200, body, content_type, _cached(body, doc.last_modified, content_type))

    def _drip(self, publisher: Publisher, doc: _Cached) -> None:
        self.send_response(200)
        self.send_header("Content-Type", doc.content_type)
        self.send_header("Content-Length", str(len(doc.body)))
        self.end_headers()
        self.close_connection = True
        site = self.server.site
        try:
            for start in range(0, len(doc.body), DRIP_BYTES):
                if site._stopping.is_set() or site.faults.get(publisher.publisher_id) != "slow_drip":
                    return  # cut short: the client sees a truncated body
                self.wfile.write(doc.body[start : start + DRIP_BYTES])
                self.wfile.flush()
                time.sleep(DRIP_INTERVAL_SECONDS)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _is_not_modified(self, doc: _Cached) -> bool:
        # RFC 9110 13.1.2-3: If-None-Match uses weak comparison; If-Modified-Since only counts
        # when If-None-Match is absent.
        inm = self.headers.get("If-None-Match")
        if inm is not None:
            tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
            return "*" in tags or doc.etag in tags
        ims = self.headers.get("If-Modified-Since")
        if ims is None:
            return False
        try:
            since = parsedate_to_datetime(ims)
        except (TypeError, ValueError):
            return False
        if since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
        return int(doc.last_modified.timestamp()) <= int(since.timestamp())

    def _send_json(self, status: int, payload: object) -> None:
        body = json.dumps(payload, ensure_ascii=False, indent=1).encode("utf-8")
        self._send(status, body, "application/json")

    def _send(self, status: int, body: bytes, content_type: str, doc: _Cached | None = None,
              extra: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if doc is not None:
            self.send_header("ETag", doc.etag)
            self.send_header("Last-Modified", format_datetime(doc.last_modified, usegmt=True))
        self.end_headers()
        if not getattr(self, "_head", False):
            self.wfile.write(body)
