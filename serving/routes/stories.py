"""Story Full Coverage: every article of one story, oldest first."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from serving.deps import CacheDep, StoryIdPath
from serving.models import ErrorPublic, FullCoveragePublic
from serving.responses import shared_response

router = APIRouter(prefix="/v1/stories", tags=["stories"])


@router.get(
    "/{story_id}",
    name="get_story",
    response_model=FullCoveragePublic,
    responses={
        301: {"description": "The story was merged; `Location` names the surviving story."},
        304: {"description": "Not modified"},
        404: {"model": ErrorPublic},
    },
    summary="Full Coverage of one story",
)
def get_story(request: Request, cache: CacheDep, story_id: StoryIdPath) -> Response:
    return shared_response(request, cache.story(story_id))
