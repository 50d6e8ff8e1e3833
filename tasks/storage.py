"""The configured object store, opened once per process."""

from __future__ import annotations

from functools import lru_cache

from warehouse.settings import get_settings
from warehouse.store import ObjectStore, open_store


@lru_cache(maxsize=1)
def configured_store() -> ObjectStore:
    """The store named by ``NEWSROOM_WAREHOUSE_*`` settings."""
    return open_store(get_settings())


def reset_configured_store() -> None:
    """Forget the cached settings and store (after the environment changed, e.g. in tests)."""
    get_settings.cache_clear()
    configured_store.cache_clear()
