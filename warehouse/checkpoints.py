"""A language writer's checkpoint: ``state/stories/<language>/checkpoint.json``.

The one object a writer replaces with If-Match (the fence between two writers of a language). It
names the writer's offset in the language's change log, the state blob its decisions lead to, and
the article segments consumed; readers (health, doctor, the writers) parse it with
:meth:`WriterCheckpoint.parse`, which refuses anything that is not one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


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

    @classmethod
    def parse(cls, data: bytes) -> WriterCheckpoint | None:
        """The checkpoint in ``data``, or None when the bytes are not one (garbage, truncated, wrong fields).

        >>> WriterCheckpoint.parse(b'{"offset": 3, "state_key": null, "consumed": ["a"]}')
        WriterCheckpoint(offset=3, state_key=None, consumed=('a',), updated_at=None)
        >>> WriterCheckpoint.parse(b'{"offset": "3"}') is None
        True
        """
        try:
            raw: Any = json.loads(data)
        except (ValueError, RecursionError):
            return None
        if not isinstance(raw, dict) or not isinstance(raw.get("offset"), int) \
                or not isinstance(raw.get("state_key"), str | None) \
                or not isinstance(raw.get("consumed"), list):
            return None
        updated_at = raw.get("updated_at")
        return cls(raw["offset"], raw["state_key"], tuple(str(k) for k in raw["consumed"]),
                   updated_at if isinstance(updated_at, str) else None)

    def to_json(self) -> bytes:
        """The stored bytes: sorted keys; ``updated_at`` only once the checkpoint has moved."""
        doc: dict[str, object] = {"offset": self.offset, "state_key": self.state_key, "consumed": list(self.consumed)}
        if self.updated_at is not None:
            doc["updated_at"] = self.updated_at
        return json.dumps(doc, sort_keys=True).encode()
