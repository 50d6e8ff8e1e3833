"""Serving settings, read from ``NEWSROOM_SERVING_*`` environment variables or a ``.env`` file."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

MIN_HMAC_KEY_CHARS = 32


class ServingSettings(BaseSettings):
    """How the API server listens, signs tokens, stores profiles and sheds load."""

    model_config = SettingsConfigDict(env_prefix="NEWSROOM_SERVING_", env_file=".env", extra="ignore",
                                      allow_inf_nan=False)

    refresh_seconds: float = Field(
        default=3.0,
        gt=0,
        description="Seconds between checks of the page pointers for newly published versions.",
    )
    host: str = Field(default="127.0.0.1", min_length=1, description="Interface the HTTP server binds to.")
    port: int = Field(default=8000, ge=0, le=65535, description="TCP port the HTTP server listens on.")
    hmac_key: SecretStr | None = Field(
        default=None,
        description="Key that signs click tokens and sessions and pseudonymises readers (at least 32 "
        "characters). Unset: a random key per process is generated and a warning logged; sessions, "
        "click tokens and reader hashes then do not survive a restart. Set it in every real deployment.",
    )
    profiles_path: str = Field(
        default="var/profiles.sqlite3",
        min_length=1,
        description="SQLite (WAL) file holding reader profiles: follows, hides, reads and decayed weights.",
    )
    session_ttl_seconds: int = Field(
        default=30 * 86400, gt=0, description="How long a signed session token stays valid."
    )
    click_token_ttl_seconds: int = Field(
        default=86400, gt=0, description="How long a signed click token (`/r/{token}`) stays valid."
    )
    personal_max_in_flight: int = Field(
        default=32,
        ge=0,
        description="Personal requests (For you, profile) served at once; beyond it they are shed with "
        "503 + Retry-After so shared pages keep answering.",
    )


    @field_validator("hmac_key")
    @classmethod
    def _key_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < MIN_HMAC_KEY_CHARS:
            raise ValueError(f"must be at least {MIN_HMAC_KEY_CHARS} characters (unset: a random key per process)")
        return value


@lru_cache(maxsize=1)
def get_settings() -> ServingSettings:
    """The process-wide serving settings, read once from the environment."""
    return ServingSettings()
