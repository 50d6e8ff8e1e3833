"""HTTP routes, one module per resource."""

from __future__ import annotations

from fastapi import APIRouter

from serving.routes import editions, health, reader, stories

api_router = APIRouter()
api_router.include_router(editions.router)
api_router.include_router(stories.router)
api_router.include_router(health.router)
api_router.include_router(reader.router)
