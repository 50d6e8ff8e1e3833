"""HTTP routes, one module per resource."""

from __future__ import annotations

from fastapi import APIRouter

from serving.routes import (
    clicks,
    editions,
    health,
    live,
    reader,
    readers,
    search,
    stories,
    subscriptions,
    top,
    topics,
)

api_router = APIRouter()
api_router.include_router(editions.router)
api_router.include_router(top.router)
api_router.include_router(topics.router)
api_router.include_router(stories.router)
api_router.include_router(search.router)
api_router.include_router(live.router)
api_router.include_router(subscriptions.router)
api_router.include_router(readers.router)
api_router.include_router(clicks.router)
api_router.include_router(health.router)
api_router.include_router(reader.router)
