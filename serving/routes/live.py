"""Live updates as Server-Sent Events (issue 30; ``serving/live.py`` says what is sent and when).

Two streams per edition: the shared one (page versions only; no cookie, no session is read, so
it carries nothing personal) and the signed-in reader's (page versions, and Breaking and keyword
alerts for that reader). Neither is cached anywhere (``no-store``). They are left out of the
OpenAPI document: a stream has no end for a schema client to read to (docs/readers.md documents them).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from serving.deps import NAME_PATTERN, EditionPath, SessionDep
from serving.head import is_head
from serving.live import Cursor, LiveConnection, LiveHub, stream
from serving.settings import ServingSettings

router = APIRouter(tags=["live"])

EVENT_STREAM = "text/event-stream"
SHARED_STREAM_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
PERSONAL_STREAM_HEADERS = {"Cache-Control": "private, no-store", "Vary": "Authorization", "X-Accel-Buffering": "no"}
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", max_length=2048,
                                           description="The id of the last event received (a cursor).")]


async def _open(request: Request, edition: str, reader_hash: str | None, last_event_id: str | None,
                headers: dict[str, str]) -> Response:
    if is_head(request.scope):
        return Response(media_type=EVENT_STREAM, headers=headers)
    hub: LiveHub = request.app.state.live
    settings: ServingSettings = request.app.state.settings
    connection = LiveConnection(edition, reader_hash, asyncio.get_running_loop())
    cursor, first = await run_in_threadpool(hub.connect, connection, Cursor.decode(last_event_id))
    body = stream(hub, connection, cursor, first, settings.live_heartbeat_seconds, request.is_disconnected)
    return StreamingResponse(body, media_type=EVENT_STREAM, headers=headers)


@router.get("/v1/live/{edition}", include_in_schema=False)
async def shared_live(request: Request, edition: EditionPath, last_event_id: LastEventId = None) -> Response:
    """New page versions of the edition, as they go live (``event: pages``)."""
    return await _open(request, edition, None, last_event_id, SHARED_STREAM_HEADERS)


@router.get("/v1/me/live", include_in_schema=False)
async def personal_live(
    request: Request,
    session: SessionDep,
    edition: Annotated[str, Query(pattern=NAME_PATTERN, description="`{language}-{REGION}`.")] = "en-US",
    last_event_id: LastEventId = None,
) -> Response:
    """The shared stream's page versions, and this reader's Breaking and keyword alerts."""
    return await _open(request, edition, session.reader_hash, last_event_id, PERSONAL_STREAM_HEADERS)
