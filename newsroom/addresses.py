"""Which addresses a fetch may connect to: the one rule for ingest and for readers' suggested sources.

Ingest (``tasks/http.py``) checks every connection after DNS, and so does serving when a reader
suggests a source (``serving/discovery.py``, issue 30): a host is refused if any address it
resolves to is private, loopback, link-local, multicast or reserved, unless it lies in a network a
setting allows (the demo and tests allow loopback). It lives here, below every layer, because
``serving`` may not import ``tasks``; it needs the standard library only.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

from newsroom.errors import AddressRefusedError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")


def is_public_address(address: str) -> bool:
    """True for a globally routable unicast address.

    >>> is_public_address("93.184.216.34"), is_public_address("127.0.0.1"), is_public_address("169.254.1.1")
    (True, False, False)
    >>> is_public_address("::ffff:10.0.0.1"), is_public_address("fe80::1")
    (False, False)
    >>> is_public_address("64:ff9b::7f00:1"), is_public_address("2002:7f00:1::"), is_public_address("2002:5db8:d822::1")
    (False, False, True)
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.is_site_local or ip in _LOCAL_NAT64:  # fec0::/10 (deprecated), local-use NAT64 (RFC 8215)
            return False
        embedded = embedded_ipv4(ip)
        if embedded is not None:  # reaches that IPv4 address through a translator or relay
            return is_public_address(str(embedded))
    return bool(ip.is_global) and not ip.is_multicast


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for: mapped, 6to4, well-known NAT64 (RFC 6052) or IPv4-compatible.

    >>> [str(embedded_ipv4(ipaddress.ip_address(a))) for a in ("::ffff:10.0.0.1", "2002:7f00:1::", "64:ff9b::7f00:1", "::7f00:1")]
    ['10.0.0.1', '127.0.0.1', '127.0.0.1', '127.0.0.1']
    """
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    packed = int(ip)
    if ip in _NAT64 or (packed >> 32 == 0 and packed > 1):
        return ipaddress.IPv4Address(packed & 0xFFFFFFFF)  # the low 32 bits; IPv4-compatible is ::a.b.c.d
    return None


def networks(private_networks: Iterable[str]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(n, strict=False) for n in private_networks)


def is_fetchable_address(address: str, private_networks: Iterable[str]) -> bool:
    """True for an address a fetch may connect to: public, or in one of the allowed private networks.

    The one rule for every place that checks an address: each connection after DNS (ingest, a
    reader's suggested source) and ``newsroom publishers import`` (a feed URL whose host is an IP
    literal), so they never disagree.

    >>> is_fetchable_address("127.0.0.1", ()), is_fetchable_address("127.0.0.1", ["127.0.0.0/8"])
    (False, True)
    """
    return is_fetchable(address, networks(private_networks))


def is_fetchable(address: str, allowed: tuple[Network, ...]) -> bool:
    return is_public_address(address) or any(ipaddress.ip_address(address.split("%", 1)[0]) in n for n in allowed)


def resolve_checked(host: str, port: int, allowed: tuple[Network, ...]) -> list[str]:
    """Resolve ``host`` once; every address must be public or in ``allowed``. Returns them in order.

    Raises:
        AddressRefusedError: ``dns`` when the name does not resolve, ``blocked_address`` when any
            address is refused (one bad answer refuses the host: a resolver may rotate them).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as e:
        raise AddressRefusedError("dns", f"cannot resolve {host}: {e}") from e
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if not is_fetchable(address, allowed):
            raise AddressRefusedError("blocked_address", f"{host} resolves to {address}")
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise AddressRefusedError("dns", f"no address for {host}")
    return addresses
