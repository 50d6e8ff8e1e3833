"""Publishing recovers from a crash or a lost race between the version put and the pointer move,
and never moves a page back in time; on every backend."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from warehouse import layout
from warehouse.errors import PreconditionFailedError, SnapshotNotFoundError
from warehouse.schemas import CLICKS_SCHEMA
from warehouse.snapshots import (
    LOST_RACE,
    dump_snapshot,
    list_live_pages,
    publish_page,
    publish_stories,
    read_live_page,
    read_pointer,
    rollback_page,
)
from warehouse.store import ObjectStore
from warehouse.tables import read_segments, rows_to_table, write_segment

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class Died(Exception):
    """Stands for the publisher process dying."""


class Crashing:
    """A store that dies (raises) on the next put of a key ending in ``suffix`` while armed."""

    def __init__(self, inner: ObjectStore, suffix: str = "latest.json") -> None:
        self.inner, self.suffix, self.armed = inner, suffix, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put(self, key: str, data: bytes, **kwargs: Any) -> str:
        if self.armed and key.endswith(self.suffix):
            self.armed = False
            raise Died(key)
        return self.inner.put(key, data, **kwargs)


class Conflicting:
    """A store whose first conditional put of each key in ``keys`` fails with nothing stored, as S3
    answers 409 ConditionalRequestConflict while a concurrent conditional write is in flight."""

    def __init__(self, inner: ObjectStore, keys: set[str]) -> None:
        self.inner, self.keys, self.conflicts = inner, set(keys), 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put(self, key: str, data: bytes, **kwargs: Any) -> str:
        if key in self.keys and (kwargs.get("if_none_match") or kwargs.get("if_match")):
            self.keys.discard(key)
            self.conflicts += 1
            raise PreconditionFailedError("conditional put lost: 409 ConditionalRequestConflict", key=key)
        return self.inner.put(key, data, **kwargs)


def _page(at: datetime, ids: str) -> dict[str, Any]:
    return {"schema": "newsroom.page/1", "edition": "en-US", "section": "top",
            "as_of": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "stories": [{"story_id": i, "title": i, "sources": [1]} for i in ids]}


def _publish(store: Any, at: datetime, ids: str, **kwargs: Any) -> Any:
    return publish_page(store, "en-US", "top", _page(at, ids), now=at, validate=lambda new, prev: None, **kwargs)


def _live(store: ObjectStore) -> dict[str, Any]:
    return dict(json.loads(read_live_page(store, "en-US", "top").data))


def _crash_before_pointer(store: ObjectStore, at: datetime, ids: str) -> None:
    crashing = Crashing(store)
    crashing.armed = True
    with pytest.raises(Died):
        _publish(crashing, at, ids)


def test_an_orphan_version_does_not_wedge_later_runs(store: ObjectStore) -> None:
    assert _publish(store, T0, "abcd").published
    _crash_before_pointer(store, T0 + timedelta(minutes=1), "bacd")  # v2 written, pointer not moved
    assert store.head(layout.page_version_key("en-US", "top", 2)) is not None

    later = _publish(store, T0 + timedelta(minutes=2), "cdab")  # a LATER now: other bytes than the orphan
    assert (later.published, later.version, later.previous) == (True, 3, 1)
    pointer = read_pointer(store, "en-US", "top")
    assert pointer is not None and pointer.orphans == (2,)
    assert not pointer.was_published(2) and pointer.was_published(1) and pointer.was_published(3)
    assert _live(store)["as_of"] == "2026-01-01T12:02:00Z"
    nxt = _publish(store, T0 + timedelta(minutes=3), "dcab")
    assert (nxt.published, nxt.version) == (True, 4)
    assert read_pointer(store, "en-US", "top").orphans == (2,)  # type: ignore[union-attr]  # carried forward


def test_several_orphans_in_a_row_are_skipped(store: ObjectStore) -> None:
    assert _publish(store, T0, "abcd").published
    _crash_before_pointer(store, T0 + timedelta(minutes=1), "bacd")
    _crash_before_pointer(store, T0 + timedelta(minutes=2), "cabd")  # its v2 clashed: it wrote v3
    result = _publish(store, T0 + timedelta(minutes=3), "dabc")
    assert (result.published, result.version) == (True, 4)
    assert read_pointer(store, "en-US", "top").orphans == (2, 3)  # type: ignore[union-attr]


def test_a_rerun_at_the_same_now_adopts_the_orphan(store: ObjectStore) -> None:
    assert _publish(store, T0, "abcd").published
    at = T0 + timedelta(minutes=1)
    _crash_before_pointer(store, at, "bacd")
    result = _publish(store, at, "bacd")
    assert (result.published, result.version) == (True, 2)
    assert read_pointer(store, "en-US", "top").orphans == ()  # type: ignore[union-attr]
    assert _publish(store, at, "bacd").reason == "unchanged"  # and again: nothing


def test_an_older_run_never_publishes_over_a_newer_page(store: ObjectStore) -> None:
    assert _publish(store, T0, "abcd").published
    newer = _publish(store, T0 + timedelta(minutes=2), "abcxyz")
    assert newer.published
    older = _publish(store, T0 + timedelta(minutes=1), "abcx")  # an overlapping run, or a retry, finishing late
    assert not older.published
    assert older.reason.startswith("stale: as_of 2026-01-01T12:01:00Z is older")
    assert _live(store)["version"] == newer.version
    assert store.list(layout.page_dir("en-US", "top")) == sorted(
        [layout.page_version_key("en-US", "top", v) for v in (1, 2)] + [layout.page_pointer_key("en-US", "top")])
    # The same now again is a rerun: unchanged content publishes nothing, new content still may.
    assert _publish(store, T0 + timedelta(minutes=2), "abcxyz").reason == "unchanged"
    assert _publish(store, T0 + timedelta(minutes=2), "abcxy").published


def test_a_lost_pointer_race_starts_over_from_the_new_pointer(store: ObjectStore) -> None:
    assert _publish(store, T0, "abcd").published
    raced: list[Any] = []

    def older_run_wins_the_pointer() -> None:
        if not raced:  # runs between our version put and our pointer move
            raced.append(_publish(store, T0 + timedelta(minutes=1), "abdc"))

    result = _publish(store, T0 + timedelta(minutes=2), "dcba", before_pointer=older_run_wins_the_pointer)
    # The older run took v3 (our v2 had other bytes) and moved the pointer first, marking v2 an orphan
    # it was not: we retry, adopt our own v2 (its bytes), and the pointer goes forward in time.
    assert raced[0].published and raced[0].version == 3
    assert result.published, result
    assert _live(store)["as_of"] == "2026-01-01T12:02:00Z"
    assert read_pointer(store, "en-US", "top").version == result.version  # type: ignore[union-attr]


def test_a_newer_run_that_wins_the_race_makes_the_loser_stale(store: ObjectStore) -> None:
    assert _publish(store, T0, "abcd").published
    raced: list[Any] = []

    def newer_run_wins() -> None:
        if not raced:
            raced.append(_publish(store, T0 + timedelta(minutes=2), "dcba"))

    result = _publish(store, T0 + timedelta(minutes=1), "abdc", before_pointer=newer_run_wins)
    assert raced[0].published
    assert not result.published and result.reason.startswith("stale")
    assert _live(store)["as_of"] == "2026-01-01T12:02:00Z"
    pointer = read_pointer(store, "en-US", "top")
    assert pointer is not None and pointer.orphans == (2,)  # the loser's version never went live


def test_lost_race_is_reported_when_every_attempt_loses(store: ObjectStore) -> None:
    assert _publish(store, T0, "abcd").published
    minute = iter(range(10, 100))

    def always_beaten() -> None:
        n = next(minute)
        _publish(store, T0 + timedelta(minutes=n), "abcd"[n % 4:] + "abcd"[: n % 4] + str(n))

    result = _publish(store, T0 + timedelta(minutes=200), "zz", before_pointer=always_beaten)
    assert not result.published and result.reason == LOST_RACE


def test_a_conflict_with_nothing_stored_is_retried(store: ObjectStore) -> None:
    # S3 answers 409 when a concurrent conditional write is in flight; if that write then fails,
    # a get finds nothing. That must not abort the run: the put is tried again.
    assert _publish(store, T0, "abcd").published
    conflicting = Conflicting(store, {layout.page_version_key("en-US", "top", 2),
                                      layout.story_snapshot_key(1)})
    result = _publish(conflicting, T0 + timedelta(minutes=1), "dcba")
    assert (result.published, result.version) == (True, 2)
    stories = publish_stories(conflicting, {"schema": "newsroom.stories/1", "as_of": "2026-01-01T12:01:00Z",
                                            "stories": {}, "aliases": {}}, now=T0, validate=lambda new, prev: None)
    assert stories.published and stories.version == 1
    assert conflicting.conflicts == 2

    key = layout.click_segment_key(T0, "c1")
    row = {"click_id": "c1", "article_id": "a", "story_id": "s", "reader_hash": "r", "surface": "top",
           "position": 1, "clicked_at": T0}
    table = rows_to_table([row], CLICKS_SCHEMA)
    assert write_segment(Conflicting(store, {key}), key, table, CLICKS_SCHEMA) is True
    assert read_segments(store, [key], CLICKS_SCHEMA).equals(table)


# --------------------------------------------------------------------------------------------------
# Rollback moves a page pointer back with a conditional put; version numbers are never reused.
# --------------------------------------------------------------------------------------------------

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _payload(n: int) -> dict[str, object]:
    return {"schema": "newsroom.page/1", "edition": "en-US", "section": "top", "as_of": "x",
            "stories": [{"story_id": f"s{i}"} for i in range(n)]}


def test_rollback_then_publish_takes_a_new_number(store: ObjectStore) -> None:
    for n in (3, 4, 5):
        assert publish_page(store, "en-US", "top", _payload(n), now=NOW, validate=lambda new, prev: None).published
    assert rollback_page(store, "en-US", "top", 1, now=NOW).published
    live = read_live_page(store, "en-US", "top")
    assert live.pointer.version == 1 and b'"s2"' in live.data and b'"s3"' not in live.data
    assert not rollback_page(store, "en-US", "top", 1, now=NOW).published  # already live
    assert rollback_page(store, "en-US", "top", 2, now=NOW).published  # forward again undoes a rollback
    result = publish_page(store, "en-US", "top", _payload(6), now=NOW, validate=lambda new, prev: None)
    assert result.published and result.version == 4
    with pytest.raises(SnapshotNotFoundError):
        rollback_page(store, "en-US", "top", 9, now=NOW)


def test_the_pool_is_not_a_live_page(store: ObjectStore) -> None:
    publish_page(store, "en-US", "top", _payload(2), now=NOW, validate=lambda new, prev: None)
    publish_page(store, "en-US", "pool", _payload(2), now=NOW, validate=lambda new, prev: None)
    assert list_live_pages(store) == [("en-US", "top")]
    assert read_pointer(store, "en-US", "pool") is not None


# --------------------------------------------------------------------------------------------------
# Snapshot bytes are strict JSON: a NaN or infinite number is refused, never written.
# --------------------------------------------------------------------------------------------------

def test_snapshots_are_sorted_compact_utf8() -> None:
    assert dump_snapshot({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_a_non_finite_number_is_refused(value: float) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        dump_snapshot({"stories": [{"story_id": "s", "score": value}]})
    assert json.loads(dump_snapshot({"score": 0.0})) == {"score": 0.0}
