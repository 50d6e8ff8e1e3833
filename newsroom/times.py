"""Instants the pipeline wrote, read back: one parser, one set of rules, for every layer.

Every instant the pipeline writes is ISO 8601 with an offset (``datetime.isoformat()``); reading it
back goes through :func:`parse_iso_datetime` (or :func:`parse_iso`, where text that is no instant
is an error) wherever it happens (transforms, warehouse, serving),
so a trailing ``Z`` or ``z`` is UTC everywhere, the result is always aware UTC, and text that is no
instant gives None (the caller decides whether that is an error). What publishers state (RFC 822
dates too) is read by ``transforms.times.parse_stated_datetime``, on top of this one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

NaiveRule = Literal["utc", "reject"]


def parse_iso_datetime(value: object, *, naive: NaiveRule = "reject") -> datetime | None:
    """An ISO 8601 instant as an aware UTC datetime; None when ``value`` is not one.

    ``naive`` says what a time without an offset means: ``"reject"`` (None; what we write always
    carries one) or ``"utc"`` (publishers' dates, RFC 3339 §4.3's "unknown local offset" read as UTC).
    A date alone is midnight.

    >>> parse_iso_datetime("2024-05-01T10:00:00+02:00")
    datetime.datetime(2024, 5, 1, 8, 0, tzinfo=datetime.timezone.utc)
    >>> parse_iso_datetime("2024-05-01T10:00:00z"), parse_iso_datetime("2024-05-01T10:00:00")
    (datetime.datetime(2024, 5, 1, 10, 0, tzinfo=datetime.timezone.utc), None)
    >>> parse_iso_datetime("2024-05-01", naive="utc").isoformat(), parse_iso_datetime("soon"), parse_iso_datetime(3)
    ('2024-05-01T00:00:00+00:00', None, None)
    """
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text[-1:] == "z":
        text = text[:-1] + "Z"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        if naive == "reject":
            return None
        parsed = parsed.replace(tzinfo=UTC)
    try:
        return parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        return None


def parse_iso(value: object, *, naive: NaiveRule = "reject") -> datetime:
    """An ISO 8601 instant as an aware UTC datetime, for text that must be one (a command's argument,
    or an instant the pipeline wrote itself).

    Raises:
        ValueError: ``value`` is not an instant (or has no offset while ``naive`` is ``"reject"``).

    >>> parse_iso("2024-05-01T10:00:00Z").isoformat()
    '2024-05-01T10:00:00+00:00'
    >>> parse_iso("2024-05-01T10:00:00", naive="utc").isoformat()
    '2024-05-01T10:00:00+00:00'
    """
    parsed = parse_iso_datetime(value, naive=naive)
    if parsed is None:
        raise ValueError(f"not an ISO 8601 instant{'' if naive == 'utc' else ' with an offset'}: {str(value)[:64]!r}")
    return parsed
