"""Polite, safe HTTP fetching: address checks at connect time, a wall-clock cap, capped bodies.

Every request carries an identifying User-Agent, connect/read timeouts and a wall-clock cap.

* Addresses: a client from ``make_client`` resolves each host once per connection, refuses the
  connection if any address is private, loopback or link-local (unless a setting allows that
  network), and connects to an address it checked, so a DNS answer that changes between the check
  and the connection (rebinding) is never followed. Redirects are followed by hand, one checked
  connection per hop. TLS still verifies the URL's hostname.
* Wall clock: ``total_timeout_seconds`` is a deadline for the whole fetch, all hops included;
  every socket read and write waits at most until it, so a server dribbling its headers or body
  one byte at a time is cut there.
* Bodies: raw bytes are read and decoded here (identity, gzip, deflate: what we advertise),
  never more than the cap plus one byte at a time, so a gzip bomb stops at the cap without being
  inflated. Stacked or unrequested content codings are refused.
"""

from __future__ import annotations

import ipaddress
import ssl
import threading
import time
import weakref
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from newsroom.addresses import (
    AddressRefusedError,
    is_fetchable,
    is_fetchable_address,
    is_public_address,
    networks,
    resolve_checked,
)
from tasks.errors import FetchError, FetchErrorKind
from tasks.settings import IngestSettings

_REDIRECTS = {301, 302, 303, 307, 308}
ACCEPT_ENCODING = "gzip, deflate"
"""The content codings we ask for, and so the only ones we decode (RFC 9110 §12.5.3)."""
_WBITS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}
_UNASKED_CODINGS = frozenset({"br", "zstd", "compress", "x-compress", "dcb", "dcz"})
"""Registered codings we never ask for: a body in one of them cannot be read, so it is refused.
Any other token (``none``, ``utf-8``, ... from misconfigured servers) is read as identity, as
browsers and httpx do."""
_RAW_SLACK_BYTES = 64 * 1024
"""Compressed bytes may exceed the decoded cap by this much (headers, stored blocks, trailing junk)."""

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
__all__ = ["is_fetchable_address", "is_public_address"]  # the address rule lives in newsroom.addresses (issue 30)
_DEADLINE: ContextVar[float | None] = ContextVar("newsroom_fetch_deadline", default=None)
"""The monotonic deadline of the fetch running in this thread; socket waits never pass it."""
_CHECKED_CLIENTS: weakref.WeakSet[httpx.Client] = weakref.WeakSet()


@dataclass(frozen=True, slots=True)
class FetchResult:
    url: str
    final_url: str
    status: int
    headers: Mapping[str, str]
    body: bytes
    elapsed_ms: float
    redirects: tuple[str, ...] = field(default=())


class _AddressRefused(Exception):
    """Raised inside the transport, where the URL is unknown; ``fetch_url`` turns it into a FetchError."""

    def __init__(self, kind: FetchErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _networks(private_networks: Iterable[str]) -> tuple[_Network, ...]:
    return networks(private_networks)


def _is_fetchable(address: str, allowed: tuple[_Network, ...]) -> bool:
    return is_fetchable(address, allowed)


def _resolve_checked(host: str, port: int, allowed: tuple[_Network, ...]) -> list[str]:
    """Resolve ``host`` once and check every address (``newsroom.addresses.resolve_checked``).

    Raises:
        _AddressRefused: ``dns`` when the name does not resolve, ``blocked_address`` when any
            address is refused.
    """
    try:
        return resolve_checked(host, port, allowed)
    except AddressRefusedError as e:
        raise _AddressRefused(e.kind, e.message) from e


def _check_url_shape(url: str) -> None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError when out of range)
    except ValueError as e:
        raise FetchError("bad_url", str(e), url=url) from e
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchError("bad_url", "only absolute http(s) URLs are fetched", url=url)


# --- the transport: checked addresses, deadline-bounded sockets ----------------------------------


def _bounded(timeout: float | None, expired: type[httpcore.TimeoutException]) -> float | None:
    """``timeout`` cut to what is left of this thread's fetch deadline; ``expired`` once it has passed."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise expired("the wall-clock cap was reached")
    return remaining if timeout is None else min(timeout, remaining)


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every wait ends at the fetch deadline, however slowly bytes arrive."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        # httpcore passes the URL's hostname here, so the certificate is checked against it
        # although the socket was opened to an address.
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname,
                                                      _bounded(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _CheckedBackend(httpcore.NetworkBackend):
    """Resolve once per connection, check every address, connect to a checked one."""

    def __init__(self, allowed: tuple[_Network, ...]) -> None:
        self._allowed = allowed
        self._backend = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None) -> httpcore.NetworkStream:
        _bounded(timeout, httpcore.ConnectTimeout)
        error: httpcore.ConnectError | None = None
        for address in _resolve_checked(host, port, self._allowed):
            try:
                stream = self._backend.connect_tcp(address, port, timeout=_bounded(timeout, httpcore.ConnectTimeout),
                                                   local_address=local_address, socket_options=socket_options)
            except httpcore.ConnectError as e:
                error = e  # try the next checked address
                continue
            return _DeadlineStream(stream)
        assert error is not None  # _resolve_checked returns at least one address
        raise error

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


ORIGINS_KEPT = 256
"""Origins whose idle connections a client keeps (LRU). Round-robin polling revisits each host
once a round, so a shard of up to this many hosts reuses every connection; past it, the least
recently used origin's idle connections are closed, as are those idle longer than the keep-alive
expiry (5 s). A client holds at most ``host_max_concurrency`` idle sockets per origin kept (512 at
the defaults), which the file-descriptor limit of a process running several shards must allow."""

_OriginKey = tuple[bytes, bytes, int | None]


@dataclass(slots=True)
class _Origin:
    transport: httpx.HTTPTransport
    in_use: int = 0
    last_used: float = 0.0


class _ReleasingStream(httpx.SyncByteStream):
    """A response body that tells its origin's pool it is done, once, when closed."""

    def __init__(self, stream: httpx.SyncByteStream, release: Callable[[], None]) -> None:
        self._stream = stream
        self._release: Callable[[], None] | None = release

    def __iter__(self) -> Iterator[bytes]:
        yield from self._stream

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class _CheckedTransport(httpx.BaseTransport):
    """One pool of address-checked connections per origin (issue 20).

    A single httpcore pool scans every connection it holds (a readability syscall per idle one)
    under one lock at each request and each response close, and closes idle connections as soon
    as it holds more than its keep-alive count: polling hundreds of hosts in round robin then
    opened a new, address-checked connection for nearly every 304, with every worker queued on
    that lock. Per origin, a pool holds the host's few connections and its own lock, so a poll
    reuses the connection the host's last poll left open. Every connection is still opened
    through ``_CheckedBackend`` (the address check at connect time) and read through
    ``_DeadlineStream`` (the deadline).
    """

    def __init__(self, private_networks: tuple[str, ...], limits: httpx.Limits,
                 ssl_context: ssl.SSLContext | None = None, *, origins_kept: int = ORIGINS_KEPT) -> None:
        self._context = ssl_context or httpx.create_ssl_context(trust_env=False)
        self._backend = _CheckedBackend(_networks(private_networks))
        self._limits = limits
        self._origins_kept = origins_kept
        self._lock = threading.Lock()
        self._origins: OrderedDict[_OriginKey, _Origin] = OrderedDict()
        self._closed = False

    def _new_transport(self) -> httpx.HTTPTransport:
        transport = httpx.HTTPTransport(verify=self._context, limits=self._limits, trust_env=False)
        transport._pool = httpcore.ConnectionPool(
            ssl_context=self._context, max_connections=self._limits.max_connections,
            max_keepalive_connections=self._limits.max_keepalive_connections,
            keepalive_expiry=self._limits.keepalive_expiry, network_backend=self._backend,
        )
        return transport

    def _checkout(self, key: _OriginKey) -> _Origin:
        evicted: list[_Origin] = []
        with self._lock:
            if self._closed:
                raise RuntimeError("the client was closed")
            origin = self._origins.get(key)
            if origin is None:
                origin = self._origins[key] = _Origin(self._new_transport())
                evicted = self._evict()
            else:
                self._origins.move_to_end(key)
            origin.in_use += 1
        for old in evicted:
            old.transport.close()
        return origin

    def _evict(self) -> list[_Origin]:
        """Idle origins past ``origins_kept`` (least recently used first) or past their keep-alive expiry."""
        expiry = self._limits.keepalive_expiry
        now = time.monotonic()
        over = len(self._origins) - self._origins_kept
        evicted = []
        for key, origin in list(self._origins.items())[:-1]:
            if origin.in_use:
                continue
            if over > 0 or (expiry is not None and now - origin.last_used > expiry):
                del self._origins[key]
                evicted.append(origin)
                over -= 1
        return evicted

    def _checkin(self, origin: _Origin) -> None:
        with self._lock:
            origin.in_use -= 1
            origin.last_used = time.monotonic()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        origin = self._checkout((request.url.raw_scheme, request.url.raw_host, request.url.port))
        try:
            response = origin.transport.handle_request(request)
        except BaseException:
            self._checkin(origin)
            raise
        assert isinstance(response.stream, httpx.SyncByteStream)
        return httpx.Response(status_code=response.status_code, headers=response.headers,
                              stream=_ReleasingStream(response.stream, lambda: self._checkin(origin)),
                              extensions=response.extensions)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            origins, self._origins = list(self._origins.values()), OrderedDict()
        for origin in origins:
            origin.transport.close()


def make_client(settings: IngestSettings, *, ssl_context: ssl.SSLContext | None = None) -> httpx.Client:
    """One client per run: pooled, address-checked connections, our timeouts and User-Agent, no auto redirects.

    Args:
        settings: Timeouts, pool size, User-Agent and the private networks that may be fetched.
        ssl_context: Trust store to verify servers with (default: the system's; tests pass their CA).
    """
    timeout = httpx.Timeout(
        connect=settings.connect_timeout_seconds, read=settings.read_timeout_seconds,
        write=settings.read_timeout_seconds, pool=settings.total_timeout_seconds,
    )
    # Per origin (see _CheckedTransport): the host's few polite connections stay open between polls.
    limits = httpx.Limits(max_connections=settings.max_workers * 2,
                          max_keepalive_connections=max(2, settings.host_max_concurrency))
    client = httpx.Client(
        timeout=timeout, follow_redirects=False, trust_env=False,
        transport=_CheckedTransport(settings.private_networks, limits, ssl_context),
        headers={"User-Agent": settings.user_agent_header, "Accept-Encoding": ACCEPT_ENCODING},
    )
    _CHECKED_CLIENTS.add(client)
    return client


def _require_checked(client: httpx.Client) -> None:
    if client not in _CHECKED_CLIENTS:
        raise TypeError("fetch with a client from tasks.http.make_client: only it checks the address it connects to")


@contextmanager
def _deadline(seconds: float) -> Iterator[float]:
    """Set this thread's fetch deadline ``seconds`` from now (nested fetches restore the outer one)."""
    deadline = time.monotonic() + seconds
    token = _DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _DEADLINE.reset(token)


def _request_timeout(client: httpx.Client, deadline: float) -> httpx.Timeout:
    remaining = max(0.001, deadline - time.monotonic())
    base = client.timeout

    def cut(value: float | None) -> float:
        return remaining if value is None else min(value, remaining)

    return httpx.Timeout(connect=cut(base.connect), read=cut(base.read), write=cut(base.write), pool=remaining)


@contextmanager
def _fetch_errors(url: str) -> Iterator[None]:
    """Turn what the transport raises into FetchErrors that keep ``url``."""
    try:
        yield
    except _AddressRefused as e:
        raise FetchError(e.kind, e.message, url=url) from e
    except httpx.InvalidURL as e:
        # httpx builds the next request of a redirect even when it does not follow it: a Location
        # such as "javascript:alert(1)" fails there. A bad target, not an internal error (#16).
        raise FetchError("bad_url", f"unusable redirect target: {e}", url=url) from e
    except httpx.TimeoutException as e:
        raise FetchError("timeout", str(e) or type(e).__name__, url=url) from e
    except httpx.ConnectError as e:
        raise FetchError("connect", str(e) or type(e).__name__, url=url) from e
    except (httpx.TransportError, httpx.DecodingError) as e:
        raise FetchError("protocol", str(e) or type(e).__name__, url=url) from e


# --- fetching --------------------------------------------------------------------------------------


def _wire_url(url: str) -> str:
    """The URL as it goes on the wire: IDNA host, percent-encoded path and query (RFC 3986)."""
    try:
        _check_url_shape(url)
        return str(httpx.URL(url))
    except (httpx.InvalidURL, ValueError) as e:
        raise FetchError("bad_url", str(e), url=url) from e


def fetch_url(
    client: httpx.Client,
    url: str,
    settings: IngestSettings,
    *,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
    allow: Callable[[str], None] | None = None,
    is_truncating: bool = False,
) -> FetchResult:
    """GET ``url`` following redirects by hand. Non-2xx statuses are returned, not raised.

    Args:
        client: From ``make_client``; its connections are address-checked.
        url: Absolute http(s) URL.
        settings: Redirect limit and the wall-clock cap (``total_timeout_seconds``, all hops).
        max_bytes: Cap on the decoded body.
        headers: Extra request headers (validators).
        allow: Called with each hop's URL as sent on the wire (percent-encoded) before it is
            requested; raises FetchError to refuse it (robots.txt on every redirect hop).
        is_truncating: A body over ``max_bytes`` is cut to its first ``max_bytes`` decoded
            bytes, and no more is read, instead of failing (robots.txt, RFC 9309 §2.5).

    Raises:
        FetchError: blocked address, DNS, connect, timeout, body over ``max_bytes`` (unless
            ``is_truncating``), refused
            content coding, redirect loop, or whatever ``allow`` raises.
        TypeError: ``client`` is not from ``make_client``.
    """
    _require_checked(client)
    started = time.monotonic()
    current = url
    hops: list[str] = []
    with _deadline(settings.total_timeout_seconds) as deadline:
        while True:
            wire = _wire_url(current)
            if allow is not None:
                allow(wire)
            if time.monotonic() >= deadline:
                raise FetchError("timeout", f"not done in {settings.total_timeout_seconds}s", url=url)
            status, response_headers, body = _get_once(client, current, wire, max_bytes, headers, deadline,
                                                     is_truncating)
            if status in _REDIRECTS and "location" in response_headers:
                try:
                    target = urljoin(current, response_headers["location"])
                except ValueError as e:  # "http://[::1", a port out of range, ...
                    raise FetchError("bad_url", f"unusable redirect target: {e}", url=url) from e
                if target in hops or len(hops) >= settings.max_redirects:
                    raise FetchError("too_many_redirects", f"after {len(hops)} redirects", url=url)
                hops.append(current)
                current = target
                continue
            return FetchResult(url, current, status, response_headers, body,
                               (time.monotonic() - started) * 1000, tuple(hops))


def _get_once(
    client: httpx.Client,
    url: str,
    wire: str,
    max_bytes: int,
    headers: Mapping[str, str] | None,
    deadline: float,
    is_truncating: bool = False,
) -> tuple[int, dict[str, str], bytes]:
    with _fetch_errors(url), client.stream("GET", wire, headers=dict(headers or {}),
                                           timeout=_request_timeout(client, deadline)) as response:
        response_headers = {k.lower(): v for k, v in response.headers.items()}
        if response.status_code in _REDIRECTS and "location" in response_headers:
            return response.status_code, response_headers, b""  # a redirect's body is never used
        encoding = response.headers.get("content-encoding")
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes and encoding is None and not is_truncating:
            raise FetchError("too_large", f"content-length {declared} > {max_bytes}", url=url)
        decoder: _Decoder | None = None
        chunks: list[bytes] = []
        size = raw_size = 0
        for raw in response.iter_raw():
            raw_size += len(raw)
            if raw_size > max_bytes + _RAW_SLACK_BYTES:
                if is_truncating:
                    break
                raise FetchError("too_large", f"body over {max_bytes} bytes", url=url)
            if decoder is None:  # chosen at the first body byte: a 304's headers are not judged
                decoder = _Decoder(encoding, url)
            chunk = decoder.decode(raw, max_bytes - size + 1)
            if size + len(chunk) > max_bytes:
                if is_truncating:
                    chunks.append(chunk[: max_bytes - size])
                    break
                raise FetchError("too_large", f"body over {max_bytes} bytes after decoding {encoding}", url=url)
            size += len(chunk)
            chunks.append(chunk)
        return response.status_code, response_headers, b"".join(chunks)


class _Decoder:
    """Undo one content coding we asked for, never producing more than asked per call (RFC 9110 §8.4)."""

    def __init__(self, header: str | None, url: str) -> None:
        codings = [c.strip().lower() for c in (header or "").split(",")]
        unasked = [c for c in codings if c in _UNASKED_CODINGS]
        if unasked:
            raise FetchError("protocol", f"content coding {unasked[0]!r} was not asked for", url=url)
        codings = [c for c in codings if c in _WBITS]
        if len(codings) > 1:
            raise FetchError("protocol", f"stacked content codings refused: {header!r}", url=url)
        self._coding = codings[0] if codings else None
        self._url = url
        self._zlib = zlib.decompressobj(_WBITS[self._coding]) if self._coding else None
        self._head: bytes | None = b""  # "deflate": the first bytes, until there are enough to tell zlib from raw

    def decode(self, data: bytes, limit: int) -> bytes:
        """Decoded bytes of ``data``: at most ``limit`` (>= 1); reaching it means the cap was passed."""
        if self._zlib is None:
            return data
        if self._coding == "deflate" and self._head is not None:
            # "deflate" is zlib-wrapped (RFC 9110 §8.4.1.2), but some servers send it raw: the
            # two-byte zlib header tells which, so wait for two bytes.
            data = self._head + data
            if len(data) < 2:
                self._head = data
                return b""
            self._head = None
            if (data[0] & 0x0F != 8) or int.from_bytes(data[:2], "big") % 31:
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            return self._inflate(data, limit)
        except zlib.error as e:
            raise FetchError("protocol", f"bad {self._coding} body: {e}", url=self._url) from e

    def _inflate(self, data: bytes, limit: int) -> bytes:
        assert self._zlib is not None and limit >= 1  # max_length=0 would mean "no limit"
        out = bytearray()
        while data and not self._zlib.eof:  # after the end of the stream, trailing bytes are ignored
            out += self._zlib.decompress(data, limit - len(out))
            if len(out) >= limit:
                break
            data = self._zlib.unconsumed_tail
        return bytes(out)


def post_form(
    client: httpx.Client,
    url: str,
    form: Mapping[str, str],
    *,
    timeout_seconds: float,
    max_bytes: int,
) -> FetchResult:
    """POST a form under a wall-clock cap; the answer's body is its first ``max_bytes`` raw bytes.

    The body is read no further and never decoded: it is only for an error message. Redirects
    are not followed.

    Raises:
        FetchError: blocked address, DNS, connect, timeout, protocol.
        TypeError: ``client`` is not from ``make_client``.
    """
    _require_checked(client)
    started = time.monotonic()
    wire = _wire_url(url)
    with _deadline(timeout_seconds) as deadline, _fetch_errors(url), client.stream(
            "POST", wire, data=dict(form), headers={"Accept-Encoding": "identity"},
            timeout=_request_timeout(client, deadline)) as response:
        body = bytearray()
        for raw in response.iter_raw():
            body += raw[: max_bytes - len(body)]
            if len(body) >= max_bytes:
                break
        return FetchResult(url, url, response.status_code, {k.lower(): v for k, v in response.headers.items()},
                           bytes(body), (time.monotonic() - started) * 1000)
