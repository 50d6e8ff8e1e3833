"""Warehouse errors, each keeping the object key it concerns."""

from __future__ import annotations

from newsroom.errors import NewsroomError

__all__ = [
    "CorruptObjectError", "NewsroomError", "ObjectNotFoundError", "PreconditionFailedError",
    "ProfileDbError", "SchemaMismatchError", "SearchIndexError", "SearchQueryError", "SnapshotNotFoundError",
    "StateBlobError", "WarehouseError",
]


class WarehouseError(NewsroomError):
    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(f"{message} (key={key})" if key else message)
        self.key = key
        self.reason = message
        """The message without the key, for answers that must not show keys (``/healthz``)."""


class ObjectNotFoundError(WarehouseError):
    """The key does not exist in the store."""


class PreconditionFailedError(WarehouseError):
    """A conditional put lost: the object exists (If-None-Match) or changed (If-Match)."""


class SnapshotNotFoundError(WarehouseError):
    """No published version of the requested page."""


class SchemaMismatchError(WarehouseError):
    """A frame does not carry the schema its table declares."""


class ProfileDbError(WarehouseError):
    """The reader-profile database failed: unreachable, a migration, a conflicting write."""


class CorruptObjectError(WarehouseError):
    """An object exists but cannot be decoded as its kind (truncated Parquet, garbage JSON, a bad frame).

    Readers on the pipeline's and the site's path skip or quarantine such an object and name its
    key in a recorded error (docs/store-faults.md); nothing else stops because of it.
    """


class StateBlobError(WarehouseError, ValueError):
    """A state blob that is neither Zstandard nor gzip, or whose frame cannot be read.

    Also a ``ValueError``, as it was before it joined the one error root: callers that catch that
    keep catching it.
    """


class AggregatesUnreadableError(WarehouseError):
    """Rank's story aggregates cannot be read (already recorded as damage): rebuild them from the logs."""


class SearchQueryError(WarehouseError):
    """A search query that cannot be searched: too long, malformed, or with nothing to look for
    (``warehouse.search_index.parse_query``; issue 30). The message never repeats the query."""


class SearchIndexError(WarehouseError):
    """Bytes that are not a search index this release can read (``warehouse.search_index``)."""
