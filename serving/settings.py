"""Serving settings, read from ``NEWSROOM_SERVING_*`` environment variables."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ServingSettings(BaseSettings):
    """How the API server listens and how often it looks for newly published pages."""

    model_config = SettingsConfigDict(env_prefix="NEWSROOM_SERVING_", extra="ignore")

    refresh_seconds: float = Field(
        default=3.0,
        gt=0,
        description="Seconds between checks of the page pointers for newly published versions.",
    )
    host: str = Field(default="127.0.0.1", description="Interface the HTTP server binds to.")
    port: int = Field(default=8000, ge=0, le=65535, description="TCP port the HTTP server listens on.")


@lru_cache(maxsize=1)
def get_settings() -> ServingSettings:
    """The process-wide serving settings, read once from the environment."""
    return ServingSettings()
