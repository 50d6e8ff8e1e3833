"""The pipeline clock: flows take ``now`` as an ISO string parameter (plain JSON), or run on UTC now."""

from __future__ import annotations

from datetime import UTC, datetime

from newsroom.times import parse_iso_datetime


def resolve_now(now: str | None) -> datetime:
    """Parse an ISO 8601 instant (``Z`` allowed), or return the current UTC time to the second."""
    if not now:
        return datetime.now(UTC).replace(microsecond=0)
    parsed = parse_iso_datetime(now)
    if parsed is None:
        raise ValueError(f"now must be an ISO 8601 instant with a timezone: {now!r}")
    return parsed
