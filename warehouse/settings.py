"""Warehouse settings, read from ``NEWSROOM_WAREHOUSE_*`` environment variables."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class WarehouseSettings(BaseSettings):
    """Where the object store lives: a local folder (the default) or an S3-compatible bucket."""

    model_config = SettingsConfigDict(env_prefix="NEWSROOM_WAREHOUSE_", env_file=".env", extra="ignore")

    root: str = Field(
        default="var/store",
        description="Store root: a local folder (relative paths are taken from the working directory, "
        "file:// URIs are accepted) or s3://bucket/prefix for an S3-compatible store.",
    )
    s3_endpoint_url: str | None = Field(
        default=None,
        description="Endpoint of the S3-compatible server, e.g. http://127.0.0.1:8333; "
        "unset means AWS S3 itself.",
    )
    s3_access_key_id: SecretStr | None = Field(
        default=None,
        description="S3 access key id; unset means the standard AWS credential chain.",
    )
    s3_secret_access_key: SecretStr | None = Field(
        default=None,
        description="S3 secret access key; unset means the standard AWS credential chain.",
    )
    s3_region: str = Field(default="us-east-1", description="S3 region used to sign requests.")


@lru_cache(maxsize=1)
def get_settings() -> WarehouseSettings:
    """The process-wide warehouse settings, read once from the environment."""
    return WarehouseSettings()
