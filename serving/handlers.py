"""The one place that maps domain errors to HTTP answers.

Routes raise; they never catch. Error bodies are ``{"detail": "..."}`` like FastAPI's own. No
error body echoes what a client sent (ids, bodies, query values): an echo can hold text that JSON
cannot carry (a lone surrogate) or numbers it cannot (``NaN``, ``1e400``), and would turn a 4xx
into a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, TypedDict

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from newsroom.errors import NewsroomError
from serving.errors import (
    BadCursorError,
    CursorExpiredError,
    InvalidTokenError,
    LiveStreamsFullError,
    NotSignedInError,
    OverloadedError,
    PageNotFoundError,
    ProfileStoreError,
    SearchUnavailableError,
    SourceRefusedError,
    StoryMovedError,
    StoryNotFoundError,
    TooManyError,
    TopicNotFoundError,
    UnknownArticleError,
    UnsignableUrlError,
)
from serving.responses import SHARED_CACHE_CONTROL
from warehouse.errors import SnapshotNotFoundError
from warehouse.search_index import SearchQueryError

logger = logging.getLogger(__name__)

_NO_STORE = {"Cache-Control": "no-store"}
_PRIVATE = {"Cache-Control": "private"}
_NOT_FOUND_DETAIL: dict[type[Exception], str] = {
    PageNotFoundError: "no live page for this edition and section",
    StoryNotFoundError: "no live story with this id",
    TopicNotFoundError: "no live stories about this topic",
}


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
    if isinstance(exc, SearchQueryError):
        # The message says what is wrong with the query and never repeats it.
        return JSONResponse({"detail": f"invalid query: {exc}"}, status_code=400, headers=_NO_STORE)
    if isinstance(exc, SearchUnavailableError):
        return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "30", **_NO_STORE})
    if isinstance(exc, LiveStreamsFullError):
        return JSONResponse({"detail": str(exc)}, status_code=503,
                            headers={"Retry-After": str(exc.retry_after_seconds), **_NO_STORE})
    if isinstance(exc, TooManyError):
        headers = dict(_PRIVATE)
        if exc.retry_after_seconds is not None:
            headers["Retry-After"] = str(exc.retry_after_seconds)
        return JSONResponse({"detail": str(exc)}, status_code=exc.status, headers=headers)
    if isinstance(exc, SourceRefusedError):
        return JSONResponse({"detail": str(exc)}, status_code=exc.status, headers=_PRIVATE)
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


class ValidationErrorJson(TypedDict):
    """One entry of a 422's ``detail``: where, what type and why."""

    type: str
    loc: list[str | int]
    msg: str


def validation_error_detail(errors: Sequence[Any]) -> list[ValidationErrorJson]:
    """FastAPI's validation errors without ``input`` and ``ctx``: only where, what type and why.

    ``input`` echoes the request (a lone surrogate or a ``NaN`` there cannot be rendered as
    JSON), and ``ctx`` may hold exception objects; neither helps a client fix its request more
    than ``loc`` and ``msg`` do.
    """
    out: list[ValidationErrorJson] = []
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
