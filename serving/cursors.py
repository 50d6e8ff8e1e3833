"""Opaque paging cursors: a scope, the snapshot version being paged, and an offset.

A cursor pins the version it started on, so paging never reshuffles: when that version is no
longer live the server answers 410 and the client starts again from the first page.
"""

from __future__ import annotations

import base64
import json

from serving.errors import BadCursorError

MAX_CURSOR_CHARS = 512


def encode_cursor(scope: str, version: str, offset: int) -> str:
    """>>> decode_cursor(encode_cursor("feed:en-US", "7", 20), "feed:en-US")
    ('7', 20)
    """
    data = json.dumps([scope, version, offset], separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str, scope: str) -> tuple[str, int]:
    """The (version, offset) of a cursor issued for ``scope``. Raises BadCursorError."""
    if len(cursor) > MAX_CURSOR_CHARS:
        raise BadCursorError("too long")
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError) as e:
        raise BadCursorError("unreadable") from e
    if (
        not isinstance(raw, list)
        or len(raw) != 3
        or raw[0] != scope
        or not isinstance(raw[1], str)
        or not isinstance(raw[2], int)
        or isinstance(raw[2], bool)
        or not 0 <= raw[2] <= 100_000
    ):
        raise BadCursorError("not a cursor for this list")
    return raw[1], raw[2]
