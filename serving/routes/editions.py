"""Edition pages: the published bytes of every live page, shared by every reader."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request, Response

from serving.deps import CacheDep, EditionPath, SectionPath
from serving.models import EditionListPublic, ErrorPublic, PagePublic, VersionPublic
from serving.responses import CachedBody, shared_response

router = APIRouter(prefix="/v1/editions", tags=["editions"])


@router.get("", response_model=EditionListPublic, summary="Editions and their live sections")
def list_editions(request: Request, cache: CacheDep) -> Response:
    return shared_response(request, cache.editions())


@router.get(
    "/{edition}/{section}",
    response_model=PagePublic,
    responses={304: {"description": "Not modified"}, 404: {"model": ErrorPublic}},
    summary="One live edition page, byte for byte as published",
)
def get_page(request: Request, cache: CacheDep, edition: EditionPath, section: SectionPath) -> Response:
    return shared_response(request, cache.page(edition, section).body)


@router.get(
    "/{edition}/{section}/version",
    response_model=VersionPublic,
    responses={304: {"description": "Not modified"}, 404: {"model": ErrorPublic}},
    summary="The live version of a page: a tiny answer the reader page polls for new stories",
)
def get_page_version(request: Request, cache: CacheDep, edition: EditionPath, section: SectionPath) -> Response:
    page = cache.page(edition, section)
    body = {"edition": edition, "section": section, "version": page.version, "as_of": page.pointer.published_at}
    data = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return shared_response(request, CachedBody.of(data))
