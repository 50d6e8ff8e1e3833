"""Warehouse settings, read from ``NEWSROOM_WAREHOUSE_*`` environment variables."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def describe_settings_error(cls: type[BaseSettings], error: ValidationError) -> str:
    """One line naming the environment variable of the first invalid setting and why (#16).

    Secrets' values are never shown, nor is any other value: the variable and the rule are enough.
    """
    prefix = str(cls.model_config.get("env_prefix", ""))
    problems = []
    for item in error.errors():
        loc = item.get("loc") or ()
        message = str(item.get("msg", "")).removeprefix("Value error, ")
        if not loc:  # a rule across fields names its variables itself
            problems.append(message)
            continue
        field = cls.model_fields.get(str(loc[0]))
        alias = field.validation_alias if field is not None else str(loc[0])  # loc holds an alias as is
        variable = alias if isinstance(alias, str) else f"{prefix}{loc[0]}".upper()
        problems.append(f"{variable}: {message}")
    more = f" (and {len(problems) - 1} more: {', '.join(p.split(':', 1)[0] for p in problems[1:])})" \
        if len(problems) > 1 else ""
    return f"invalid setting {problems[0] if problems else cls.__name__}{more}"


def http_url_problem(value: str) -> str | None:
    """Why ``value`` is not an absolute http(s) URL with a host, or None."""
    try:
        parts = urlsplit(value)
        _ = parts.port
    except ValueError as e:
        return f"not a URL: {e}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an absolute http(s) URL"
    return None


_SIZE = re.compile(r"[0-9]+(\.[0-9]+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)", re.IGNORECASE)


class WarehouseSettings(BaseSettings):
    """Where the object store lives: a local folder (the default) or an S3-compatible bucket."""

    model_config = SettingsConfigDict(env_prefix="NEWSROOM_WAREHOUSE_", env_file=".env", extra="ignore",
                                      allow_inf_nan=False)

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
        description="S3 access key id, set together with the secret; both unset means the standard AWS "
        "credential chain.",
    )
    s3_secret_access_key: SecretStr | None = Field(
        default=None,
        description="S3 secret access key, set together with the key id; both unset means the standard AWS "
        "credential chain.",
    )
    s3_region: str = Field(default="us-east-1", min_length=1, description="S3 region used to sign requests.")
    query_memory_limit: str = Field(
        default="1GB",
        description="DuckDB memory limit of every query over the store (newsroom sql, health, the "
        "dashboards, explain), e.g. 512MB or 2GB; past it, sorts, joins and aggregates spill to disk.",
    )
    query_spill_limit: str = Field(
        default="20GB",
        description="Most disk one query may spill to past its memory limit; beyond, it fails.",
    )
    sql_timeout_seconds: float = Field(
        default=300.0, gt=0,
        description="newsroom sql stops a query that runs longer than this, with a message saying so.",
    )

    @field_validator("root")
    @classmethod
    def _root_names_a_store(cls, value: str) -> str:
        # An empty root once made the working directory the store (#16).
        text = value.strip()
        if not text:
            raise ValueError("must not be empty: a local folder or s3://bucket/prefix")
        if text.startswith("s3://") and not text.removeprefix("s3://").split("/", 1)[0]:
            raise ValueError("an s3:// root needs a bucket: s3://bucket/prefix")
        if "://" in text and not text.startswith(("s3://", "file://")):
            raise ValueError("must be a local folder, file:// or s3://bucket/prefix")
        return text

    @field_validator("query_memory_limit", "query_spill_limit")
    @classmethod
    def _is_a_size(cls, value: str) -> str:
        if not _SIZE.fullmatch(value.strip()):
            raise ValueError("must be a size such as 512MB, 1GB or 2GiB")
        return value.strip()

    @field_validator("s3_endpoint_url")
    @classmethod
    def _endpoint_is_a_url(cls, value: str | None) -> str | None:
        if value is not None and (problem := http_url_problem(value.strip())):
            raise ValueError(f"{problem} (unset it for AWS S3)")
        return value.strip() if value is not None else None


    @model_validator(mode="after")
    def _s3_keys_come_in_pairs(self) -> WarehouseSettings:
        # One key without the other once reached boto3, which stopped the command with a
        # traceback (PartialCredentialsError) when it built the client (issue 32).
        if self.root.startswith("s3://") and (self.s3_access_key_id is None) != (self.s3_secret_access_key is None):
            unset, other = ("SECRET_ACCESS_KEY", "ACCESS_KEY_ID") if self.s3_secret_access_key is None \
                else ("ACCESS_KEY_ID", "SECRET_ACCESS_KEY")
            raise ValueError(f"NEWSROOM_WAREHOUSE_S3_{unset}: unset while NEWSROOM_WAREHOUSE_S3_{other} is set; "
                             "set both, or neither to use the AWS credential chain")
        return self


SettingsT = TypeVar("SettingsT", bound=BaseSettings)


def check_settings(cls: type[SettingsT], **overrides: Any) -> SettingsT:
    """``cls(**overrides)``, or ValueError with :func:`describe_settings_error`'s one line."""
    try:
        return cls(**overrides)
    except ValidationError as e:
        raise ValueError(describe_settings_error(cls, e)) from None


@lru_cache(maxsize=1)
def get_settings() -> WarehouseSettings:
    """The process-wide warehouse settings, read once from the environment."""
    return WarehouseSettings()
