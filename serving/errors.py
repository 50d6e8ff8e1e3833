"""Errors serving raises on purpose, each keeping the id it concerns.

Routes raise them and never catch; :mod:`serving.handlers` maps each to its HTTP answer. This
module holds only the classes, so every serving module can import it without pulling in the
answers (and what they import) with it.
"""

from __future__ import annotations

from newsroom.errors import NewsroomError
from warehouse.errors import SnapshotNotFoundError


class ServingError(NewsroomError):
    """Base of every error serving raises on purpose."""


class PageNotFoundError(SnapshotNotFoundError):
    """No live version of ``edition``/``section``."""

    def __init__(self, edition: str, section: str) -> None:
        super().__init__(f"no live page {edition}/{section}")
        self.edition = edition
        self.section = section


class StoryNotFoundError(SnapshotNotFoundError):
    """``story_id`` is neither in the live story snapshot nor an alias of a story in it."""

    def __init__(self, story_id: str) -> None:
        super().__init__(f"no live story {story_id}")
        self.story_id = story_id


class TopicNotFoundError(SnapshotNotFoundError):
    """No live story is about ``topic``."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"no live stories about {topic}")
        self.topic = topic


class StoryMovedError(ServingError):
    """``story_id`` was merged into ``survivor``: answered with a permanent redirect."""

    def __init__(self, story_id: str, survivor: str) -> None:
        super().__init__(f"story {story_id} was merged into {survivor}")
        self.story_id = story_id
        self.survivor = survivor


class InvalidTokenError(ServingError):
    """A click or session token that is forged, malformed or expired: 400, never a redirect."""


class NotSignedInError(ServingError):
    """A personal endpoint was called without a valid session: 401."""


class OverloadedError(ServingError):
    """Too many personal requests in flight: shed with 503 and ``Retry-After``."""

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__("too many personal requests; shared pages are still served")
        self.retry_after_seconds = retry_after_seconds


class BadCursorError(ServingError):
    """A cursor this server did not issue: 400."""


class CursorExpiredError(ServingError):
    """The snapshot a cursor was paging through is no longer live: 410, start again."""


class UnknownArticleError(ServingError):
    """A click token was asked for an article that no live story lists: 404.

    The message does not repeat the id: it is client input (see the module docstring).
    """

    def __init__(self, article_id: str) -> None:
        super().__init__("no live story lists this article")
        self.article_id = article_id


class UnsignableUrlError(ServingError):
    """An article's publisher URL cannot be signed (not http(s), too long, control characters): 422."""

    def __init__(self, article_id: str) -> None:
        super().__init__("this article's publisher URL cannot be linked to")
        self.article_id = article_id


class ProfileStoreError(ServingError):
    """The profile store failed (unreachable, locked, corrupt)."""


class ClickLogError(ServingError):
    """The clicks log could not store a click (the object store is unreachable or failing)."""


class SearchUnavailableError(ServingError):
    """No search index is loaded yet (none published, or none this replica could read): 503."""

    def __init__(self) -> None:
        super().__init__("search is not available yet; try again shortly")


class TooManyError(ServingError):
    """A reader is past a limit (subscriptions a day, keywords followed): 429 or 409, nothing written."""

    def __init__(self, message: str, *, status: int = 429, retry_after_seconds: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_seconds = retry_after_seconds


class LiveStreamsFullError(ServingError):
    """This replica holds as many live streams as it may: 503 with Retry-After (another replica may have room)."""

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__("too many live streams on this server; reconnect shortly")
        self.retry_after_seconds = retry_after_seconds


class SourceRefusedError(ServingError):
    """A source a reader suggested that cannot be taken: not a URL we may fetch, a private address,
    no feed there (422), or unreachable (502). The message names why, never the URL."""

    def __init__(self, message: str, *, status: int = 422) -> None:
        super().__init__(message)
        self.status = status
