"""What publishers state as a publication time: ISO 8601 (no offset read as UTC), else RFC 822.

Instants the pipeline wrote itself are read by :func:`newsroom.times.parse_iso_datetime`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from newsroom.times import parse_iso_datetime

STATED_DATETIME_MAX_CHARS = 100
"""A longer value is not a time and is not parsed (issue 32: every text a parser sees is capped); an
RFC 822 date is about 31 characters, an ISO 8601 one at most 35."""


def parse_stated_datetime(value: object) -> datetime | None:
    """A publication time as publishers write it: ISO 8601 (no offset: UTC), else RFC 822/HTTP-date.

    >>> parse_stated_datetime("Tue, 19 Nov 2019 10:30:00 GMT").isoformat()
    '2019-11-19T10:30:00+00:00'
    >>> parse_stated_datetime("2019-11-19 10:30:00").isoformat(), parse_stated_datetime("yesterday")
    ('2019-11-19T10:30:00+00:00', None)
    """
    if isinstance(value, str) and len(value) > STATED_DATETIME_MAX_CHARS:
        return None
    parsed = parse_iso_datetime(value, naive="utc")
    if parsed is not None or not isinstance(value, str) or not value.strip():
        return parsed
    try:
        stated = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if stated.tzinfo is None:
        stated = stated.replace(tzinfo=UTC)
    try:
        return stated.astimezone(UTC)
    except (OverflowError, ValueError):
        return None
