"""Top stories for a locale: the matching edition's front page, shared by every reader."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from serving.cache import SnapshotCache
from serving.coverage import TOP_SECTION
from serving.deps import CacheDep
from serving.errors import PageNotFoundError
from serving.models import ErrorPublic, PagePublic
from serving.responses import shared_response

router = APIRouter(prefix="/v1/top", tags=["editions"])

LOCALE_PATTERN = r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,2}$"


def edition_for_locale(cache: SnapshotCache, locale: str) -> str:
    """The edition serving ``locale``: an exact match, else one in the same language, else any.

    Matching ignores case (``en-us`` is ``en-US``); ties go to the alphabetically first edition.
    """
    editions = sorted({e for e, s in cache.state.pages if s == TOP_SECTION})
    if not editions:
        raise PageNotFoundError(locale, TOP_SECTION)
    wanted = locale.lower()
    for edition in editions:
        if edition.lower() == wanted:
            return edition
    language = wanted.split("-")[0]
    for edition in editions:
        if edition.lower().split("-")[0] == language:
            return edition
    return editions[0]


@router.get(
    "",
    response_model=PagePublic,
    responses={304: {"description": "Not modified"}, 404: {"model": ErrorPublic}},
    summary="Top stories of the edition for a locale (e.g. `en-US`)",
)
def get_top(
    request: Request,
    cache: CacheDep,
    locale: Annotated[str, Query(pattern=LOCALE_PATTERN, description="A BCP 47 locale such as `en-US`.")] = "en-US",
) -> Response:
    return shared_response(request, cache.page(edition_for_locale(cache, locale), TOP_SECTION).body)
