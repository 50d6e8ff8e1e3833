"""Publication times as publishers state them."""

from __future__ import annotations

from transforms.times import STATED_DATETIME_MAX_CHARS, parse_stated_datetime


def test_a_stated_time_longer_than_any_date_is_not_parsed() -> None:
    """A 1 MB date field is not handed to a parser (issue 32)."""
    assert parse_stated_datetime("Tue, 19 Nov 2019 10:30:00 GMT") is not None
    padded = "Tue, 19 Nov 2019 10:30:00 GMT" + " " * STATED_DATETIME_MAX_CHARS
    assert parse_stated_datetime(padded) is None
    assert parse_stated_datetime("2019-11-19T10:30:00Z" + "0" * 1_000_000) is None
