"""Errors raised by pure transforms, on the one root every package shares (newsroom.errors)."""

from __future__ import annotations

from newsroom.errors import NewsroomError


class TransformError(NewsroomError):
    """Base of every error a transform raises on purpose."""


class ExtractionError(TransformError):
    """A page could not be turned into an :class:`~transforms.extraction.ExtractedPage`.

    :func:`transforms.extraction.extract_page` does not raise this for bad HTML (it returns a
    page with empty text instead); it is raised only for arguments that make no sense, such as
    a non-positive ``max_bytes``. The URL is kept for the caller's failure record.
    """

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(f"{message} (url={url})" if url else message)
        self.url = url


class FeedRejectedError(TransformError):
    """A feed body was refused before parsing: too large, or it declares XML entities.

    :func:`transforms.feeds.parse_feed` raises this only for input that is unsafe to hand to an
    XML parser (entity expansion, "billion laughs", external entities) or that exceeds the size
    cap. Merely malformed feeds are returned with ``is_malformed=True`` instead. The URL and the
    reason are kept for the caller's failure record.
    """

    def __init__(self, reason: str, *, url: str | None = None) -> None:
        super().__init__(f"feed rejected: {reason} (url={url})" if url else f"feed rejected: {reason}")
        self.reason = reason
        self.url = url


class FeedDeclinedError(TransformError):
    """The lxml feed reader will not replay a document as feedparser would (a DOCTYPE, an element out
    of place, not RSS or Atom, ...): caught inside :mod:`transforms.feeds`, which then hands the
    document to feedparser. Never reaches a caller of :func:`transforms.feeds.parse_feed`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class EmbeddingModelError(TransformError):
    """The installed encoder is not the release this code embeds with (vectors would drift)."""
