"""Dependencies as ``Annotated`` aliases.

Shared endpoints use only ``CacheDep`` and path/query values: they never read cookies or
credentials. Only personal endpoints take ``SessionDep`` (``Authorization: Bearer``) and
``PersonalSlot`` (load shedding).

Every dependency here is ``async def``: each only reads app state or checks an HMAC, and FastAPI
runs a plain ``def`` dependency on the thread pool, a hand-off that cost more than the work (the
For-you profile in issue 29: five hand-offs a request, about a third of its time).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from serving.cache import SnapshotCache
from serving.clicks import ClickLog
from serving.errors import InvalidTokenError, NotSignedInError, OverloadedError
from serving.profiles import ProfileStore
from serving.settings import ServingSettings
from serving.signing import Session, Signer

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""Editions, sections and story ids: the same safe names `warehouse.layout` accepts in keys."""

RETRY_AFTER_SECONDS = 5


async def get_cache(request: Request) -> SnapshotCache:
    cache: SnapshotCache = request.app.state.cache
    return cache


async def get_app_settings(request: Request) -> ServingSettings:
    settings: ServingSettings = request.app.state.settings
    return settings


async def get_signer(request: Request) -> Signer:
    signer: Signer = request.app.state.signer
    return signer


async def get_profiles(request: Request) -> ProfileStore:
    profiles: ProfileStore = request.app.state.profiles
    return profiles


async def get_click_log(request: Request) -> ClickLog:
    log: ClickLog = request.app.state.click_log
    return log


_bearer = HTTPBearer(auto_error=False, description="A session token from `POST /v1/session`.")


async def get_session(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Session:
    if credentials is None:
        raise NotSignedInError("sign in first: POST /v1/session")
    signer: Signer = request.app.state.signer
    try:
        return signer.verify_session(credentials.credentials)
    except InvalidTokenError as e:
        raise NotSignedInError(f"session refused: {e}") from e


class InFlightLimit:
    """A non-blocking cap on requests in flight: over it, shed at once instead of queueing."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0
        self._lock = threading.Lock()

    def try_acquire(self) -> bool:
        with self._lock:
            if self.in_flight >= self.limit:
                return False
            self.in_flight += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.in_flight -= 1


async def personal_slot(request: Request) -> AsyncIterator[None]:
    """Hold one personal slot for the request, or shed it with 503 + Retry-After."""
    limit: InFlightLimit = request.app.state.personal_limit
    if not limit.try_acquire():
        raise OverloadedError(RETRY_AFTER_SECONDS)
    try:
        yield
    finally:
        limit.release()


CacheDep = Annotated[SnapshotCache, Depends(get_cache)]
SettingsDep = Annotated[ServingSettings, Depends(get_app_settings)]
SignerDep = Annotated[Signer, Depends(get_signer)]
ProfilesDep = Annotated[ProfileStore, Depends(get_profiles)]
ClickLogDep = Annotated[ClickLog, Depends(get_click_log)]
SessionDep = Annotated[Session, Depends(get_session)]
PersonalSlot = Annotated[None, Depends(personal_slot)]

EditionPath = Annotated[str, Path(pattern=NAME_PATTERN, description="`{language}-{REGION}`, e.g. `en-US`.")]
SectionPath = Annotated[str, Path(pattern=NAME_PATTERN, description="`top` or a section slug.")]
StoryIdPath = Annotated[str, Path(pattern=NAME_PATTERN, description="A story id from a page.")]
