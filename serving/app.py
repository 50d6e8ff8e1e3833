"""The FastAPI app over published snapshots: ``uvicorn --factory serving.app:create_app``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from serving.cache import SnapshotCache
from serving.errors import install_error_handlers
from serving.routes import api_router
from serving.routes.reader import STATIC_DIR
from serving.settings import ServingSettings, get_settings
from warehouse.store import ObjectStore

logger = logging.getLogger(__name__)


def _open_default_store() -> ObjectStore:
    from warehouse.settings import get_settings as get_warehouse_settings
    from warehouse.store import open_store

    return open_store(get_warehouse_settings())


def create_app(store: ObjectStore | None = None, settings: ServingSettings | None = None) -> FastAPI:
    """Build the serving app.

    Args:
        store: Where the snapshots are published; None opens the store the warehouse settings name.
        settings: Serving settings; None reads them from the environment.

    Returns:
        The app. Its lifespan loads every live page, then refreshes in the background.
    """
    settings = settings or get_settings()
    cache = SnapshotCache(store if store is not None else _open_default_store())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(cache.refresh)
        state = cache.state
        logger.info(
            "serving_started pages=%d stories_version=%s",
            len(state.pages),
            state.stories.version if state.stories else None,
        )
        cache.start(settings.refresh_seconds)
        try:
            yield
        finally:
            await asyncio.to_thread(cache.stop)

    app = FastAPI(
        title="newsroom",
        summary="Clustered, ranked news pages, served from published snapshots.",
        version="1",
        lifespan=lifespan,
    )
    app.state.cache = cache
    app.state.settings = settings
    install_error_handlers(app)
    app.include_router(api_router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
