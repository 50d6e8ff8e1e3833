"""Content codings of shared responses: gzip and brotli made once per page version (#20).

Every CDN and browser asks for ``br`` or ``gzip``, and an edition page of 50-60 KB of JSON shrinks
8-10x. Compressing per request would cost more CPU than serving the page, so the cache compresses
each page version once, when a refresh loads it, and a request only picks the bytes its
``Accept-Encoding`` prefers (RFC 9110 section 12.5.3).

Each coding is a representation of its own, with a strong ETag of its own: the hex sha256 of
exactly the bytes sent, as the identity body's is (RFC 9110 section 8.8.3 asks a different ETag
for each content coding; strong, because each is byte-for-byte the same on every replica:
gzip without a name or time, brotli at a fixed quality). Shared answers say
``Vary: Accept-Encoding`` whichever body they carry, so a shared cache keys them by it.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import brotli

Coding = Literal["br", "gzip"]
BROTLI_QUALITY = 6
"""9.0x on a 63 KB demo page in 2.3 ms; quality 11 gains 10% for 40x the CPU (docs/measurements.md)."""
GZIP_LEVEL = 6
"""7.8x on the same page in 1.1 ms; level 9 gains 4% for twice the CPU."""
MIN_COMPRESSED_BYTES = 256
"""Bodies smaller than this are sent as they are: a coding would save less than its headers cost."""
_PREFERENCE: dict[str, int] = {"br": 2, "gzip": 1, "identity": 0}
"""Among codings the client rates equally, the smaller body first."""
_UNNAMED_IDENTITY = 0.001
"""The weight of identity when the header neither names it nor has ``*``: acceptable, least wanted."""


@dataclass(frozen=True, slots=True)
class EncodedBody:
    """One content coding of a response body, and the strong ETag of its bytes."""

    coding: Coding
    data: bytes
    etag: str


def encode_body(data: bytes) -> tuple[EncodedBody, ...]:
    """The brotli and gzip codings of ``data`` that are smaller than it, brotli first.

    >>> [(e.coding, len(e.data) < 2000) for e in encode_body(b'{"stories": []}' * 200)]
    [('br', True), ('gzip', True)]
    >>> encode_body(b"{}")
    ()
    """
    if len(data) < MIN_COMPRESSED_BYTES:
        return ()
    candidates: tuple[tuple[Coding, bytes], ...] = (
        ("br", brotli.compress(data, quality=BROTLI_QUALITY)),
        ("gzip", gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)),
    )
    return tuple(EncodedBody(coding, encoded, hashlib.sha256(encoded).hexdigest())
                 for coding, encoded in candidates if len(encoded) < len(data))


def choose_coding(accept_encoding: str | None, available: Iterable[str]) -> str:
    """The coding to send: the available one the client rates highest, else ``identity``.

    RFC 9110 section 12.5.3: no header means any coding is acceptable, yet identity is what an old
    client expects, so none is chosen; ``q=0`` refuses a coding; ``*`` rates every coding not named;
    ``x-gzip`` is ``gzip`` (section 8.4.1.3); identity is acceptable unless refused by name or by
    ``*;q=0``. Ties go to the smaller body (br, then gzip, then identity). When nothing available
    is acceptable, identity is sent all the same (the RFC's SHOULD; a 406 helps no client).

    >>> choose_coding("gzip, deflate, br", ["br", "gzip"])
    'br'
    >>> choose_coding("br;q=0.5, gzip", ["br", "gzip"])
    'gzip'
    >>> choose_coding("br;q=0, *", ["br", "gzip"])
    'gzip'
    >>> choose_coding("identity", ["br", "gzip"]), choose_coding(None, ["br"]), choose_coding("", ["br"])
    ('identity', 'identity', 'identity')
    """
    if not accept_encoding:
        return "identity"
    ratings: dict[str, float] = {}
    for item in accept_encoding.split(","):
        coding, _, params = item.partition(";")
        coding = coding.strip().lower()
        if not coding:
            continue
        if coding == "x-gzip":
            coding = "gzip"
        ratings[coding] = max(ratings.get(coding, 0.0), _quality(params))
    wildcard = ratings.get("*")
    if "identity" in ratings:
        identity = ratings["identity"]
    else:  # acceptable unless "*;q=0" refuses it; never preferred to a coding the client named
        identity = wildcard if wildcard is not None else _UNNAMED_IDENTITY
    best, best_key = "identity", (identity, 0)
    for coding in available:
        rating = ratings.get(coding, wildcard if wildcard is not None else 0.0)
        key = (rating, _PREFERENCE.get(coding, 0))
        if rating > 0 and key > best_key:
            best, best_key = coding, key
    return best


def _quality(params: str) -> float:
    """The ``q`` weight of one Accept-Encoding member (1 when absent; 0 when malformed, to be safe)."""
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                weight = float(value.strip())
            except ValueError:
                return 0.0
            return weight if 0.0 <= weight <= 1.0 else 0.0
    return 1.0
