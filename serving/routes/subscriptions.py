"""A reader's own sources (issue 30): suggest one, list them, drop one. Personal: ``Cache-Control: private``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from serving.deps import PersonalSlot, ProfilesDep, SessionDep, SettingsDep
from serving.models import ErrorPublic, SubscriptionListPublic, SubscriptionPublic, SubscriptionRequest
from serving.routes.readers import private_json
from serving.subscriptions import list_subscriptions, subscribe, unsubscribe

router = APIRouter(prefix="/v1/subscriptions", tags=["readers"])

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorPublic, "description": "Not signed in."},
    422: {"model": ErrorPublic, "description": "The address cannot be taken: not http(s), a private address, "
                                               "or neither a feed nor a page naming one. Nothing is written."},
    429: {"model": ErrorPublic, "description": "The reader suggested as many sources as one may (a day, or in "
                                               "all). Nothing is written."},
    502: {"model": ErrorPublic, "description": "The site could not be reached or took too long."},
    503: {"model": ErrorPublic, "description": "Shed under load or profiles unavailable; see Retry-After."},
}


@router.post("", response_model=SubscriptionPublic, status_code=201, responses={**_ERRORS, 200: {
    "model": SubscriptionPublic, "description": "The reader had suggested this feed already."}},
    summary="Suggest a source (a site's or a feed's address): queued for the next ingest run, shown to you "
            "until an operator accepts it")
def create_subscription(request: Request, _slot: PersonalSlot, session: SessionDep, profiles: ProfilesDep,
                        settings: SettingsDep, body: SubscriptionRequest) -> Response:
    status, answer = subscribe(request.app.state.store, profiles, session.reader_hash, body.url, settings)
    return private_json(answer, status_code=status)


@router.get("", response_model=SubscriptionListPublic, responses=_ERRORS,
            summary="Your suggested sources, with what ingest found in each")
def get_subscriptions(request: Request, _slot: PersonalSlot, session: SessionDep, profiles: ProfilesDep) -> Response:
    sources = list_subscriptions(request.app.state.store, profiles, session.reader_hash)
    return private_json({"sources": sources})


@router.delete("/{feed_id}", response_model=SubscriptionListPublic, responses=_ERRORS,
               summary="Drop one of your suggested sources")
def delete_subscription(
    request: Request, _slot: PersonalSlot, session: SessionDep, profiles: ProfilesDep,
    feed_id: Annotated[str, Path(pattern=r"^p[0-9a-f]{18}$", description="`feed_id` of a suggested source.")],
) -> Response:
    unsubscribe(profiles, session.reader_hash, feed_id)
    return private_json({"sources": list_subscriptions(request.app.state.store, profiles,
                                                       session.reader_hash)})
