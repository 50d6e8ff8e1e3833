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
import socketserver
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from replay.corpus import (
    CorpusArticle,
    Publisher,
    ReplayArticle,
    build_publishers,
    build_schedule,
    load_corpus,
    sample_corpus,
)
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
PUBLISHERS_CSV_COLUMNS = ("publisher_id", "name", "domain", "base_url", "region", "language", "tier",
                          "authority", "paywalled", "opted_out", "feed_url", "section")

ClockMode = Literal["manual", "speed"]
PathKind = Literal["feed", "page", "robots", "sitemap", "not_found"]


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
    ) -> ReplaySite:
        """Load clustering JSONL files and build a site over them (not started).

        Args:
            paths: corpus files (``clustering/*.jsonl`` format).
            seed: drives publisher names, assignment, times and reprints.
            start: simulated time at which the clock starts (timezone-aware).
            span_hours: events start spread over this long after ``start``.
            limit: keep at most this many corpus articles (a seeded-hash sample), before reprints.
            speed: None for a manual clock; else simulated seconds per wall second.
        """
        corpus = sample_corpus(load_corpus([Path(p) for p in paths]), seed=seed, limit=limit)
        return cls(corpus, seed=seed, start=start, span_hours=span_hours, speed=speed)

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

    def stop(self) -> None:
        """Stop serving and close every socket (safe to call twice)."""
        servers, self._servers = self._servers, []
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
        return self._clock.set(when.astimezone(UTC))

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
        doc = _cached(render(publisher, newest, updated_at), updated_at, content_type)
        with self._lock:
            self._cache[key] = doc
        return doc

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
                             p.section])
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
        if self.server.publisher is not None or urlsplit(self.path).path != "/_replay/clock":
            self._send(405 if self.server.publisher is None else 404, b"", "text/plain")
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
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
        elif path == "/sitemap.xml":
            kind = "sitemap"
            released = site.released(pid)
            updated_at = released[-1].published_at if released else site._start
            doc = _cached(render_sitemap(released), updated_at, "application/xml; charset=utf-8")
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

    def _send(self, status: int, body: bytes, content_type: str, doc: _Cached | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if doc is not None:
            self.send_header("ETag", doc.etag)
            self.send_header("Last-Modified", format_datetime(doc.last_modified, usegmt=True))
        self.end_headers()
        if not getattr(self, "_head", False):
            self.wfile.write(body)
