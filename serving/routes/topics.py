"""Topic streams: live stories about a section slug or a named entity, newest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response

from serving.deps import NAME_PATTERN
from serving.models import ErrorPublic, TopicPagePublic
from serving.responses import shared_response
from serving.topics import TopicPages

router = APIRouter(prefix="/v1/topics", tags=["topics"])


@router.get(
    "/{topic_id}",
    response_model=TopicPagePublic,
    responses={
        304: {"description": "Not modified"},
        400: {"model": ErrorPublic, "description": "Not a cursor for this topic."},
        404: {"model": ErrorPublic},
        410: {"model": ErrorPublic, "description": "The cursor's snapshot is gone; start again."},
    },
    summary="Stories about one topic (a section slug or a named entity)",
)
def get_topic(
    request: Request,
    topic_id: Annotated[str, Path(pattern=NAME_PATTERN, description="Section slug or entity, e.g. `technology`.")],
    edition: Annotated[str | None, Query(pattern=NAME_PATTERN, description="Only stories in this edition.")] = None,
    cursor: Annotated[str | None, Query(max_length=512, description="`next_cursor` of the previous page.")] = None,
    limit: Annotated[int, Query(ge=1, le=50)] = 20,
) -> Response:
    topics: TopicPages = request.app.state.topics
    return shared_response(request, topics.page(topic_id, edition, cursor, limit))
