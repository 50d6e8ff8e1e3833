"""Edition pages: the published bytes of every live page, shared by every reader."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request, Response

from serving.atom import ATOM_MEDIA_TYPE, AtomFeeds, atom_feed
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


@router.get(
    "/{edition}/{section}/feed.atom",
    response_class=Response,
    responses={200: {"content": {ATOM_MEDIA_TYPE: {}}, "description": "The page's stories as an Atom feed."},
               304: {"description": "Not modified"}, 404: {"model": ErrorPublic}},
    summary="One live edition page as an Atom feed (stable entry ids, the page's representative links)",
)
def get_page_feed(request: Request, cache: CacheDep, edition: EditionPath, section: SectionPath) -> Response:
    page = cache.page(edition, section)
    feeds: AtomFeeds = request.app.state.atom
    base = str(request.base_url)
    url = f"{base}v1/editions/{edition}/{section}/feed.atom"

    def build() -> bytes:
        return atom_feed(feed_id=url, title=f"newsroom · {edition} · {section}",
                         updated=page.pointer.published_at, self_url=url, alternate_url=f"{base}#/e/{edition}/{section}",
                         stories=page.stories, base_url=base)

    return shared_response(request, feeds.get(("page", edition, section, page.pointer.sha256, base), build),
                           media_type=ATOM_MEDIA_TYPE)
