"""Safe fetching against real loopback servers: address checks, redirects, caps, conditional GET."""

from __future__ import annotations

import gzip
import socket
import ssl
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from loopback import serve as serve_loopback
from pydantic import SecretStr

from tasks.errors import FetchError
from tasks.http import fetch_url, is_public_address, make_client
from tasks.ingest.pages import PageError, fetch_article
from tasks.ingest.plan import FeedJob
from tasks.ingest.robots import RobotsCache
from tasks.settings import IngestSettings, WebSubSettings
from tasks.websub import request_subscription
from transforms.feeds import FeedItem
from transforms.records import ArticleRow, FeedState
from warehouse.store import LocalStore

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


# --------------------------------------------------------------------------------------------------
# The fetch layer against hostile servers and resolvers, over real loopback sockets.
#
# DNS rebinding (the address connected to is the one checked), decompression bombs (the cap holds
# while decompressing), byte-dribbling servers (the wall-clock cap holds before the body), robots.txt
# on every redirect hop, and the WebSub hub request (capped, under a deadline, address-checked).
# --------------------------------------------------------------------------------------------------

Handler = Callable[[socket.socket, bytes], None]


class RawServer:
    """A loopback TCP server that hands each request's head to ``handler`` (one thread per connection)."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1") -> None:
        self.handler = handler
        self.request_lines: list[str] = []
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                self.request_lines.append(data.split(b"\r\n", 1)[0].decode("latin-1"))
                self.handler(conn, data)
            except OSError:
                pass  # the client hung up, as it should when it gives up

    def close(self) -> None:
        self._closed = True
        self._sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    started: list[RawServer] = []

    def start(handler: Handler, host: str = "127.0.0.1") -> RawServer:
        started.append(RawServer(handler, host))
        return started[-1]

    yield start
    for server in started:
        server.close()


def _respond(conn: socket.socket, status: str, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
    head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    conn.sendall(head.encode("latin-1") + b"\r\n" + body)


def _hostile_settings(**kw: Any) -> IngestSettings:
    base: dict[str, Any] = dict(allow_private_addresses=True, allowed_private_networks="127.0.0.0/8",
                                connect_timeout_seconds=2, read_timeout_seconds=2, total_timeout_seconds=5,
                                embeddings=False)
    return IngestSettings(**{**base, **kw})


class FakeResolver:
    """Answers for ``*.test`` hosts, one address per lookup (the last one repeats); other hosts resolve as usual.

    A TTL-0 rebinding resolver answers exactly like this: a public address first, then loopback.
    """

    def __init__(self, real: Callable[..., Any]) -> None:
        self._real = real
        self.answers: dict[str, list[str]] = {}
        self.lookups: dict[str, list[str]] = {}

    def answer(self, host: str, *addresses: str) -> None:
        self.answers[host] = list(addresses)

    def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.endswith(".test"):
            queue = self.answers.get(host)
            if not queue:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            address = queue.pop(0) if len(queue) > 1 else queue[0]
            self.lookups.setdefault(host, []).append(address)
            return self._real(address, port, *args, **kwargs)
        return self._real(host, port, *args, **kwargs)


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> FakeResolver:
    fake = FakeResolver(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", fake.getaddrinfo)
    return fake


# --- DNS rebinding: the address connected to is the address checked --------------------------------
# The allowed network is 127.0.0.1/32: 127.0.0.1 plays the public address, 127.0.0.2 the internal one.


def _internal_admin(conn: socket.socket, _: bytes) -> None:
    _respond(conn, "200 OK", b"INTERNAL-ADMIN")


@pytest.fixture
def only_127_0_0_1() -> IngestSettings:
    return _hostile_settings(allowed_private_networks="127.0.0.1/32")


def test_a_rebinding_answer_after_the_check_is_never_connected_to(
        serve: Callable[..., RawServer], resolver: FakeResolver, only_127_0_0_1: IngestSettings) -> None:
    internal = serve(_internal_admin, "127.0.0.2")
    resolver.answer("rebind.test", "127.0.0.1", "127.0.0.2")  # allowed for the check, internal after
    with make_client(only_127_0_0_1) as client, pytest.raises(FetchError) as err:
        fetch_url(client, f"http://rebind.test:{internal.port}/admin", only_127_0_0_1, max_bytes=1000)
    assert err.value.kind == "connect"  # 127.0.0.1 was checked, so 127.0.0.1 is where it connected
    assert internal.request_lines == []
    assert resolver.lookups["rebind.test"] == ["127.0.0.1"]  # resolved once for the connection


def test_a_redirect_hop_gets_the_same_protection(
        serve: Callable[..., RawServer], resolver: FakeResolver, only_127_0_0_1: IngestSettings) -> None:
    internal = serve(_internal_admin, "127.0.0.2")
    front = serve(lambda conn, _: _respond(conn, "302 Found", headers={
        "Location": f"http://hop.test:{internal.port}/admin"}))
    resolver.answer("hop.test", "127.0.0.1", "127.0.0.2")
    with make_client(only_127_0_0_1) as client, pytest.raises(FetchError) as err:
        fetch_url(client, f"http://127.0.0.1:{front.port}/go", only_127_0_0_1, max_bytes=1000)
    assert err.value.kind == "connect"
    assert internal.request_lines == [] and front.request_lines == ["GET /go HTTP/1.1"]
    assert resolver.lookups["hop.test"] == ["127.0.0.1"]


def test_an_internal_answer_at_connect_time_is_refused(
        serve: Callable[..., RawServer], resolver: FakeResolver, only_127_0_0_1: IngestSettings) -> None:
    internal = serve(_internal_admin, "127.0.0.2")
    resolver.answer("inside.test", "127.0.0.2")
    with make_client(only_127_0_0_1) as client, pytest.raises(FetchError) as err:
        fetch_url(client, f"http://inside.test:{internal.port}/admin", only_127_0_0_1, max_bytes=1000)
    assert err.value.kind == "blocked_address" and "127.0.0.2" in str(err.value)
    assert internal.request_lines == []


def test_an_allowed_host_is_fetched_with_one_lookup_per_connection(
        serve: Callable[..., RawServer], resolver: FakeResolver, only_127_0_0_1: IngestSettings) -> None:
    server = serve(lambda conn, _: _respond(conn, "200 OK", b"hello"))
    resolver.answer("news.test", "127.0.0.1")
    with make_client(only_127_0_0_1) as client:
        result = fetch_url(client, f"http://news.test:{server.port}/a", only_127_0_0_1, max_bytes=1000)
    assert result.status == 200 and result.body == b"hello"
    assert resolver.lookups["news.test"] == ["127.0.0.1"]


def test_unresolvable_host_is_a_dns_error(resolver: FakeResolver) -> None:
    settings = _hostile_settings()
    with make_client(settings) as client, pytest.raises(FetchError) as err:
        fetch_url(client, "http://nowhere.test/", settings, max_bytes=1000)
    assert err.value.kind == "dns"


def test_a_client_without_the_connect_time_check_is_refused() -> None:
    settings = _hostile_settings()
    with httpx.Client() as client, pytest.raises(TypeError):
        fetch_url(client, "http://127.0.0.1:9/", settings, max_bytes=1000)


def _certificates(tmp_path: Path, hostname: str) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for ``hostname`` signed by it (cert, key, CA)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "newsroom test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(days=1))
          .not_valid_after(now + timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    paths[0].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    paths[2].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return paths


def test_tls_still_verifies_the_hostname_though_the_connection_goes_to_an_address(
        tmp_path: Path, resolver: FakeResolver) -> None:
    cert, key, ca = _certificates(tmp_path, "news.test")
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve_tls() -> None:
        while True:
            try:
                raw, _ = listener.accept()
            except OSError:
                return
            try:
                with server_context.wrap_socket(raw, server_side=True) as conn:
                    while b"\r\n\r\n" not in conn.recv(65536):
                        pass
                    _respond(conn, "200 OK", b"secure")
            except (OSError, ssl.SSLError):
                continue  # the client refused our certificate

    threading.Thread(target=serve_tls, daemon=True).start()
    resolver.answer("news.test", "127.0.0.1")
    resolver.answer("other.test", "127.0.0.1")
    settings = _hostile_settings(allowed_private_networks="127.0.0.1/32")
    client_context = ssl.create_default_context(cafile=str(ca))
    try:
        with make_client(settings, ssl_context=client_context) as client:
            ok = fetch_url(client, f"https://news.test:{port}/", settings, max_bytes=1000)
            with pytest.raises(FetchError) as err:
                fetch_url(client, f"https://other.test:{port}/", settings, max_bytes=1000)
    finally:
        listener.close()
    assert ok.status == 200 and ok.body == b"secure"
    assert err.value.kind == "connect" and "hostname" in str(err.value).lower()


# --- decompression: the cap holds while decompressing ----------------------------------------------

ZEROS_MB = 40


def _peak_allocated_mb(run: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        run()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak / 1e6


def _fetch_error(serve: Callable[..., RawServer], body: bytes, encoding: str, max_bytes: int = 1_000_000
                 ) -> tuple[FetchError, float, RawServer]:
    server = serve(lambda conn, _: _respond(conn, "200 OK", body, {"Content-Encoding": encoding}))
    settings = _hostile_settings(total_timeout_seconds=30, read_timeout_seconds=10)
    caught: list[FetchError] = []

    def run() -> None:
        with make_client(settings) as client:
            try:
                fetch_url(client, f"http://127.0.0.1:{server.port}/feed", settings, max_bytes=max_bytes)
            except FetchError as e:
                caught.append(e)

    peak = _peak_allocated_mb(run)
    assert caught, "the fetch should have failed"
    return caught[0], peak, server


def test_a_gzip_bomb_stops_at_the_cap_without_inflating_it(serve: Callable[..., RawServer]) -> None:
    bomb = gzip.compress(b"\0" * (ZEROS_MB * 1_000_000), 9)  # ~40 KB on the wire
    err, peak_mb, _ = _fetch_error(serve, bomb, "gzip")
    assert err.kind == "too_large"
    assert peak_mb < 8, f"{peak_mb:.0f} MB allocated for a 1 MB cap"


def test_stacked_codings_are_refused_before_decompressing(serve: Callable[..., RawServer]) -> None:
    stacked = gzip.compress(gzip.compress(b"\0" * (ZEROS_MB * 1_000_000), 9), 9)
    err, peak_mb, _ = _fetch_error(serve, stacked, "gzip, gzip")
    assert err.kind == "protocol" and "gzip, gzip" in str(err)
    assert peak_mb < 8, f"{peak_mb:.0f} MB allocated for a 1 MB cap"


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress"])
def test_codings_we_did_not_ask_for_are_refused(serve: Callable[..., RawServer], encoding: str) -> None:
    err, _, server = _fetch_error(serve, b"\x8b\x00not really compressed", encoding)
    assert err.kind == "protocol" and encoding in str(err)


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("identity", lambda b: b),
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", zlib.compress),  # RFC 9110 §8.4.1.2: zlib-wrapped
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, which some servers send
        ("GZIP", gzip.compress),
    ],
    ids=["identity", "gzip", "x-gzip", "deflate-zlib", "deflate-raw", "upper-case"],
)
def test_requested_codings_are_decoded(serve: Callable[..., RawServer], encoding: str,
                                       encode: Callable[[bytes], bytes]) -> None:
    text = b"<rss>" + b"news " * 50_000 + b"</rss>"
    server = serve(lambda conn, _: _respond(conn, "200 OK", encode(text), {"Content-Encoding": encoding}))
    settings = _hostile_settings()
    with make_client(settings) as client:
        result = fetch_url(client, f"http://127.0.0.1:{server.port}/feed", settings, max_bytes=len(text))
        with pytest.raises(FetchError) as err:
            fetch_url(client, f"http://127.0.0.1:{server.port}/feed", settings, max_bytes=len(text) - 1)
    assert result.body == text
    assert err.value.kind == "too_large"


@pytest.mark.parametrize("encoding", ["none", "UTF-8", "binary"])
def test_junk_coding_tokens_are_read_as_identity(serve: Callable[..., RawServer], encoding: str) -> None:
    """Misconfigured servers send these; browsers and httpx read the body as it is, and so do we."""
    text = b"<rss><channel><title>t</title></channel></rss>"
    server = serve(lambda conn, _: _respond(conn, "200 OK", text, {"Content-Encoding": encoding}))
    settings = _hostile_settings()
    with make_client(settings) as client:
        assert fetch_url(client, f"http://127.0.0.1:{server.port}/feed", settings, max_bytes=1000).body == text


def test_raw_deflate_is_recognised_when_it_arrives_a_byte_at_a_time(serve: Callable[..., RawServer]) -> None:
    text = b"<rss>" + b"news " * 2_000 + b"</rss>"
    raw = zlib.compress(text)[2:-4]

    def dribble(conn: socket.socket, _: bytes) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(raw)}\r\nContent-Encoding: deflate\r\nConnection: close\r\n\r\n"
        conn.sendall(head.encode("latin-1") + raw[:1])
        time.sleep(0.2)  # the first body chunk holds a single byte
        conn.sendall(raw[1:])

    server = serve(dribble)
    settings = _hostile_settings()
    with make_client(settings) as client:
        assert fetch_url(client, f"http://127.0.0.1:{server.port}/feed", settings, max_bytes=len(text)).body == text


def test_a_redirect_body_is_never_judged(serve: Callable[..., RawServer]) -> None:
    def answer(conn: socket.socket, request: bytes) -> None:
        if request.startswith(b"GET /moved"):
            _respond(conn, "301 Moved Permanently", b"\x00garbage", {"Location": "/feed", "Content-Encoding": "br"})
        else:
            _respond(conn, "200 OK", b"<rss/>")

    server = serve(answer)
    settings = _hostile_settings()
    with make_client(settings) as client:
        result = fetch_url(client, f"http://127.0.0.1:{server.port}/moved", settings, max_bytes=1000)
    assert result.body == b"<rss/>" and result.redirects == (f"http://127.0.0.1:{server.port}/moved",)


def test_a_corrupt_gzip_body_is_a_protocol_error(serve: Callable[..., RawServer]) -> None:
    err, _, _ = _fetch_error(serve, b"\x1f\x8b" + b"garbage" * 10, "gzip")
    assert err.kind == "protocol"


# --- the wall-clock cap holds before the body too ----------------------------------------------------


DRIBBLE_SECONDS = 20.0
"""How long ``_dribble`` takes to send its headers: a cut far before it is the cap's doing."""


def _dribble(conn: socket.socket, _: bytes) -> None:
    """The status line and headers one byte every 0.2 s (well under the read timeout), for 20 s."""
    for byte in b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * (int(DRIBBLE_SECONDS / 0.2) - 24):
        conn.sendall(bytes([byte]))
        time.sleep(0.2)
    conn.sendall(b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")


def test_a_server_dribbling_its_headers_is_cut_at_the_wall_clock_cap(serve: Callable[..., RawServer]) -> None:
    server = serve(_dribble)
    settings = _hostile_settings(read_timeout_seconds=1, total_timeout_seconds=1.5)
    started = time.monotonic()
    with make_client(settings) as client, pytest.raises(FetchError) as err:
        fetch_url(client, f"http://127.0.0.1:{server.port}/feed", settings, max_bytes=1000)
    elapsed = time.monotonic() - started
    assert err.value.kind == "timeout"
    # Bounds that hold on a loaded machine: never before the cap, and far before the headers end.
    assert 1.5 <= elapsed < DRIBBLE_SECONDS / 2, elapsed


def test_the_wall_clock_cap_covers_every_redirect_hop(serve: Callable[..., RawServer]) -> None:
    def slow_redirects(conn: socket.socket, request: bytes) -> None:
        hop = int(request.split(b" ", 2)[1].rsplit(b"/", 1)[1])
        time.sleep(0.6)
        _respond(conn, "302 Found", headers={"Location": f"/hop/{hop + 1}"})

    server = serve(slow_redirects)
    settings = _hostile_settings(read_timeout_seconds=1, total_timeout_seconds=1.5, max_redirects=10)
    started = time.monotonic()
    with make_client(settings) as client, pytest.raises(FetchError) as err:
        fetch_url(client, f"http://127.0.0.1:{server.port}/hop/0", settings, max_bytes=1000)
    elapsed = time.monotonic() - started
    assert err.value.kind == "timeout"
    # A count, not a time: each hop takes 0.6 s of the server's, so the 1.5 s cap allows 3 of the 11.
    assert len(server.request_lines) <= 3, (elapsed, server.request_lines)


def test_a_dribbled_body_is_cut_too(serve: Callable[..., RawServer]) -> None:
    def dribble_body(conn: socket.socket, _: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n")
        for _byte in range(100):
            conn.sendall(b"x")
            time.sleep(0.1)

    server = serve(dribble_body)
    settings = _hostile_settings(read_timeout_seconds=1, total_timeout_seconds=1.0)
    started = time.monotonic()
    with make_client(settings) as client, pytest.raises(FetchError) as err:
        fetch_url(client, f"http://127.0.0.1:{server.port}/feed", settings, max_bytes=1000)
    assert err.value.kind == "timeout"
    assert time.monotonic() - started < 5.0  # the body takes 10 s: cut at half of it, at the latest


# --- robots.txt on every hop, matched on the URL as sent --------------------------------------------

ROBOTS = "User-agent: *\nDisallow: /private/\nDisallow: /приватно/\n".encode()
PAGE = (b"<html><head><title>A page title long enough</title></head><body><p>"
        + b"public words for the page " * 40 + b"</p></body></html>")


def _site(conn: socket.socket, request: bytes) -> None:
    path = request.split(b" ", 2)[1].decode("latin-1")
    if path == "/robots.txt":
        _respond(conn, "200 OK", ROBOTS, {"Content-Type": "text/plain"})
    elif path == "/go":
        _respond(conn, "302 Found", headers={"Location": "/private/doc"})
    elif path == "/go-cyrillic":
        _respond(conn, "302 Found", headers={"Location": "/приватно/doc".encode().decode("latin-1")})
    else:
        _respond(conn, "200 OK", PAGE, {"Content-Type": "text/html; charset=utf-8"})


def _fetch_page(base: str, path: str, settings: IngestSettings) -> ArticleRow | PageError:
    link = base + path
    job = FeedJob("f1", base + "/feed", "p1", "en", "us", "", FeedState("f1"))
    item = FeedItem(link, link, "", "", None, None, (), None, None, None)
    with make_client(settings) as client:
        return fetch_article(job, item, client, RobotsCache(client, settings), settings, datetime.now(UTC))


@pytest.mark.parametrize(
    "path",
    ["/private/doc", "/go", "/приватно/doc", "/go-cyrillic", "/%D0%BF%D1%80%D0%B8%D0%B2%D0%B0%D1%82%D0%BD%D0%BE/doc"],
    ids=["disallowed-link", "redirect-to-disallowed", "non-ascii-link", "redirect-to-non-ascii", "escaped-link"],
)
def test_robots_is_checked_on_every_hop_as_sent(serve: Callable[..., RawServer], path: str) -> None:
    server = serve(_site)
    row = _fetch_page(f"http://127.0.0.1:{server.port}", path, _hostile_settings())
    assert getattr(row, "error_kind", None) == "robots_disallowed", row
    assert isinstance(row, PageError)
    fetched = [line.split(" ")[1] for line in server.request_lines if "/robots.txt" not in line]
    assert all("/private/" not in p and "%D0%BF" not in p.upper() for p in fetched), fetched


def test_an_allowed_page_is_still_fetched(serve: Callable[..., RawServer]) -> None:
    server = serve(_site)
    row = _fetch_page(f"http://127.0.0.1:{server.port}", "/public/doc", _hostile_settings())
    assert isinstance(row, ArticleRow), row
    assert row.title == "A page title long enough"


def test_the_hop_hook_sees_each_url_as_sent(serve: Callable[..., RawServer]) -> None:
    server = serve(_site)
    base = f"http://127.0.0.1:{server.port}"
    settings = _hostile_settings()
    seen: list[str] = []
    with make_client(settings) as client:
        fetch_url(client, base + "/go-cyrillic", settings, max_bytes=10_000, allow=seen.append)
    assert seen == [base + "/go-cyrillic", base + "/%D0%BF%D1%80%D0%B8%D0%B2%D0%B0%D1%82%D0%BD%D0%BE/doc"]
    assert server.request_lines[-1] == "GET /%D0%BF%D1%80%D0%B8%D0%B2%D0%B0%D1%82%D0%BD%D0%BE/doc HTTP/1.1"


def test_a_hook_refusal_stops_before_the_request(serve: Callable[..., RawServer]) -> None:
    server = serve(_site)
    settings = _hostile_settings()

    def refuse(url: str) -> None:
        raise FetchError("robots_disallowed", "no", url=url)

    with make_client(settings) as client, pytest.raises(FetchError) as err:
        fetch_url(client, f"http://127.0.0.1:{server.port}/x", settings, max_bytes=10_000, allow=refuse)
    assert err.value.kind == "robots_disallowed"
    assert server.request_lines == []


# --- the WebSub hub request ---------------------------------------------------------------------------


def _subscribe(hub_url: str, ingest: IngestSettings, tmp_path: Path, hub_timeout: float = 2.0) -> Any:
    websub = WebSubSettings(enabled=True, callback_base_url="http://127.0.0.1:1", master_secret=SecretStr("m"),  # type: ignore[call-arg]
                            hub_timeout_seconds=hub_timeout)
    store = LocalStore(tmp_path / "store")
    with make_client(ingest) as client:
        return request_subscription(store, client, websub, feed_id="ab12", topic_url="http://127.0.0.1/feed",
                                    hub_url=hub_url, mode="subscribe", now=datetime.now(UTC))


def test_a_hub_answer_is_read_capped_and_never_inflated(serve: Callable[..., RawServer], tmp_path: Path) -> None:
    bomb = gzip.compress(b"\0" * (ZEROS_MB * 1_000_000), 9)
    hub = serve(lambda conn, _: _respond(conn, "500 Oops", bomb, {"Content-Encoding": "gzip"}))
    records: list[Any] = []
    peak_mb = _peak_allocated_mb(lambda: records.append(_subscribe(f"http://127.0.0.1:{hub.port}/hub",
                                                                   _hostile_settings(), tmp_path)))
    assert records[0].status == "failed" and "HTTP 500" in records[0].last_error
    assert peak_mb < 8, f"{peak_mb:.0f} MB allocated for a hub's error answer"


def test_a_hub_answer_text_is_kept_short(serve: Callable[..., RawServer], tmp_path: Path) -> None:
    hub = serve(lambda conn, _: _respond(conn, "400 Bad Request", b"bad topic " * 10_000))
    record = _subscribe(f"http://127.0.0.1:{hub.port}/hub", _hostile_settings(), tmp_path)
    assert record.status == "failed" and record.last_error.startswith("hub answered HTTP 400: bad topic")
    assert len(record.last_error) < 300


def test_a_dribbling_hub_is_cut_at_the_hub_timeout(serve: Callable[..., RawServer], tmp_path: Path) -> None:
    hub = serve(_dribble)
    started = time.monotonic()
    record = _subscribe(f"http://127.0.0.1:{hub.port}/hub", _hostile_settings(read_timeout_seconds=1), tmp_path,
                        hub_timeout=1.0)
    assert record.status == "failed" and record.last_error.startswith("timeout")
    assert time.monotonic() - started < DRIBBLE_SECONDS / 2


def test_a_hub_address_is_checked_when_connecting(
        serve: Callable[..., RawServer], resolver: FakeResolver, tmp_path: Path) -> None:
    internal = serve(lambda conn, _: _respond(conn, "202 Accepted"), "127.0.0.2")
    resolver.answer("hub.test", "127.0.0.1", "127.0.0.2")  # allowed for the check, internal after
    ingest = _hostile_settings(allowed_private_networks="127.0.0.1/32")
    record = _subscribe(f"http://hub.test:{internal.port}/hub", ingest, tmp_path)
    assert record.status == "failed" and record.last_error.startswith("connect")
    assert internal.request_lines == []
    assert resolver.lookups["hub.test"] == ["127.0.0.1"]


def test_an_internal_hub_is_refused(serve: Callable[..., RawServer], resolver: FakeResolver, tmp_path: Path) -> None:
    internal = serve(lambda conn, _: _respond(conn, "202 Accepted"), "127.0.0.2")
    resolver.answer("hub.test", "127.0.0.2")
    record = _subscribe(f"http://hub.test:{internal.port}/hub", _hostile_settings(allowed_private_networks="127.0.0.1/32"),
                        tmp_path)
    assert record.status == "failed" and record.last_error.startswith("blocked_address")
    assert internal.request_lines == []


def test_a_links_robots_txt_is_fetched_once_however_the_feed_spells_its_host() -> None:
    """Preloaded under the link's origin, found again under each hop's wire origin (lower case, no :80)."""
    seen: list[str] = []

    class Site(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            seen.append(self.path)
            body = b"User-agent: *\nDisallow: /private\n" if self.path == "/robots.txt" else b"<html></html>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    settings = _hostile_settings(allowed_private_networks="127.0.0.0/8,::1/128")
    with serve_loopback(Site) as base, make_client(settings) as client:
        link = base.replace("127.0.0.1", "LOCALHOST") + "/a"
        robots = RobotsCache(client, settings)
        robots.load(RobotsCache.origin_of(link))  # what the poll preloads, under the per-host limit

        def check(hop: str) -> None:
            if not robots.allows(hop):
                raise FetchError("robots_disallowed", "no", url=hop)

        fetch_url(client, link, settings, max_bytes=10_000, allow=check)
    assert seen == ["/robots.txt", "/a"]


@pytest.mark.parametrize(
    ("address", "public"),
    [("64:ff9b::7f00:1", False), ("64:ff9b::a00:1", False), ("64:ff9b:1::5db8:d822", False),
     ("2002:7f00:1::", False), ("2002:a9fe:a9fe::", False), ("::7f00:1", False), ("fec0::1", False),
     ("64:ff9b::5db8:d822", True), ("2002:5db8:d822::1", True), ("2606:4700::1111", True)],
)
def test_ipv6_forms_of_internal_ipv4_addresses_are_not_public(address: str, public: bool) -> None:
    """NAT64, 6to4 and IPv4-compatible addresses reach the IPv4 address they embed; site-local is internal."""
    assert is_public_address(address) is public


@pytest.mark.parametrize(("location", "kind"), [("http://[::1", "protocol"), ("http://example.org:99999/a", "bad_url")])
def test_an_unusable_redirect_target_is_a_clear_error(serve: Callable[..., RawServer], location: str, kind: str) -> None:
    """Not an ``internal`` error (a ValueError from urllib): the server sent a broken Location."""
    server = serve(lambda conn, _: _respond(conn, "302 Found", b"", {"Location": location}))
    settings = _hostile_settings()
    with make_client(settings) as client, pytest.raises(FetchError) as err:
        fetch_url(client, f"http://127.0.0.1:{server.port}/moved", settings, max_bytes=1000)
    assert err.value.kind == kind


# --- redirect targets are classified by what is wrong with them (#16) ------------------------------


def _redirect_to(target: str) -> Handler:
    def answer(conn: socket.socket, request: bytes) -> None:
        path = request.split(b" ", 2)[1]
        if path == b"/robots.txt":
            _respond(conn, "200 OK", b"User-agent: *\nAllow: /\n", {"Content-Type": "text/plain"})
        else:
            _respond(conn, "302 Found", headers={"Location": target})
    return answer


@pytest.mark.parametrize(
    ("target", "kind"),
    [
        ("javascript:alert(1)", "bad_url"),
        ("javascript://%0aalert(1)", "bad_url"),
        ("data:text/html,<script>alert(1)</script>", "bad_url"),
        ("ftp://files.example/a", "bad_url"),
        ("http://10.0.0.1/admin", "blocked_address"),
        ("http://169.254.169.254/latest/meta-data/", "blocked_address"),
        ("http://[::1]:8080/", "blocked_address"),
        ("http://nowhere.test/a", "dns"),
    ],
    ids=["javascript", "javascript-authority", "data", "ftp", "private", "metadata", "ipv6-loopback", "no-dns"],
)
def test_a_redirect_is_refused_with_its_own_kind(serve: Callable[..., RawServer], resolver: FakeResolver,
                                                caplog: pytest.LogCaptureFixture, target: str, kind: str) -> None:
    server = serve(_redirect_to(target))
    row = _fetch_page(f"http://127.0.0.1:{server.port}", "/story", _hostile_settings())
    assert getattr(row, "error_kind", None) == kind, row
    assert not [r for r in caplog.records if r.exc_info], "an expected refusal is logged with a traceback"


def test_a_refused_robots_fetch_is_not_kept_as_the_publishers_verdict(serve: Callable[..., RawServer]) -> None:
    server = serve(_redirect_to("http://10.0.0.1/admin"))
    settings = _hostile_settings()
    link = f"http://127.0.0.1:{server.port}/story"
    job = FeedJob("f1", link, "p1", "en", "us", "", FeedState("f1"))
    with make_client(settings) as client:
        robots = RobotsCache(client, settings)
        fetch_article(job, FeedItem(link, link, "", "", None, None, (), None, None, None), client, robots, settings,
                       datetime.now(UTC))
    assert "http://10.0.0.1" not in robots.fetched  # not stored as a disallow-all for later runs
