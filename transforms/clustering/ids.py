"""Story ids: 64-bit, time-ordered, deterministic, and never reused by one writer."""

from __future__ import annotations

import hashlib
from collections.abc import Container
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_ms(when: datetime) -> int:
    """Milliseconds since the Unix epoch of a timezone-aware datetime (the clusterer's clock unit).

    >>> to_ms(datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC))
    1000
    """
    if when.tzinfo is None:
        raise ValueError(f"datetimes must be timezone-aware, got {when!r}")
    return (when - EPOCH) // timedelta(milliseconds=1)


def ms_to_datetime(ms: int) -> datetime:
    """The UTC datetime of a clusterer timestamp (inverse of :func:`to_ms`)."""
    return EPOCH + timedelta(milliseconds=ms)


def make_story_id(first_seen_at: datetime, first_article_id: str, language: str = "", salt: str = "") -> str:
    """64-bit, time-ordered, deterministic story id candidate as 16 hex digits.

    The top 32 bits are the first article's first-seen time in whole seconds since the Unix
    epoch, the low 32 bits a blake2b hash of ``(language, salt, first article id)``. Ids sort by
    creation second and a rerun gives the same ids. Two ids collide only within one second and
    with a chance of about n²/2³³ for n stories of that second, so writers of different languages
    (which share no state) practically never meet; within one writer, :func:`free_story_id` bumps
    a candidate past the writer's active ids.

    Ids written before this format (ms << 16 | a 16-bit hash) stay valid: ids are opaque
    16-hex strings and nothing parses a time back out of them. Any such id is below
    ``(ms + 1) << 16``, far below ``seconds << 32`` for the same moment, so every id of this
    format sorts after every old-format id made earlier (or at the same time).

    >>> make_story_id(datetime(2024, 1, 1, tzinfo=UTC), "a", "en")[:8]
    '65920080'
    """
    seconds = to_ms(first_seen_at) // 1000
    if not 0 <= seconds < 1 << 32:
        raise ValueError(f"first_seen_at out of range for a story id: {first_seen_at!r}")
    key = "\x1f".join((language, salt, first_article_id)).encode("utf-8")
    low = int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "big")
    return f"{(seconds << 32) | low:016x}"


def free_story_id(candidate: str, taken: Container[str]) -> str:
    """``candidate``, or the next 64-bit value after it that ``taken`` (the writer's active ids)
    does not hold; deterministic, so a rerun from the same state bumps the same way.

    >>> free_story_id("00000000000000ff", {"00000000000000ff", "0000000000000100"})
    '0000000000000101'
    """
    value = int(candidate, 16)
    while f"{value:016x}" in taken:
        value += 1
        if value >= 1 << 64:
            raise ValueError(f"no free story id after {candidate}")
    return f"{value:016x}"
