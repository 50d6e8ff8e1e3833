"""Clicks: signed tokens, buffered by the replica, and a redirect to the publisher at once.

Shared pages keep the publishers' own URLs (identical bytes for everyone). The reader page asks
``POST /v1/click-token`` for a token when a reader follows a link; a signed-in reader sends the
session, which records the read in the reader's profile there and then and seals the reader's
pseudonym into the token (see ``serving.signing``). For-you cards also carry anonymous click URLs,
which anyone may share. Only URLs that a live story lists are ever signed, and ``/r/{token}``
redirects only to the URL inside a genuine, unexpired token: it is not an open redirect.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response
from fastapi.security import HTTPAuthorizationCredentials

from serving.clicks import log_click, record_read_quietly
from serving.deps import ClickLogDep, ProfilesDep, SignerDep, _bearer
from serving.errors import UnknownArticleError
from serving.head import is_head
from serving.models import ClickTokenPublic, ClickTokenRequest, ErrorPublic
from serving.routes.readers import private_json

router = APIRouter(tags=["clicks"])


@router.post(
    "/v1/click-token",
    response_model=ClickTokenPublic,
    responses={
        404: {"model": ErrorPublic, "description": "No live story lists this article."},
        422: {"description": "The request does not validate, or the article's URL cannot be linked to."},
    },
    summary="A signed click URL for an article on a live page (and, signed in, record the read)",
)
def create_click_token(
    request: Request,
    body: ClickTokenRequest,
    signer: SignerDep,
    profiles: ProfilesDep,
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
    # The reader's own session asked for this link to follow it: the read is theirs.
    record_read_quietly(profiles, reader_hash, article.story_id, time.time())
    return private_json(ClickTokenPublic(token=token, click_url=f"/r/{token}").model_dump())


@router.get(
    "/r/{token}",
    status_code=302,
    response_class=Response,
    responses={
        302: {"description": "`Location` is the publisher's article. `X-Click-Logged: buffered`: this "
                             "replica accepted the click (or a reload of it) and writes it to the clicks log "
                             "within one flush interval; `false`: the click was refused (the store has been "
                             "failing for long) and is only in the application log."},
        400: {"model": ErrorPublic, "description": "Forged, malformed or expired token: no redirect."},
    },
    summary="Log a click (buffered), and redirect to the publisher",
)
def follow_click(
    request: Request,
    token: Annotated[str, Path(max_length=4096)],
    signer: SignerDep,
    clicks: ClickLogDep,
) -> Response:
    click = signer.verify_click(token)
    # HEAD is safe (RFC 9110 section 9.2.1): a link checker asking where a token leads is no click.
    # Buffered in memory, never waiting on the store (serving.clicks): a store outage can cost a
    # click, never the reader's redirect.
    logged = not is_head(request.scope) and log_click(clicks, click, datetime.fromtimestamp(time.time(), UTC))
    headers = {
        "Location": click.url,
        "Cache-Control": "no-store",
        # The token is in our URL; send publishers our origin only.
        "Referrer-Policy": "origin",
        "X-Click-Logged": "buffered" if logged else "false",
    }
    return Response(status_code=302, headers=headers)
