"""Opaque paging cursors: a scope, the snapshot version being paged, and where paging stands.

A cursor pins the version it started on: when that version is no longer live the server answers
410 and the client starts again from the first page.

Topic pages are cut from an immutable snapshot in a fixed order, so their cursor holds an offset.
For you is ranked from the reader's live profile, which can change between two pages (a read, a
follow, a hide): an offset into a re-computed ranking would skip or repeat stories. Its cursor
therefore holds the set of pool stories already shown (``FeedCursor``); the next page is the first
stories of the current ranking that were not shown yet. So paging never shows a story twice and
never skips one the reader has not been shown, while pages not yet seen follow the latest profile.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from serving.errors import BadCursorError

MAX_CURSOR_CHARS = 512
MAX_FEED_CURSOR_CHARS = 4096
"""A feed cursor's shown-set is a compressed bitmap over the pool: a few hundred characters for
pools of thousands of stories."""
_MAX_BITMAP_BYTES = 1024
"""8,192 pool positions: pools hold at most 1,000 stories (docs/snapshots.md), so a cursor can never
make a request decode more than this."""


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError, binascii.Error) as e:
        raise BadCursorError("unreadable") from e


def _load(cursor: str, max_chars: int) -> object:
    if len(cursor) > max_chars:
        raise BadCursorError("too long")
    try:
        return json.loads(_b64decode(cursor))
    except (ValueError, TypeError, RecursionError) as e:  # a cursor is client input: "[[[[..." too
        raise BadCursorError("unreadable") from e


def _is_offset(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 100_000


def encode_cursor(scope: str, version: str, offset: int) -> str:
    """An offset cursor over the ``version`` of the list ``scope`` names.

    >>> decode_cursor(encode_cursor("topic:world::20", "7", 20), "topic:world::20")
    ('7', 20)
    """
    data = json.dumps([scope, version, offset], separators=(",", ":"), ensure_ascii=False).encode()
    return _b64encode(data)


def decode_cursor(cursor: str, scope: str) -> tuple[str, int]:
    """The (version, offset) of a cursor issued for ``scope``. Raises BadCursorError."""
    raw = _load(cursor, MAX_CURSOR_CHARS)
    if (
        not isinstance(raw, list)
        or len(raw) != 3
        or raw[0] != scope
        or not isinstance(raw[1], str)
        or not _is_offset(raw[2])
    ):
        raise BadCursorError("not a cursor for this list")
    return raw[1], raw[2]


@dataclass(frozen=True, slots=True)
class FeedCursor:
    """Where For-you paging stands: the pool version, how many stories were shown, and which.

    ``shown`` holds positions in the pool's own (version-pinned) order. ``shown`` is None for a
    cursor from before shown-sets, which paged by offset alone.
    """

    version: str
    offset: int
    shown: frozenset[int] | None


def _bitmap_of(indexes: Iterable[int]) -> bytes:
    items = sorted(set(indexes))
    bits = bytearray((items[-1] // 8 + 1) if items else 0)
    for i in items:
        bits[i // 8] |= 1 << (i % 8)
    return zlib.compress(bytes(bits), 9)


def _indexes_of(packed: bytes) -> frozenset[int]:
    inflater = zlib.decompressobj()
    try:
        bits = inflater.decompress(packed, _MAX_BITMAP_BYTES)
    except zlib.error as e:
        raise BadCursorError("unreadable") from e
    if inflater.unconsumed_tail or not inflater.eof:
        raise BadCursorError("unreadable")
    return frozenset(byte * 8 + bit for byte, value in enumerate(bits) for bit in range(8) if value >> bit & 1)


def encode_feed_cursor(scope: str, version: str, offset: int, shown: Iterable[int]) -> str:
    """A For-you cursor: ``shown`` are the pool positions of every story shown so far.

    >>> c = decode_feed_cursor(encode_feed_cursor("feed:en-US:2", "ab", 3, [0, 9, 4]), "feed:en-US:2")
    >>> c.version, c.offset, sorted(c.shown or ())
    ('ab', 3, [0, 4, 9])
    """
    data = json.dumps(
        [scope, version, offset, _b64encode(_bitmap_of(shown))], separators=(",", ":"), ensure_ascii=False
    ).encode()
    return _b64encode(data)


def decode_feed_cursor(cursor: str, scope: str) -> FeedCursor:
    """The FeedCursor of a cursor issued for ``scope``. Raises BadCursorError."""
    raw = _load(cursor, MAX_FEED_CURSOR_CHARS)
    if (
        not isinstance(raw, list)
        or len(raw) not in (3, 4)
        or raw[0] != scope
        or not isinstance(raw[1], str)
        or not _is_offset(raw[2])
    ):
        raise BadCursorError("not a cursor for this list")
    if len(raw) == 3:
        return FeedCursor(raw[1], raw[2], None)
    if not isinstance(raw[3], str):
        raise BadCursorError("not a cursor for this list")
    return FeedCursor(raw[1], raw[2], _indexes_of(_b64decode(raw[3])))
