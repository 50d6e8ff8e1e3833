"""Warehouse errors, each keeping the object key it concerns."""

from __future__ import annotations


class NewsroomError(Exception):
    """Base of every error newsroom raises on purpose."""


class WarehouseError(NewsroomError):
    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(f"{message} (key={key})" if key else message)
        self.key = key


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
