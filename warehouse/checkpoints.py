"""A language writer's checkpoint: ``state/stories/<language>/checkpoint.json``.

The one object a writer replaces with If-Match (the fence between two writers of a language). It
names the writer's offset in the language's change log, the state its decisions lead to (a version 4
base and its deltas, issue 15, or one JSON state blob of the format before), and the article
segments consumed; readers (health, doctor, the writers) parse it with
:meth:`WriterCheckpoint.parse`, which refuses anything that is not one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from warehouse.layout import is_state_object_key


@dataclass(frozen=True, slots=True)
class WriterCheckpoint:
    """Where a language writer stands. A writer that never committed is ``WriterCheckpoint()``."""

    offset: int = 0
    """One past the last change committed: the next change's offset."""
    state_key: str | None = None
    """The state blob the decisions up to ``offset`` lead to; None before the first commit."""
    consumed: tuple[str, ...] = ()
    """Article segment keys already read (compacted or expired ones are dropped)."""
    updated_at: str | None = None
    """When the checkpoint last moved, ISO 8601 UTC as stored."""
    deltas: tuple[str, ...] = ()
    """The state's deltas after its base ``state_key``, oldest first (issue 15); none for a JSON blob."""

    @property
    def chain(self) -> list[str]:
        """The state objects the checkpoint names, base first; ``[]`` before the first commit."""
        return [] if self.state_key is None else [self.state_key, *self.deltas]

    @classmethod
    def parse(cls, data: bytes) -> WriterCheckpoint | None:
        """The checkpoint in ``data``, or None when the bytes are not one (garbage, truncated, wrong fields).

        >>> WriterCheckpoint.parse(b'{"offset": 3, "state_key": null, "consumed": ["a"]}')
        WriterCheckpoint(offset=3, state_key=None, consumed=('a',), updated_at=None, deltas=())
        >>> WriterCheckpoint.parse(b'{"offset": "3"}') is None
        True
        >>> WriterCheckpoint.parse(b'{"offset": 3, "state_key": "b", "consumed": [], "deltas": [7]}') is None
        True
        """
        try:
            raw: Any = json.loads(data)
        except (ValueError, RecursionError):
            return None
        if not isinstance(raw, dict) or not isinstance(raw.get("offset"), int) \
                or not isinstance(raw.get("state_key"), str | None) \
                or not isinstance(raw.get("consumed"), list) \
                or not isinstance(raw.get("deltas", []), list) \
                or not all(isinstance(k, str) for k in raw.get("deltas", [])):
            return None
        updated_at = raw.get("updated_at")
        return cls(raw["offset"], raw["state_key"], tuple(str(k) for k in raw["consumed"]),
                   updated_at if isinstance(updated_at, str) else None, tuple(raw.get("deltas", [])))

    def to_json(self) -> bytes:
        """The stored bytes: sorted keys; ``updated_at`` only once the checkpoint has moved; ``deltas``
        whenever the state is a version 4 object (``.nrws``), so a reader sees the whole chain."""
        doc: dict[str, object] = {"offset": self.offset, "state_key": self.state_key, "consumed": list(self.consumed)}
        if self.updated_at is not None:
            doc["updated_at"] = self.updated_at
        if self.deltas or is_state_object_key(self.state_key):
            doc["deltas"] = list(self.deltas)
        return json.dumps(doc, sort_keys=True).encode()
