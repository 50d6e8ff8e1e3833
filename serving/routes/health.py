"""Liveness and what this replica holds."""

from __future__ import annotations

from fastapi import APIRouter

from serving.deps import CacheDep
from serving.models import HealthPublic

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthPublic, summary="Pages held and the story snapshot version")
def healthz(cache: CacheDep) -> HealthPublic:
    state = cache.state
    return HealthPublic(
        status="ok" if state.last_refresh_ok else "degraded",
        pages=len(state.pages),
        stories_version=state.stories.version if state.stories else None,
    )
