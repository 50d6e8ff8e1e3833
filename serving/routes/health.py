"""Liveness and what this replica holds."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from serving.deps import CacheDep
from serving.models import DegradedPublic, HealthPublic, SkippedPublic

router = APIRouter(tags=["health"])


@router.get(
    "/healthz",
    response_model=HealthPublic,
    summary="Pages held, the story snapshot version, and what is degraded",
    responses={503: {"model": HealthPublic, "description": "No page can be served (nothing valid in the store, "
                                                           "or the store unreachable since start)."}},
)
def healthz(request: Request, cache: CacheDep, response: Response) -> HealthPublic:
    """200 while any page can be served, ``degraded`` naming what is served from an older valid
    version or not at all (a page, the story snapshot, a story a page lists: issue 32), with every
    version passed over and why; 503 when no page can be (issue 16), so a load balancer skips this
    replica.

    One damaged page does not fail the check: every replica reads the same store, so taking them
    all out would turn one bad page into an outage.
    """
    state = cache.state
    degraded = [DegradedPublic(what=d.what, problem=d.problem, serving_version=d.serving_version,
                               skipped=[SkippedPublic(version=s.version, problem=s.problem) for s in d.skipped])
                for d in state.degraded]
    if not state.pages:
        response.status_code = 503
        status = "unavailable"
    else:
        status = "ok" if state.last_refresh_ok and not degraded else "degraded"
    return HealthPublic(
        status=status,
        pages=len(state.pages),
        stories_version=state.stories.version if state.stories else None,
        search_version=held.version if (held := request.app.state.search.held) is not None else None,
        degraded=degraded,
    )
