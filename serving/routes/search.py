"""Search over the live window (issue 30): shared answers and an Atom feed per query."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Query, Request, Response

from serving.atom import ATOM_MEDIA_TYPE, AtomFeeds, atom_feed
from serving.deps import NAME_PATTERN
from serving.models import ErrorPublic, SearchPagePublic
from serving.responses import shared_response
from serving.search import SearchService
from warehouse.search_index import MAX_QUERY_CHARS, parse_query

router = APIRouter(prefix="/v1/search", tags=["search"])

QUERY_DESCRIPTION = (
    f"What to look for (at most {MAX_QUERY_CHARS} characters): words (all required), \"a phrase\", "
    "-word or -\"a phrase\" to leave out, OR between two words or phrases. A Chinese or Japanese word is "
    "matched as its characters in a row."
)
_ERRORS: dict[int | str, dict[str, object]] = {
    304: {"description": "Not modified"},
    400: {"model": ErrorPublic, "description": "The query cannot be searched (too long, malformed, or nothing "
                                               "to look for); `detail` says why."},
    503: {"model": ErrorPublic, "description": "No search index is loaded yet; see Retry-After."},
}
# The transport cap is looser than the query's own, so an over-long query gets the query's reason.
QueryParam = Annotated[str, Query(min_length=1, max_length=4 * MAX_QUERY_CHARS, description=QUERY_DESCRIPTION)]
EditionParam = Annotated[str | None, Query(pattern=NAME_PATTERN, description="Only stories of this edition.")]
SectionParam = Annotated[str | None, Query(pattern=NAME_PATTERN, description="Only stories in this section.")]
PublisherParam = Annotated[str | None, Query(pattern=NAME_PATTERN, description="Only stories this publisher covered.")]
LanguageParam = Annotated[str | None, Query(pattern=r"^[a-z]{2,3}$", description="Only stories in this language.")]


def _instant(since: datetime | None) -> str | None:
    if since is None:
        return None
    at = since if since.tzinfo is not None else since.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@router.get("", response_model=SearchPagePublic, responses=_ERRORS,
            summary="Stories of the last 48 hours matching a query, with facets")
def search(
    request: Request,
    q: QueryParam,
    edition: EditionParam = None,
    section: SectionParam = None,
    publisher: PublisherParam = None,
    language: LanguageParam = None,
    since: Annotated[datetime | None, Query(description="Only stories updated at or after this instant "
                                                        "(ISO 8601; UTC when no offset is given).")] = None,
    limit: Annotated[int, Query(ge=1, le=50)] = 20,
    offset: Annotated[int, Query(ge=0, le=500, description="`next_offset` of the previous page.")] = 0,
) -> Response:
    service: SearchService = request.app.state.search
    body = service.answer(parse_query(q), edition=edition, section=section, publisher=publisher, language=language,
                          since=_instant(since), limit=limit, offset=offset)
    return shared_response(request, body)


FEED_STORIES = 50


@router.get("/feed.atom", response_class=Response, responses={**_ERRORS, 200: {
    "content": {ATOM_MEDIA_TYPE: {}}, "description": "An Atom feed of the stories matching the query, newest first."}},
    summary="An Atom feed of a search")
def search_feed(request: Request, q: QueryParam, edition: EditionParam = None, section: SectionParam = None) -> Response:
    service: SearchService = request.app.state.search
    feeds: AtomFeeds = request.app.state.atom
    query = parse_query(q)
    held = service.index()
    base = str(request.base_url)

    def build() -> bytes:
        found = held.index.search(query, edition=edition, section=section, limit=FEED_STORIES, facets=False)
        stories = sorted((dict(h.card) for h in found.hits),
                         key=lambda s: (str(s.get("updated_at")), str(s.get("story_id"))), reverse=True)
        params = f"q={_quote(query.text)}" + (f"&edition={edition}" if edition else "") + \
            (f"&section={section}" if section else "")
        return atom_feed(feed_id=f"{base}v1/search/feed.atom?{params}", title=f"newsroom · {query.text}",
                         updated=held.as_of or "1970-01-01T00:00:00Z", self_url=f"{base}v1/search/feed.atom?{params}",
                         alternate_url=f"{base}#/search?{params}", stories=stories, base_url=base)

    body = feeds.get(("search", held.version, base, query.text, edition, section), build)
    return shared_response(request, body, media_type=ATOM_MEDIA_TYPE)


def _quote(text: str) -> str:
    return quote(text, safe="")
