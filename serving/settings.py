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
    profiles_url: SecretStr | None = Field(
        default=None,
        description="PostgreSQL URL (postgresql://user:password@host:5432/db) of the reader profiles, "
        "shared by every replica; when set it replaces the SQLite file. Its schema is migrated at first use.",
    )
    profiles_pool_size: int = Field(
        default=8, ge=1, le=200,
        description="Most PostgreSQL connections one replica holds (replicas x this must fit the server's "
        "max_connections).",
    )
    profile_cache_size: int = Field(
        default=10_000, ge=0, le=10_000_000,
        description="Reader profiles each replica keeps in memory (least recently used out; about 40 KB for a "
        "profile at its limits); a For-you request for a reader held there reads nothing from the profile "
        "store. 0 turns the cache off.",
    )
    profile_cache_poll_seconds: float = Field(
        default=1.0, gt=0, le=60,
        description="Seconds between a replica's questions to the profile store about which readers changed "
        "elsewhere (other replicas, the profiles fold): such a change shapes its For you within about this. "
        "After three intervals without an answer the replica reads every profile from the store.",
    )
    click_flush_seconds: float = Field(
        default=5.0, gt=0, le=300,
        description="Each replica buffers clicks in memory and writes them as one segment per this many "
        "seconds (and on shutdown); a replica killed with SIGKILL loses at most the clicks of one interval.",
    )
    click_buffer_max: int = Field(
        default=200_000, ge=1,
        description="Most clicks one replica holds unwritten (while the store fails); beyond it a click is "
        "refused (redirected all the same, with X-Click-Logged: false).",
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

    live_max_connections: int = Field(
        default=1000, ge=0, le=1_000_000,
        description="Live streams (GET /v1/live/{edition}, GET /v1/me/live) one replica holds at once; beyond it "
        "a new one gets 503 + Retry-After (another replica may have room).",
    )
    live_heartbeat_seconds: float = Field(
        default=15.0, gt=0, le=300,
        description="A live stream with nothing to say sends a comment this often, so proxies keep it open and "
        "a reader gone is noticed.",
    )
    live_poll_seconds: float = Field(
        default=1.0, gt=0, le=60,
        description="How often a replica looks for new page versions, Breaking events and search index versions "
        "to push to its live streams (page versions arrive with the pointer checks, refresh_seconds).",
    )
    sources_per_day: int = Field(
        default=5, ge=0, le=1000,
        description="Sources one reader may suggest (POST /v1/subscriptions) in 24 hours; past it 429, nothing written.",
    )
    sources_max: int = Field(
        default=20, ge=0, le=10_000,
        description="Sources one reader may have suggested in all; past it 429, nothing written.",
    )
    sources_allow_private_addresses: bool = Field(
        default=False,
        description="Let a suggested source live on a non-public address (the rule NEWSROOM_INGEST_ALLOW_PRIVATE_"
        "ADDRESSES sets for ingest; set both alike). Off in production: the demo and tests turn it on.",
    )
    sources_allowed_private_networks: str = Field(
        default="127.0.0.0/8,::1/128",
        description="Which non-public networks, when sources_allow_private_addresses is on (comma-separated CIDRs, as "
        "NEWSROOM_INGEST_ALLOWED_PRIVATE_NETWORKS).",
    )
    sources_fetch_seconds: float = Field(
        default=10.0, gt=0, le=120,
        description="Deadline for looking at a suggested source: every redirect, the page and the feed it names.",
    )

    @field_validator("sources_allowed_private_networks")
    @classmethod
    def _networks(cls, value: str) -> str:
        import ipaddress

        for part in (p.strip() for p in value.split(",")):
            if part:
                ipaddress.ip_network(part, strict=False)  # ValueError names the bad one
        return value

    def source_networks(self) -> tuple[str, ...]:
        """The non-public networks a suggested source may live on (none unless allowed)."""
        if not self.sources_allow_private_addresses:
            return ()
        return tuple(p.strip() for p in self.sources_allowed_private_networks.split(",") if p.strip())

    @field_validator("profiles_url")
    @classmethod
    def _postgres_only(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(("postgresql://", "postgres://")):
            raise ValueError("NEWSROOM_SERVING_PROFILES_URL must start with postgresql:// or postgres://")
        return value


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
