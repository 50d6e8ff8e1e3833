"""Safe fetching against real loopback servers: address checks, redirects, caps, conditional GET."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tasks.errors import FetchError
from tasks.http import fetch_url, make_client
from tasks.settings import IngestSettings

BOMB = gzip.compress(b"\0" * 20_000_000)


class _Handler(BaseHTTPRequestHandler):
    seen_headers: list[dict[str, str]] = []

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        _Handler.seen_headers.append({k.lower(): v for k, v in self.headers.items()})
        if self.path == "/feed":
            if self.headers.get("If-None-Match") == '"v1"':
                self._send(304, headers={"ETag": '"v1"'})
            else:
                self._send(200, b"<rss/>", {"ETag": '"v1"', "Last-Modified": "Tue, 01 Dec 2026 06:00:00 GMT"})
        elif self.path == "/bomb":
            self._send(200, BOMB, {"Content-Encoding": "gzip"})
        elif self.path == "/loop":
            self._send(302, headers={"Location": "/loop2"})
        elif self.path == "/loop2":
            self._send(302, headers={"Location": "/loop"})
        elif self.path == "/to-metadata":
            self._send(302, headers={"Location": "http://169.254.169.254/latest/meta-data/"})
        else:
            self._send(404, b"no")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _settings(**kw: object) -> IngestSettings:
    return IngestSettings(allow_private_addresses=True, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1/", "http://localhost/", "http://10.1.2.3/", "http://169.254.169.254/", "http://[::1]/",
     "http://192.168.0.1/", "http://0.0.0.0/"],
    ids=["loopback", "localhost", "private-10", "link-local-metadata", "ipv6-loopback", "private-192", "unspecified"],
)
def test_private_addresses_are_blocked_by_default(url: str) -> None:
    settings = IngestSettings()
    with make_client(settings) as client, pytest.raises(FetchError) as err:
        fetch_url(client, url, settings, max_bytes=1000)
    assert err.value.kind == "blocked_address"


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://x/", "/relative"])
def test_non_http_urls_are_refused(url: str) -> None:
    settings = _settings(allowed_private_networks="127.0.0.0/8")
    with make_client(settings) as client, pytest.raises(FetchError) as err:
        fetch_url(client, url, settings, max_bytes=1000)
    assert err.value.kind == "bad_url"


def test_blocked_without_the_setting_even_for_a_live_server(server: str) -> None:
    settings = IngestSettings()
    with make_client(settings) as client, pytest.raises(FetchError) as err:
        fetch_url(client, f"{server}/feed", settings, max_bytes=1000)
    assert err.value.kind == "blocked_address"


def test_conditional_get_round_trip(server: str) -> None:
    settings = _settings()
    with make_client(settings) as client:
        first = fetch_url(client, f"{server}/feed", settings, max_bytes=1000)
        assert first.status == 200 and first.headers["etag"] == '"v1"'
        second = fetch_url(client, f"{server}/feed", settings, max_bytes=1000,
                           headers={"If-None-Match": first.headers["etag"]})
    assert second.status == 304 and second.body == b""
    sent = _Handler.seen_headers[-1]
    assert sent["if-none-match"] == '"v1"'
    assert settings.contact_url in sent["user-agent"]


def test_gzip_bomb_stops_at_the_cap(server: str) -> None:
    settings = _settings()
    with make_client(settings) as client, pytest.raises(FetchError) as err:
        fetch_url(client, f"{server}/bomb", settings, max_bytes=1_000_000)
    assert err.value.kind == "too_large"


def test_redirect_loop_is_an_error(server: str) -> None:
    settings = _settings()
    with make_client(settings) as client, pytest.raises(FetchError) as err:
        fetch_url(client, f"{server}/loop", settings, max_bytes=1000)
    assert err.value.kind == "too_many_redirects"


def test_every_redirect_is_rechecked(server: str) -> None:
    """Loopback is allowed for the replay site, but a redirect to the metadata address is not."""
    settings = _settings()
    with make_client(settings) as client, pytest.raises(FetchError) as err:
        fetch_url(client, f"{server}/to-metadata", settings, max_bytes=1000)
    assert err.value.kind == "blocked_address"
    assert "169.254.169.254" in str(err.value)


class _CountingServer(ThreadingHTTPServer):
    """Counts the TCP connections it accepts (one handler instance per connection)."""

    daemon_threads = True
    connections = 0

    def process_request(self, request: object, client_address: object) -> None:
        type(self).connections += 1
        super().process_request(request, client_address)  # type: ignore[arg-type]


class _KeepAliveHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        self.send_response(304)
        self.send_header("ETag", '"v1"')
        self.end_headers()


def test_polls_in_round_robin_over_more_hosts_than_workers_reuse_each_hosts_connection() -> None:
    """Issue 20: one pool held every host's connections and closed idle ones beyond its keep-alive
    count (the worker count), so polling more hosts than workers in round robin opened a new,
    address-checked connection for nearly every 304. Each host's connection now stays open."""
    hosts = [f"127.0.3.{i}" for i in range(1, 7)]
    servers = []
    for host in hosts:
        server_class = type(f"_Counting{host.replace('.', '_')}", (_CountingServer,), {})
        httpd = server_class((host, 0), _KeepAliveHandler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
    settings = _settings(max_workers=2)
    try:
        with make_client(settings) as client:
            for _ in range(5):
                for httpd in servers:
                    host, port = httpd.server_address[:2]
                    result = fetch_url(client, f"http://{host}:{port}/feed", settings, max_bytes=1000,
                                       headers={"If-None-Match": '"v1"'})
                    assert result.status == 304
    finally:
        for httpd in servers:
            httpd.shutdown()
            httpd.server_close()
    assert [type(s).connections for s in servers] == [1] * len(servers)
