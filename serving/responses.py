"""Shared responses: the same bytes for every reader, a strong ETag, and conditional GET."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from fastapi import Request, Response

from serving.encodings import EncodedBody, choose_coding, encode_body

SHARED_CACHE_CONTROL = "public, s-maxage=60, stale-while-revalidate=60, stale-if-error=3600"
"""Shared answers are identical for every reader, so CDNs may keep them (RFC 9111, RFC 5861)."""

JSON = "application/json"


@dataclass(frozen=True, slots=True)
class CachedBody:
    """Response bytes and their strong ETag (hex sha256 of exactly these bytes).

    ``encoded`` holds the body's brotli and gzip codings when it was made with
    :meth:`compressed` (a page version, the editions list: once per version, #20).
    """

    data: bytes
    etag: str
    encoded: tuple[EncodedBody, ...] = ()

    @classmethod
    def of(cls, data: bytes) -> CachedBody:
        return cls(data, hashlib.sha256(data).hexdigest())

    @classmethod
    def compressed(cls, data: bytes) -> CachedBody:
        return cls(data, hashlib.sha256(data).hexdigest(), encode_body(data))


def quote_etag(etag: str) -> str:
    return f'"{etag}"'


def is_not_modified(if_none_match: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` header matches ``etag``.

    GET uses the weak comparison (RFC 9110 section 13.1.2), so ``W/"x"`` matches ``"x"``; ``*``
    matches any current representation.

    >>> is_not_modified('"a", W/"b"', "b")
    True
    >>> is_not_modified('"a"', "b")
    False
    """
    if not if_none_match:
        return False
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate == "*":
            return True
        if candidate.startswith("W/"):
            candidate = candidate[2:]
        if candidate == quote_etag(etag):
            return True
    return False


def shared_response(request: Request, body: CachedBody, media_type: str = JSON) -> Response:
    """200 with ``body`` (or 304 when the client has it), with the shared caching headers.

    Only ``If-None-Match`` and ``Accept-Encoding`` are read from the request: never cookies or
    credentials, so the answer is the same for everyone and safe for a shared cache. A body with
    precompressed codings is sent in the one the client prefers (serving/encodings.py), with that
    coding's own ETag, and ``Vary: Accept-Encoding`` on every answer for it, 304s included.
    """
    data, etag, headers = body.data, body.etag, {"Cache-Control": SHARED_CACHE_CONTROL}
    if body.encoded:
        headers["Vary"] = "Accept-Encoding"
        coding = choose_coding(request.headers.get("accept-encoding"), [e.coding for e in body.encoded])
        for encoded in body.encoded:
            if encoded.coding == coding:
                data, etag = encoded.data, encoded.etag
                headers["Content-Encoding"] = coding
    headers["ETag"] = quote_etag(etag)
    if is_not_modified(request.headers.get("if-none-match"), etag):
        # A 304 repeats the validators and caching headers of the 200 (RFC 9110 section 15.4.5);
        # Content-Encoding describes a body it does not have.
        headers.pop("Content-Encoding", None)
        return Response(status_code=304, headers=headers)
    return Response(content=data, media_type=media_type, headers=headers)
