"""Breaking stories extend their publishers' feed boosts, or say so when they could not."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tasks.rank.publish import record_breaking
from tasks.settings import RankSettings
from warehouse import layout
from warehouse.store import LocalStore, PreconditionFailedError

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
BREAKING = [{"story_id": "0196f1c2a3b40001", "breaking_since": "2026-12-03T08:55:00Z", "publisher_ids": ["p1", "p2"]}]


class RacedBoosts(LocalStore):
    """Another rank run moves the boosts object between every read and write of this one."""

    def put(self, key: str, data: bytes, **options: Any) -> str:
        if key == layout.FEED_BOOSTS_KEY and (options.get("if_match") or options.get("if_none_match")):
            super().put(key, json.dumps({"other": "2026-12-03T12:00:00Z"}).encode())  # the other run's write
            raise PreconditionFailedError(key)
        return super().put(key, data, **options)


def test_boosts_are_stored_for_every_breaking_publisher(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    summary = record_breaking(store, BREAKING, NOW, RankSettings())
    assert summary["events"] == ["0196f1c2a3b40001"] and summary["boosts_stored"]
    assert sorted(json.loads(store.get(layout.FEED_BOOSTS_KEY).data)) == ["p1", "p2"]


def test_losing_every_race_for_the_boosts_is_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = RacedBoosts(tmp_path / "store")
    with caplog.at_level(logging.WARNING, logger="tasks.rank"):
        summary = record_breaking(store, BREAKING, NOW, RankSettings())
    assert summary["events"] == ["0196f1c2a3b40001"]  # the event is written either way
    assert not summary["boosts_stored"] and summary["boosted"] == []
    assert any("feed_boosts_not_stored" in r.getMessage() for r in caplog.records)
