"""A lightweight synthetic publisher farm for throughput benchmarks: many hosts, many small feeds.

``hosts`` loopback hosts (127.0.1.1-100, 127.0.2.1-100, ...), each serving ``feeds_per_host`` RSS
feeds at ``/feeds/{n}.xml`` on one shared port. A seeded share of the feeds (``changed_share``)
publishes a new item on every request; the rest never change and answer a matching
``If-None-Match`` with 304. The server counts requests and the peak number of requests in flight
per host, so a benchmark can check politeness from the server's side. Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOSTS_PER_BLOCK = 100
EPOCH = datetime(2026, 12, 1, tzinfo=UTC)


def synthetic_host(index: int) -> str:
    """The loopback address of host ``index`` (0-based): 100 per 127.0.N block, from 127.0.1.1.

    >>> synthetic_host(0), synthetic_host(99), synthetic_host(100), synthetic_host(199)
    ('127.0.1.1', '127.0.1.100', '127.0.2.1', '127.0.2.100')
    """
    if not 0 <= index < HOSTS_PER_BLOCK * 254:
        raise ValueError(f"host index out of range: {index}")
    return f"127.0.{1 + index // HOSTS_PER_BLOCK}.{1 + index % HOSTS_PER_BLOCK}"


def _unit(seed: int, *parts: object) -> float:
    digest = hashlib.blake2b("\x1f".join(map(str, (seed, *parts))).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class _HostState:
    __slots__ = ("connections", "in_flight", "lock", "peak", "requests")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.requests = 0
        self.connections = 0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], farm: SyntheticSite, host_index: int | None) -> None:
        self.farm = farm
        self.host_index = host_index
        self.host_state = _HostState()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.host_state.lock:
            self.host_state.connections += 1  # one handler thread per accepted connection
        super().process_request(request, client_address)

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # no reverse DNS lookup per socket
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])


class SyntheticSite:
    """``hosts`` x ``feeds_per_host`` feeds; ``changed_share`` of them change on every request."""

    def __init__(self, *, hosts: int = 200, feeds_per_host: int = 25, changed_share: float = 0.2,
                 items_per_feed: int = 20, seed: int = 7) -> None:
        if hosts < 1 or feeds_per_host < 1 or items_per_feed < 1:
            raise ValueError("hosts, feeds_per_host and items_per_feed must be positive")
        if not 0.0 <= changed_share <= 1.0:
            raise ValueError("changed_share must be in [0, 1]")
        self.hosts = hosts
        self.feeds_per_host = feeds_per_host
        self.items_per_feed = items_per_feed
        self.changed = {(h, n) for h in range(hosts) for n in range(feeds_per_host)
                        if _unit(seed, "changed", h, n) < changed_share}
        self._versions: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()
        self._servers: list[_Server] = []
        self._threads: list[threading.Thread] = []
        self._port: int | None = None
        self._static: dict[tuple[int, int], bytes] = {}

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("SyntheticSite not started")
        return self._port

    @property
    def control_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def feed_urls(self) -> list[str]:
        return [f"http://{synthetic_host(h)}:{self.port}/feeds/{n}.xml"
                for h in range(self.hosts) for n in range(self.feeds_per_host)]

    def start(self, port: int = 0) -> None:
        control = _Server(("127.0.0.1", port), self, None)
        self._port = int(control.server_address[1])
        self._servers = [control] + [_Server((synthetic_host(h), self._port), self, h) for h in range(self.hosts)]
        for server in self._servers:
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        servers, self._servers = self._servers, []
        stoppers = [threading.Thread(target=s.shutdown) for s in servers]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()
        for s in servers:
            s.server_close()

    def __enter__(self) -> SyntheticSite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stats(self) -> dict[str, object]:
        """Requests and peak in-flight requests per host (as seen by the server)."""
        per_host = {s.server_name: {"requests": s.host_state.requests, "peak_in_flight": s.host_state.peak,
                                    "connections": s.host_state.connections}
                    for s in self._servers if s.host_index is not None}
        return {
            "requests": sum(h["requests"] for h in per_host.values()),
            "connections": sum(h["connections"] for h in per_host.values()),
            "max_in_flight_per_host": max((h["peak_in_flight"] for h in per_host.values()), default=0),
            "hosts": per_host,
        }

    def reset_stats(self) -> None:
        for s in self._servers:
            with s.host_state.lock:
                s.host_state.peak = s.host_state.requests = s.host_state.connections = 0

    def document(self, host: int, feed: int) -> tuple[str, bytes]:
        """The current (ETag, body) of a feed; a changing feed moves to its next version."""
        key = (host, feed)
        with self._lock:
            version = self._versions.get(key, 0)
            if key in self.changed:
                self._versions[key] = version + 1
            static = self._static.get(key)
        if static is None:
            static = self._render_items(host, feed, range(1, self.items_per_feed))
            with self._lock:
                self._static[key] = static
        if key not in self.changed:
            return f'"s{host}-{feed}"', self._wrap(host, feed, static)
        newest = self._render_items(host, feed, [-(version + 1)])
        return f'"c{host}-{feed}-{version}"', self._wrap(host, feed, newest + static)

    def _render_items(self, host: int, feed: int, numbers: object) -> bytes:
        parts = []
        for k in numbers:  # type: ignore[attr-defined]
            when = format_datetime(EPOCH - timedelta(minutes=7 * int(k)), usegmt=True)
            parts.append(f"<item><guid isPermaLink=\"false\">h{host}-f{feed}-i{k}</guid>"
                         f"<title>Item {k} of feed {feed} on host {host}</title>"
                         f"<description>Synthetic item {k}.</description><pubDate>{when}</pubDate></item>")
        return "".join(parts).encode()

    def _wrap(self, host: int, feed: int, items: bytes) -> bytes:
        head = (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel>'
                f"<title>Host {host} feed {feed}</title><link>http://{synthetic_host(host)}/</link>").encode()
        return head + items + b"</channel></rss>"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        server = self.server
        if server.host_index is None:
            body = json.dumps(server.farm.stats() if self.path.startswith("/_replay/stats")
                              else server.farm.feed_urls()).encode()
            self._send(200, body, "application/json")
            return
        state = server.host_state
        with state.lock:
            state.in_flight += 1
            state.requests += 1
            state.peak = max(state.peak, state.in_flight)
        try:
            self._feed(server.host_index)
        finally:
            with state.lock:
                state.in_flight -= 1

    def _feed(self, host: int) -> None:
        name = self.path.rsplit("/", 1)[-1]
        if not (self.path.startswith("/feeds/") and name.endswith(".xml") and name[:-4].isdigit()):
            self._send(404, b"not found", "text/plain")
            return
        feed = int(name[:-4])
        if feed >= self.server.farm.feeds_per_host:
            self._send(404, b"not found", "text/plain")
            return
        inm = self.headers.get("If-None-Match")
        if inm is not None and (host, feed) not in self.server.farm.changed and inm == f'"s{host}-{feed}"':
            self.send_response(304)
            self.send_header("ETag", inm)
            self.end_headers()
            return
        etag, body = self.server.farm.document(host, feed)
        self._send(200, body, "application/rss+xml; charset=utf-8", etag)

    def _send(self, status: int, body: bytes, content_type: str, etag: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if etag:
            self.send_header("ETag", etag)
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def synthetic_site(**kwargs: object) -> Iterator[SyntheticSite]:
    site = SyntheticSite(**kwargs)  # type: ignore[arg-type]
    site.start()
    try:
        yield site
    finally:
        site.stop()
