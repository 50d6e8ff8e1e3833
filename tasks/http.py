"""Polite, safe HTTP fetching: address checks on every hop, timeouts, capped bodies.

Every request carries an identifying User-Agent, connect/read timeouts and a wall-clock cap. Bodies
are counted after decompression, so a gzip bomb stops at the cap. Private, loopback and link-local
addresses are refused after DNS resolution and again on every redirect, unless a setting allows them.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import httpx

from tasks.errors import FetchError
from tasks.settings import IngestSettings

_REDIRECTS = {301, 302, 303, 307, 308}


@dataclass(frozen=True, slots=True)
class FetchResult:
    url: str
    final_url: str
    status: int
    headers: Mapping[str, str]
    body: bytes
    elapsed_ms: float
    redirects: tuple[str, ...] = field(default=())


def is_public_address(address: str) -> bool:
    """True for a globally routable unicast address.

    >>> is_public_address("93.184.216.34"), is_public_address("127.0.0.1"), is_public_address("169.254.1.1")
    (True, False, False)
    >>> is_public_address("::ffff:10.0.0.1"), is_public_address("fe80::1")
    (False, False)
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return bool(ip.is_global) and not ip.is_multicast


def check_url_allowed(url: str, *, private_networks: tuple[str, ...] = ()) -> None:
    """Refuse non-HTTP schemes, and hosts resolving to a non-public address outside ``private_networks``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchError("bad_url", "only absolute http(s) URLs are fetched", url=url)
    allowed = [ipaddress.ip_network(n, strict=False) for n in private_networks]
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as e:
        raise FetchError("dns", f"cannot resolve {parts.hostname}: {e}", url=url) from e
    for info in infos:
        address = str(info[4][0])
        if not is_public_address(address) and not any(ipaddress.ip_address(address) in n for n in allowed):
            raise FetchError("blocked_address", f"{parts.hostname} resolves to {address}", url=url)


def make_client(settings: IngestSettings) -> httpx.Client:
    """One client per run: pooled connections, our timeouts and User-Agent, no automatic redirects."""
    timeout = httpx.Timeout(
        connect=settings.connect_timeout_seconds, read=settings.read_timeout_seconds,
        write=settings.read_timeout_seconds, pool=settings.total_timeout_seconds,
    )
    limits = httpx.Limits(max_connections=settings.max_workers * 2, max_keepalive_connections=settings.max_workers)
    return httpx.Client(
        timeout=timeout, limits=limits, follow_redirects=False, trust_env=False,
        headers={"User-Agent": settings.user_agent_header, "Accept-Encoding": "gzip, deflate"},
    )


def fetch_url(
    client: httpx.Client,
    url: str,
    settings: IngestSettings,
    *,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
) -> FetchResult:
    """GET ``url`` following redirects by hand. Non-2xx statuses are returned, not raised.

    Raises:
        FetchError: blocked address, DNS, connect, timeout, body over ``max_bytes``, redirect loop.
    """
    started = time.monotonic()
    current = url
    hops: list[str] = []
    while True:
        check_url_allowed(current, private_networks=settings.private_networks)
        status, response_headers, body = _get_once(client, current, settings, max_bytes, headers, started)
        if status in _REDIRECTS and "location" in response_headers:
            target = urljoin(current, response_headers["location"])
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
    settings: IngestSettings,
    max_bytes: int,
    headers: Mapping[str, str] | None,
    started: float,
) -> tuple[int, dict[str, str], bytes]:
    try:
        with client.stream("GET", url, headers=dict(headers or {})) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > max_bytes and response.headers.get("content-encoding") is None:
                raise FetchError("too_large", f"content-length {declared} > {max_bytes}", url=url)
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise FetchError("too_large", f"body over {max_bytes} bytes", url=url)
                if time.monotonic() - started > settings.total_timeout_seconds:
                    raise FetchError("timeout", f"body not done in {settings.total_timeout_seconds}s", url=url)
                chunks.append(chunk)
            return response.status_code, {k.lower(): v for k, v in response.headers.items()}, b"".join(chunks)
    except httpx.TimeoutException as e:
        raise FetchError("timeout", type(e).__name__, url=url) from e
    except httpx.ConnectError as e:
        raise FetchError("connect", str(e) or type(e).__name__, url=url) from e
    except (httpx.DecodingError, httpx.RemoteProtocolError, httpx.ReadError) as e:
        raise FetchError("protocol", str(e) or type(e).__name__, url=url) from e
