"""Errors raised at the I/O edge; each keeps the URL it concerns."""

from __future__ import annotations

from typing import Literal

from warehouse.errors import NewsroomError

FetchErrorKind = Literal[
    "blocked_address", "dns", "connect", "timeout", "too_large", "too_many_redirects", "http_status",
    "robots_disallowed", "protocol", "bad_url",
]


class FetchError(NewsroomError):
    """A fetch that did not produce a usable response."""

    def __init__(self, kind: FetchErrorKind, message: str, *, url: str, status: int | None = None,
                 retry_after: str | None = None) -> None:
        super().__init__(f"{kind}: {message} (url={url})")
        self.kind = kind
        self.url = url
        self.status = status
        self.retry_after = retry_after
