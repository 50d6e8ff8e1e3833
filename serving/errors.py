"""Serving errors and the one handler that maps domain errors to HTTP answers.

Routes raise; they never catch. Error bodies are ``{"detail": "..."}`` like FastAPI's own. No
error body echoes what a client sent (ids, bodies, query values): an echo can hold text that JSON
cannot carry (a lone surrogate) or numbers it cannot (``NaN``, ``1e400``), and would turn a 4xx
into a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from serving.responses import SHARED_CACHE_CONTROL
from warehouse.errors import NewsroomError, SnapshotNotFoundError

logger = logging.getLogger(__name__)

_NO_STORE = {"Cache-Control": "no-store"}
_NOT_FOUND_DETAIL: dict[type[Exception], str] = {}  # filled below the classes
_PRIVATE = {"Cache-Control": "private"}


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


_NOT_FOUND_DETAIL.update({
    PageNotFoundError: "no live page for this edition and section",
    StoryNotFoundError: "no live story with this id",
    TopicNotFoundError: "no live stories about this topic",
})


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


async def handle_newsroom_error(request: Request, exc: Exception) -> Response:
    """Map domain errors to HTTP: not found → 404, merged story → 301; anything else → 500."""
    if isinstance(exc, StoryMovedError):
        # Merges are permanent, so the redirect is as cacheable as the story itself.
        return Response(
            status_code=301,
            headers={
                "Location": str(request.app.url_path_for("get_story", story_id=exc.survivor)),
                "Cache-Control": SHARED_CACHE_CONTROL,
            },
        )
    if isinstance(exc, InvalidTokenError):
        return JSONResponse({"detail": f"invalid token: {exc}"}, status_code=400, headers=_NO_STORE)
    if isinstance(exc, BadCursorError):
        return JSONResponse({"detail": f"invalid cursor: {exc}"}, status_code=400)
    if isinstance(exc, CursorExpiredError):
        return JSONResponse({"detail": str(exc)}, status_code=410)
    if isinstance(exc, NotSignedInError):
        return JSONResponse(
            {"detail": str(exc)}, status_code=401, headers={"WWW-Authenticate": "Bearer", **_PRIVATE}
        )
    if isinstance(exc, OverloadedError):
        return JSONResponse(
            {"detail": str(exc)},
            status_code=503,
            headers={"Retry-After": str(exc.retry_after_seconds), **_PRIVATE},
        )
    if isinstance(exc, ProfileStoreError):
        logger.warning("profile_store_failed path=%s error=%s", request.url.path, exc)
        return JSONResponse(
            {"detail": "profiles are unavailable; try again shortly"},
            status_code=503,
            headers={"Retry-After": "5", **_PRIVATE},
        )
    if isinstance(exc, UnknownArticleError):
        return JSONResponse({"detail": str(exc)}, status_code=404)
    if isinstance(exc, UnsignableUrlError):
        return JSONResponse({"detail": str(exc)}, status_code=422)
    if isinstance(exc, (PageNotFoundError, StoryNotFoundError, TopicNotFoundError)):
        # The message names the edition, story or topic for logs; the body never echoes it (#16).
        return JSONResponse({"detail": _NOT_FOUND_DETAIL[type(exc)]}, status_code=404)
    if isinstance(exc, SnapshotNotFoundError):
        # A warehouse message names an object key: an internal detail, not for readers.
        return JSONResponse({"detail": "not found"}, status_code=404)
    logger.error("unhandled_error path=%s error=%s: %s", request.url.path, type(exc).__name__, exc)
    return JSONResponse({"detail": "internal error"}, status_code=500)


_MAX_LOC_CHARS = 64


def _safe_text(text: str, limit: int | None = None) -> str:
    """``text`` as valid Unicode: lone surrogates become ``\\udXXX`` escapes, then truncated."""
    safe = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return safe if limit is None else safe[:limit]


def _safe_loc(loc: Sequence[Any]) -> list[str | int]:
    return [
        part if isinstance(part, int) and not isinstance(part, bool) else _safe_text(str(part), _MAX_LOC_CHARS)
        for part in loc
    ]


def validation_error_detail(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """FastAPI's validation errors without ``input`` and ``ctx``: only where, what type and why.

    ``input`` echoes the request (a lone surrogate or a ``NaN`` there cannot be rendered as
    JSON), and ``ctx`` may hold exception objects; neither helps a client fix its request more
    than ``loc`` and ``msg`` do.
    """
    out = []
    for error in errors:
        if not isinstance(error, dict):
            continue
        out.append({
            "type": _safe_text(str(error.get("type", "")), _MAX_LOC_CHARS),
            "loc": _safe_loc(error.get("loc") or ()),
            "msg": _safe_text(str(error.get("msg", "")), 500),
        })
    return out


async def handle_validation_error(request: Request, exc: Exception) -> Response:
    """422 for a request that does not validate, in FastAPI's shape minus the echoed input."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    return JSONResponse({"detail": validation_error_detail(errors)}, status_code=422, headers=_NO_STORE)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(NewsroomError, handle_newsroom_error)
    app.add_exception_handler(RequestValidationError, handle_validation_error)
