"""Serving errors and the one handler that maps domain errors to HTTP answers.

Routes raise; they never catch. Error bodies are ``{"detail": "..."}`` like FastAPI's own.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from serving.responses import SHARED_CACHE_CONTROL
from warehouse.errors import NewsroomError, SnapshotNotFoundError

logger = logging.getLogger(__name__)


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


class StoryMovedError(ServingError):
    """``story_id`` was merged into ``survivor``: answered with a permanent redirect."""

    def __init__(self, story_id: str, survivor: str) -> None:
        super().__init__(f"story {story_id} was merged into {survivor}")
        self.story_id = story_id
        self.survivor = survivor


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
    if isinstance(exc, (PageNotFoundError, StoryNotFoundError)):
        return JSONResponse({"detail": str(exc)}, status_code=404)
    if isinstance(exc, SnapshotNotFoundError):
        # A warehouse message names an object key: an internal detail, not for readers.
        return JSONResponse({"detail": "not found"}, status_code=404)
    logger.error("unhandled_error path=%s error=%s: %s", request.url.path, type(exc).__name__, exc)
    return JSONResponse({"detail": "internal error"}, status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(NewsroomError, handle_newsroom_error)
