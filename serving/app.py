"""The FastAPI app over published snapshots: ``uvicorn --factory serving.app:create_app``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from serving.atom import AtomFeeds
from serving.cache import SnapshotCache
from serving.clicks import BufferedClickLog, ClickLog
from serving.deps import InFlightLimit
from serving.feed import PoolCache
from serving.handlers import install_error_handlers
from serving.head import HeadAsGetMiddleware
from serving.live import LiveHub
from serving.profile_cache import ProfileCache
from serving.profiles import ProfileStore, SqliteProfileStore
from serving.routes import api_router
from serving.routes.reader import STATIC_DIR
from serving.search import SearchService
from serving.settings import ServingSettings, get_settings
from serving.signing import Signer
from serving.topics import TopicPages
from warehouse.store import ObjectStore

logger = logging.getLogger(__name__)


def _open_default_store() -> ObjectStore:
    from warehouse.settings import get_settings as get_warehouse_settings
    from warehouse.store import open_store

    return open_store(get_warehouse_settings())


def open_profile_store(settings: ServingSettings) -> ProfileStore:
    """The profile store the settings name: PostgreSQL when ``profiles_url`` is set, else SQLite.

    A PostgreSQL store opens without waiting for the server (shared pages never depend on it);
    its first use connects and migrates, and a failure then is a ProfileStoreError like any other.
    It is chosen here, above both stores, so neither module imports the other.

    Raises:
        ProfileStoreError: The SQLite file cannot be opened.
    """
    if settings.profiles_url is not None:
        from serving.profiles_postgres import PostgresProfileStore  # psycopg only when it is asked for

        return PostgresProfileStore(settings.profiles_url.get_secret_value(), pool_size=settings.profiles_pool_size)
    return SqliteProfileStore(settings.profiles_path)


@dataclass(frozen=True, slots=True)
class _Services:
    """What one app holds for its lifetime, and which of it the app opened (so closes)."""

    cache: SnapshotCache
    search: SearchService
    signer: Signer
    profile_store: ProfileStore
    profiles: ProfileCache
    live: LiveHub
    clicks: ClickLog
    owns_profiles: bool
    owns_clicks: bool


def _open_services(store: ObjectStore, settings: ServingSettings, profiles: ProfileStore | None,
                   click_log: ClickLog | None) -> _Services:
    """The caches, signer, profile store, live hub and click log an app serves from."""
    cache = SnapshotCache(store)
    search = SearchService(store)
    secret = settings.hmac_key.get_secret_value() if settings.hmac_key is not None else None
    signer = Signer.from_secret(
        secret,
        click_ttl_seconds=settings.click_token_ttl_seconds,
        session_ttl_seconds=settings.session_ttl_seconds,
    )
    store_of_profiles = profiles if profiles is not None else open_profile_store(settings)
    cached_profiles = ProfileCache(store_of_profiles, size=settings.profile_cache_size,
                                   poll_seconds=settings.profile_cache_poll_seconds)
    live = LiveHub(store, cache, search, cached_profiles, max_connections=settings.live_max_connections,
                   poll_seconds=settings.live_poll_seconds)
    clicks: ClickLog = click_log if click_log is not None else BufferedClickLog(
        store, flush_seconds=settings.click_flush_seconds, max_buffered=settings.click_buffer_max)
    return _Services(cache, search, signer, store_of_profiles, cached_profiles, live, clicks,
                     owns_profiles=profiles is None, owns_clicks=click_log is None)


def _lifespan(services: _Services, settings: ServingSettings) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Load every live page before the first request, refresh in the background, and on shutdown
    stop the refreshers and close what the app opened."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        cache, search = services.cache, services.search
        await asyncio.to_thread(cache.refresh)
        await asyncio.to_thread(search.refresh)
        state = cache.state
        logger.info(
            "serving_started pages=%d stories_version=%s",
            len(state.pages),
            state.stories.version if state.stories else None,
        )
        cache.start(settings.refresh_seconds)
        search.start(settings.refresh_seconds)
        services.profiles.start()
        services.live.start()
        if isinstance(services.clicks, BufferedClickLog):
            services.clicks.start()
        try:
            yield
        finally:
            await asyncio.to_thread(services.live.stop)
            await asyncio.to_thread(cache.stop)
            await asyncio.to_thread(search.close)
            await asyncio.to_thread(services.profiles.stop)
            if services.owns_clicks:  # SIGTERM: the buffered clicks are written before the process exits
                await asyncio.to_thread(services.clicks.close)
            if services.owns_profiles:
                services.profile_store.close()

    return lifespan


def _attach_state(app: FastAPI, services: _Services, settings: ServingSettings, store: ObjectStore) -> None:
    """Hang the services on ``app.state``, where ``serving.deps`` finds them for each request."""
    app.state.cache = services.cache
    app.state.settings = settings
    app.state.signer = services.signer
    app.state.profiles = services.profiles
    app.state.click_log = services.clicks
    app.state.pools = PoolCache(services.cache, services.signer)
    app.state.topics = TopicPages(services.cache)
    app.state.search = services.search
    app.state.atom = AtomFeeds()
    app.state.live = services.live
    app.state.store = store
    app.state.personal_limit = InFlightLimit(settings.personal_max_in_flight)


def create_app(
    store: ObjectStore | None = None,
    settings: ServingSettings | None = None,
    *,
    profiles: ProfileStore | None = None,
    click_log: ClickLog | None = None,
) -> FastAPI:
    """Build the serving app.

    Args:
        store: Where the snapshots are published (and clicks logged); None opens the store the
            warehouse settings name.
        settings: Serving settings; None reads them from the environment.
        profiles: The reader profile store; None opens the one the settings name (PostgreSQL at
            ``settings.profiles_url``, else SQLite at ``settings.profiles_path``). Either way the
            app reads it through a ``ProfileCache`` (``settings.profile_cache_size`` profiles).
        click_log: Where clicks go; None buffers them and writes a segment to ``store`` every
            ``settings.click_flush_seconds``.

    Returns:
        The app. Its lifespan loads every live page, then refreshes in the background; its
        shutdown writes the buffered clicks before the process exits.
    """
    settings = settings or get_settings()
    store = store if store is not None else _open_default_store()
    services = _open_services(store, settings, profiles, click_log)
    app = FastAPI(
        title="newsroom",
        summary="Clustered, ranked news pages, served from published snapshots.",
        version="1",
        lifespan=_lifespan(services, settings),
    )
    _attach_state(app, services, settings, store)
    install_error_handlers(app)
    app.include_router(api_router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_middleware(HeadAsGetMiddleware)  # HEAD on every GET route (RFC 9110 section 9.3.2)
    return app
