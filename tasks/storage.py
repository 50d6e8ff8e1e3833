"""The configured object store: the one of the settings in effect, else the environment's, opened once."""

from __future__ import annotations

from functools import lru_cache

from tasks.settings import forget_environment_settings, store_in_effect
from warehouse.settings import get_settings
from warehouse.store import ObjectStore, open_store


def configured_store() -> ObjectStore:
    """The store of the settings in effect (``tasks.settings.use_settings``), else the one named by
    the ``NEWSROOM_WAREHOUSE_*`` environment variables."""
    in_effect = store_in_effect()
    return in_effect if in_effect is not None else _environment_store()


@lru_cache(maxsize=1)
def _environment_store() -> ObjectStore:
    return open_store(get_settings())


def reset_configured_store() -> None:
    """Forget the cached settings and store (after the environment changed, e.g. in tests)."""
    get_settings.cache_clear()
    forget_environment_settings()
    _environment_store.cache_clear()
