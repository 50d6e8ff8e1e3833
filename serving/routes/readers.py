"""Personal endpoints: sign-in, profile, follows, hides and For you. Always ``Cache-Control: private``."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from serving.cursors import MAX_FEED_CURSOR_CHARS
from serving.deps import (
    NAME_PATTERN,
    RETRY_AFTER_SECONDS,
    InFlightLimit,
    PersonalSlot,
    ProfilesDep,
    SessionDep,
    SignerDep,
)
from serving.errors import OverloadedError, TooManyError
from serving.feed import PoolCache, build_feed, feed_mode, load_profile
from serving.models import (
    ErrorPublic,
    FeedPublic,
    HideRequest,
    KeywordRequest,
    ProfilePublic,
    SessionPublic,
    SessionRequest,
)
from serving.profile_cache import ProfileCache
from serving.profiles import BREAKING_ALERT, ProfileStore
from serving.signing import Session
from warehouse.search_index import MAX_QUERY_CHARS, parse_query

router = APIRouter(prefix="/v1", tags=["readers"])

PRIVATE_HEADERS = {"Cache-Control": "private", "Vary": "Authorization"}
_PERSONAL_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorPublic, "description": "Not signed in."},
    503: {"model": ErrorPublic, "description": "Shed under load or profiles unavailable; see Retry-After."},
}


def private_json(content: object, status_code: int = 200) -> JSONResponse:
    return JSONResponse(content, status_code=status_code, headers=PRIVATE_HEADERS)


def _profile_json(profiles: ProfileStore, session: Session) -> dict[str, object]:
    p = profiles.load(session.reader_hash)
    return ProfilePublic(
        reader=session.reader,
        follows={"topic": sorted(p.followed_topics), "source": sorted(p.followed_sources),
                 "keyword": sorted(p.followed_keywords)},
        breaking_alerts=p.breaking_alerts,
        hides={"source": sorted(p.hidden_sources), "story": sorted(p.hidden_stories)},
        topic_weights=dict(sorted(p.topic_weights.items(), key=lambda kv: (-kv[1], kv[0]))),
        source_weights=dict(sorted(p.source_weights.items(), key=lambda kv: (-kv[1], kv[0]))),
        reads=len(p.reads),
    ).model_dump(mode="json")


@router.post(
    "/session",
    response_model=SessionPublic,
    summary="Sign in (demo): a signed, expiring session token for a reader name",
)
def create_session(body: SessionRequest, signer: SignerDep) -> Response:
    token, session = signer.issue_session(body.reader)
    return private_json(SessionPublic(token=token, reader=session.reader, expires_at=session.expires_at).model_dump())


@router.get("/me", response_model=ProfilePublic, responses=_PERSONAL_ERRORS, summary="The signed-in reader's profile")
def get_me(_slot: PersonalSlot, session: SessionDep, profiles: ProfilesDep) -> Response:
    return private_json(_profile_json(profiles, session))


FollowKindPath = Annotated[Literal["topic", "source"], Path(description="`topic` or `source`.")]
TargetPath = Annotated[str, Path(pattern=NAME_PATTERN, description="A section slug, entity or publisher id.")]


@router.put(
    "/me/follows/{kind}/{target_id}",
    response_model=ProfilePublic,
    responses=_PERSONAL_ERRORS,
    summary="Follow a topic or a source",
)
def follow(
    _slot: PersonalSlot, session: SessionDep, profiles: ProfilesDep, kind: FollowKindPath, target_id: TargetPath
) -> Response:
    profiles.follow(session.reader_hash, kind, target_id)
    return private_json(_profile_json(profiles, session))


@router.delete(
    "/me/follows/{kind}/{target_id}",
    response_model=ProfilePublic,
    responses=_PERSONAL_ERRORS,
    summary="Stop following a topic or a source",
)
def unfollow(
    _slot: PersonalSlot, session: SessionDep, profiles: ProfilesDep, kind: FollowKindPath, target_id: TargetPath
) -> Response:
    profiles.unfollow(session.reader_hash, kind, target_id)
    return private_json(_profile_json(profiles, session))


MAX_KEYWORDS = 20
"""Keywords one reader follows at most: each is matched against every pool and new story."""


@router.post(
    "/me/keywords",
    response_model=ProfilePublic,
    responses={**_PERSONAL_ERRORS,
               400: {"model": ErrorPublic, "description": "The query cannot be followed; `detail` says why."},
               409: {"model": ErrorPublic, "description": f"The reader follows {MAX_KEYWORDS} keywords already."}},
    summary="Follow a keyword: For you boosts the stories matching it, the live stream announces new ones",
)
def follow_keyword(_slot: PersonalSlot, session: SessionDep, profiles: ProfilesDep, body: KeywordRequest) -> Response:
    text = parse_query(body.query).text
    current = profiles.load(session.reader_hash).followed_keywords
    if text not in current and len(current) >= MAX_KEYWORDS:
        raise TooManyError(f"you follow {MAX_KEYWORDS} keywords already; unfollow one first", status=409)
    profiles.follow(session.reader_hash, "keyword", text)
    return private_json(_profile_json(profiles, session))


@router.delete(
    "/me/keywords",
    response_model=ProfilePublic,
    responses={**_PERSONAL_ERRORS, 400: {"model": ErrorPublic}},
    summary="Stop following a keyword",
)
def unfollow_keyword(
    _slot: PersonalSlot, session: SessionDep, profiles: ProfilesDep,
    q: Annotated[str, Query(min_length=1, max_length=4 * MAX_QUERY_CHARS, description="The keyword as followed.")],
) -> Response:
    profiles.unfollow(session.reader_hash, "keyword", parse_query(q).text)
    return private_json(_profile_json(profiles, session))


@router.put("/me/alerts/breaking", response_model=ProfilePublic, responses=_PERSONAL_ERRORS,
            summary="Opt in to Breaking alerts on the live stream")
def opt_in_breaking(_slot: PersonalSlot, session: SessionDep, profiles: ProfilesDep) -> Response:
    profiles.follow(session.reader_hash, "alert", BREAKING_ALERT)
    return private_json(_profile_json(profiles, session))


@router.delete("/me/alerts/breaking", response_model=ProfilePublic, responses=_PERSONAL_ERRORS,
               summary="Opt out of Breaking alerts")
def opt_out_breaking(_slot: PersonalSlot, session: SessionDep, profiles: ProfilesDep) -> Response:
    profiles.unfollow(session.reader_hash, "alert", BREAKING_ALERT)
    return private_json(_profile_json(profiles, session))


@router.post(
    "/me/hide",
    response_model=ProfilePublic,
    responses=_PERSONAL_ERRORS,
    summary="Hide a source or a story from For you",
)
def hide(_slot: PersonalSlot, session: SessionDep, profiles: ProfilesDep, body: HideRequest) -> Response:
    if body.source is not None:
        profiles.hide(session.reader_hash, "source", body.source)
    if body.story is not None:
        profiles.hide(session.reader_hash, "story", body.story)
    return private_json(_profile_json(profiles, session))


@router.get(
    "/feed",
    response_model=FeedPublic,
    responses={
        **_PERSONAL_ERRORS,
        400: {"model": ErrorPublic, "description": "Not a cursor for this feed."},
        404: {"model": ErrorPublic},
        410: {"model": ErrorPublic, "description": "The cursor's pool is gone; start again."},
    },
    summary="For you: the edition's stories re-ranked for the signed-in reader",
)
async def get_feed(
    request: Request,
    session: SessionDep,
    edition: Annotated[str, Query(pattern=NAME_PATTERN, description="`{language}-{REGION}`.")] = "en-US",
    section: Annotated[
        str | None,
        Query(pattern=NAME_PATTERN, description="Only stories in this section (a slug such as `technology`), "
              "ranked for the reader; its own cursor. No story in it: an empty page."),
    ] = None,
    cursor: Annotated[
        str | None, Query(max_length=MAX_FEED_CURSOR_CHARS, description="`next_cursor` of the previous page.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=50)] = 20,
) -> Response:
    # On the event loop: with the pool built and the profile in the replica's cache, a request
    # touches no store and needs no thread. Building a pool or reading a profile from the store
    # goes to the thread pool. The personal slot is held here, not through PersonalSlot: a
    # generator dependency costs FastAPI an exit stack on every request (issue 29).
    slots: InFlightLimit = request.app.state.personal_limit
    if not slots.try_acquire():
        raise OverloadedError(RETRY_AFTER_SECONDS)
    try:
        pools: PoolCache = request.app.state.pools
        profiles: ProfileCache = request.app.state.profiles
        pool = pools.current(edition)
        if pool is None:
            pool = await run_in_threadpool(pools.pool, edition)
        profile = profiles.cached(session.reader_hash)
        if profile is not None:
            mode = feed_mode(profile)
        else:
            profile, mode = await run_in_threadpool(load_profile, profiles, session.reader_hash)
        body = build_feed(pool=pool, profile=profile, mode=mode, edition=edition, section=section, cursor=cursor,
                          limit=limit)
    finally:
        slots.release()
    # The bytes as built: FeedPublic documents them (a test holds them to it); no re-validation.
    return Response(body, media_type="application/json", headers=PRIVATE_HEADERS)
