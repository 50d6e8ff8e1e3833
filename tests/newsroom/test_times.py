"""The one reader of instants the pipeline wrote: every layer gets the same answer."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from newsroom.times import parse_iso_datetime
from transforms.times import parse_stated_datetime

NOON = datetime(2026, 12, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-12-01T13:00:00+01:00", NOON),
    ("2026-12-01T12:00:00Z", NOON),
    ("2026-12-01T12:00:00z", NOON),
    (" 2026-12-01T12:00Z ", NOON),
    ("20261201T120000Z", NOON),
    ("2026-12-01T12:00:00", None),  # no offset: not something the pipeline wrote
    ("2026-12-01", None),
    ("soon", None),
    ("", None),
    ("2026-13-01T00:00:00Z", None),
    (1733054400, None),
])
def test_an_instant_is_aware_utc_or_none(text: object, expected: datetime | None) -> None:
    parsed = parse_iso_datetime(text)
    assert parsed == expected
    assert parsed is None or parsed.tzinfo is UTC


def test_a_time_without_an_offset_is_utc_only_when_asked() -> None:
    assert parse_iso_datetime("2026-12-01T12:00:00", naive="utc") == NOON
    assert parse_iso_datetime("2026-12-01", naive="utc") == datetime(2026, 12, 1, tzinfo=UTC)


@pytest.mark.parametrize(("text", "expected"), [
    ("Tue, 01 Dec 2026 12:00:00 GMT", NOON),
    ("Tue, 01 Dec 2026 13:00:00 +0100", NOON),
    ("2026-12-01 12:00:00", NOON),  # a publisher's date without an offset reads as UTC
    ("2026-12-01T13:00:00+01:00", NOON),
    ("yesterday", None),
    ("   ", None),
])
def test_a_stated_publication_time_reads_iso_or_rfc_822(text: str, expected: datetime | None) -> None:
    assert parse_stated_datetime(text) == expected
