"""The one root of every error newsroom raises on purpose.

Each package defines its own exceptions in its ``errors.py`` on top of :class:`NewsroomError`
(``transforms.errors.TransformError``, ``warehouse.errors.WarehouseError``,
``tasks.errors.FetchError``, ``serving.errors.ServingError``), so a caller that wants to tell
"newsroom said no" from a bug catches this one class. It lives in its own package because every
layer must be able to import it, and the layers may not import one another: transforms never
imports warehouse, warehouse never imports transforms, flows import neither (issue 17).
"""

from __future__ import annotations

from typing import Literal


class NewsroomError(Exception):
    """Base of every error newsroom raises on purpose."""


class AddressRefusedError(NewsroomError):
    """A host that may not be fetched (``newsroom.addresses``): it does not resolve (``dns``) or an
    address it resolves to is refused (``blocked_address``). Issue 30 moved the rule here, below
    ingest and serving, which both check it."""

    def __init__(self, kind: Literal["dns", "blocked_address"], message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
