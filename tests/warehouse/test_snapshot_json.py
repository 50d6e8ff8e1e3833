"""Snapshot bytes are strict JSON: a NaN or infinite number is refused, never written."""

from __future__ import annotations

import json

import pytest

from warehouse.snapshots import dump_snapshot


def test_snapshots_are_sorted_compact_utf8() -> None:
    assert dump_snapshot({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_a_non_finite_number_is_refused(value: float) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        dump_snapshot({"stories": [{"story_id": "s", "score": value}]})
    assert json.loads(dump_snapshot({"score": 0.0})) == {"score": 0.0}
