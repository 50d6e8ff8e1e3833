"""Topic streams: live stories about a section slug or a named entity, newest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response

from serving.atom import ATOM_MEDIA_TYPE, AtomFeeds, atom_feed
from serving.deps import NAME_PATTERN
from serving.models import ErrorPublic, TopicPagePublic
from serving.responses import shared_response
from serving.topics import TopicPages, normalize_topic, story_card

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


FEED_STORIES = 50


@router.get(
    "/{topic_id}/feed.atom",
    response_class=Response,
    responses={200: {"content": {ATOM_MEDIA_TYPE: {}}, "description": "The topic's stories, newest first."},
               304: {"description": "Not modified"}, 404: {"model": ErrorPublic}},
    summary="Stories about one topic as an Atom feed",
)
def get_topic_feed(
    request: Request,
    topic_id: Annotated[str, Path(pattern=NAME_PATTERN, description="Section slug or entity, e.g. `technology`.")],
    edition: Annotated[str | None, Query(pattern=NAME_PATTERN, description="Only stories in this edition.")] = None,
) -> Response:
    topics: TopicPages = request.app.state.topics
    feeds: AtomFeeds = request.app.state.atom
    topic = normalize_topic(topic_id)
    version, stories = topics.stories(topic, edition)
    base = str(request.base_url)
    url = f"{base}v1/topics/{topic}/feed.atom" + (f"?edition={edition}" if edition else "")

    def build() -> bytes:
        updated = max((str(s.get("updated_at") or "") for s in stories), default="") or "1970-01-01T00:00:00Z"
        return atom_feed(feed_id=url, title=f"newsroom · {topic}", updated=updated, self_url=url,
                         alternate_url=f"{base}#/", stories=[story_card(s) for s in stories[:FEED_STORIES]],
                         base_url=base)

    return shared_response(request, feeds.get(("topic", topic, edition, version, base), build),
                           media_type=ATOM_MEDIA_TYPE)
