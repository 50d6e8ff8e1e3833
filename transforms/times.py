"""Instants written as text: one parser for ISO 8601 / RFC 3339, one for what publishers state.

Every instant the pipeline writes is ISO 8601 with an offset (``datetime.isoformat()``); reading it
back goes through :func:`parse_iso_datetime`, so one set of rules holds everywhere: a trailing
``Z`` or ``z`` is UTC, the result is always aware UTC, and text that is no instant gives None
(the caller decides whether that is an error). ``warehouse/times.py`` holds the same rules for the
layers that may not import this package (warehouse, serving).
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
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


def parse_stated_datetime(value: object) -> datetime | None:
    """A publication time as publishers write it: ISO 8601 (no offset: UTC), else RFC 822/HTTP-date.

    >>> parse_stated_datetime("Tue, 19 Nov 2019 10:30:00 GMT").isoformat()
    '2019-11-19T10:30:00+00:00'
    >>> parse_stated_datetime("2019-11-19 10:30:00").isoformat(), parse_stated_datetime("yesterday")
    ('2019-11-19T10:30:00+00:00', None)
    """
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
