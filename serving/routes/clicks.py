"""Clicks: signed tokens, logged durably, then a redirect to the publisher.

Shared pages keep the publishers' own URLs (identical bytes for everyone). The reader page asks
``POST /v1/click-token`` for a token when a reader follows a link from a shared page; For-you
cards already carry tokens signed for their reader. Only URLs that a live story lists are ever
signed, and ``/r/{token}`` redirects only to the URL inside a genuine, unexpired token: it is not
an open redirect.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response
from fastapi.security import HTTPAuthorizationCredentials

from serving.clicks import record_read_quietly
from serving.deps import ClickLogDep, ProfilesDep, SignerDep, _bearer
from serving.errors import UnknownArticleError
from serving.models import ClickTokenPublic, ClickTokenRequest, ErrorPublic
from serving.routes.readers import private_json

router = APIRouter(tags=["clicks"])


@router.post(
    "/v1/click-token",
    response_model=ClickTokenPublic,
    responses={404: {"model": ErrorPublic, "description": "No live story lists this article."}},
    summary="A signed click URL for an article on a live page",
)
def create_click_token(
    request: Request,
    body: ClickTokenRequest,
    signer: SignerDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Response:
    article = request.app.state.cache.article(body.article_id)
    if article is None:
        raise UnknownArticleError(body.article_id)
    # An expired or missing session still gets its click, anonymously.
    reader_hash = signer.reader_hash_or_anonymous(credentials.credentials if credentials else None)
    token = signer.issue_click(
        article_id=article.article_id, story_id=article.story_id, url=article.url,
        reader_hash=reader_hash, surface=body.surface, position=body.position,
    )
    return private_json(ClickTokenPublic(token=token, click_url=f"/r/{token}").model_dump())


@router.get(
    "/r/{token}",
    status_code=302,
    response_class=Response,
    responses={
        302: {"description": "Click logged; `Location` is the publisher's article."},
        400: {"model": ErrorPublic, "description": "Forged, malformed or expired token: no redirect."},
    },
    summary="Log a click, then redirect to the publisher",
)
def follow_click(
    token: Annotated[str, Path(max_length=4096)],
    signer: SignerDep,
    clicks: ClickLogDep,
    profiles: ProfilesDep,
) -> Response:
    click = signer.verify_click(token)
    now = time.time()
    clicks.append(token, click, datetime.fromtimestamp(now, UTC))  # durable before the 302
    record_read_quietly(profiles, click, now)
    return Response(
        status_code=302,
        headers={
            "Location": click.url,
            "Cache-Control": "no-store",
            # The token is in our URL; send publishers our origin only.
            "Referrer-Policy": "origin",
        },
    )
