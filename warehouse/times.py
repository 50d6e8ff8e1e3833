"""Instants read back from what the pipeline wrote, for the layers below ``transforms``.

The rules of ``transforms.times.parse_iso_datetime`` (with ``naive="reject"``): ISO 8601 with an
offset (``Z`` or ``z`` for UTC), returned as aware UTC, None for anything else. ``warehouse`` and
``serving`` may not import ``transforms``, so they read instants through this; a test checks the
two agree.
"""

from __future__ import annotations

from datetime import UTC, datetime


def parse_instant(value: object) -> datetime | None:
    """An ISO 8601 instant with an offset as aware UTC; None when ``value`` is not one.

    >>> parse_instant("2026-12-01T12:00:00+01:00"), parse_instant("2026-12-01T12:00:00")
    (datetime.datetime(2026, 12, 1, 11, 0, tzinfo=datetime.timezone.utc), None)
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
        return None
    try:
        return parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        return None
