"""The long-running flows' loop (issue 31): a pass at once for an event, one pass at a time, the
backstop and the due time as clocks of last resort, and the heartbeat the minute deployments read."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tasks.events import ReceivedEvent
from tasks.services import (
    is_service_alive,
    read_heartbeat,
    serve_passes,
    write_heartbeat,
)
from warehouse import layout
from warehouse.store import LocalStore

T0 = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)


class QueueWaiter:
    """Events the test hands in, as ``tasks.events.EventWaiter`` hands in those of the Prefect API."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: list[ReceivedEvent] = []

    def push(self, name: str = "newsroom.stories.committed") -> None:
        with self._cond:
            self._pending.append(ReceivedEvent(name, "newsroom.writer.en", {}, datetime.now(UTC)))
            self._cond.notify_all()

    def wait(self, timeout_seconds: float) -> list[ReceivedEvent]:
        with self._cond:
            self._cond.wait_for(lambda: bool(self._pending), timeout_seconds)
            taken, self._pending = self._pending, []
        return taken

    def take(self) -> list[ReceivedEvent]:
        return self.wait(0.0)


class Recorder:
    """A pass that records when it ran, and may take a while."""

    def __init__(self, seconds: float = 0.0, fail_at: int | None = None) -> None:
        self.seconds = seconds
        self.fail_at = fail_at
        self.intervals: list[tuple[float, float]] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0

    def __call__(self, at: datetime) -> dict[str, Any]:
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        began = time.monotonic()
        try:
            if self.fail_at is not None and len(self.intervals) == self.fail_at:
                raise RuntimeError("the store went away")
            time.sleep(self.seconds)
            return {"ok": True}
        finally:
            self.intervals.append((began, time.monotonic()))
            with self.lock:
                self.in_flight -= 1


def _run(passes: Recorder, seconds: float, **kwargs: Any) -> tuple[threading.Thread, dict[str, Any]]:
    stop_at = time.monotonic() + seconds
    out: dict[str, Any] = {}

    def go() -> None:
        out["report"] = serve_passes("rank", passes, clock=lambda: datetime.now(UTC),
                                     until=lambda: time.monotonic() > stop_at, **kwargs)

    thread = threading.Thread(target=go)
    thread.start()
    return thread, out


def test_an_event_runs_a_pass_at_once_not_at_the_backstop() -> None:
    waiter, passes = QueueWaiter(), Recorder()
    thread, out = _run(passes, 3.0, waiter=waiter, backstop_seconds=60.0)
    time.sleep(0.5)
    pushed = time.monotonic()
    waiter.push()
    thread.join()
    woken = [p.woken_by for p in out["report"].passes]
    assert woken == ["start", "event"]
    assert passes.intervals[1][0] - pushed < 2.0  # not the 60 s backstop


def test_events_during_a_pass_make_one_more_pass_after_it_never_beside_it() -> None:
    waiter, passes = QueueWaiter(), Recorder(seconds=1.0)
    thread, out = _run(passes, 4.5, waiter=waiter, backstop_seconds=60.0)
    time.sleep(0.3)  # the start pass is running
    for _ in range(5):
        waiter.push()
    thread.join()
    report = out["report"]
    assert [p.woken_by for p in report.passes] == ["start", "event"]
    assert report.passes[1].events == 5
    assert passes.most_in_flight == 1
    assert passes.intervals[1][0] >= passes.intervals[0][1]


def test_the_debounce_lets_following_events_share_the_pass() -> None:
    waiter, passes = QueueWaiter(), Recorder()
    thread, out = _run(passes, 2.5, waiter=waiter, backstop_seconds=60.0, debounce_seconds=0.6)
    time.sleep(0.3)
    waiter.push()
    time.sleep(0.2)
    waiter.push()
    thread.join()
    assert [(p.woken_by, p.events) for p in out["report"].passes] == [("start", 0), ("event", 2)]


def test_the_backstop_and_the_due_time_run_passes_without_events() -> None:
    passes = Recorder()
    thread, out = _run(passes, 2.6, waiter=QueueWaiter(), backstop_seconds=1.0)
    thread.join()
    assert [p.woken_by for p in out["report"].passes] == ["start", "backstop", "backstop"]

    due = datetime.now(UTC) + timedelta(seconds=1.2)
    passes = Recorder()
    thread, out = _run(passes, 2.5, waiter=QueueWaiter(), backstop_seconds=60.0,
                       next_due=lambda now: due if len(passes.intervals) < 2 else None)
    thread.join()
    assert [p.woken_by for p in out["report"].passes] == ["start", "due"]
    assert passes.intervals[1][0] - passes.intervals[0][1] >= 1.0  # not before it fell due


def test_a_failed_pass_is_recorded_and_the_loop_goes_on() -> None:
    waiter, passes = QueueWaiter(), Recorder(fail_at=0)
    thread, out = _run(passes, 1.5, waiter=waiter, backstop_seconds=60.0)
    time.sleep(0.3)
    waiter.push()
    thread.join()
    report = out["report"].passes
    assert "store went away" in (report[0].error or "") and report[1].counts["ok"] is True


def test_each_pass_runs_inside_the_exclusive_slot_at_the_instant_it_got_it() -> None:
    slot = threading.Lock()
    slot.acquire()  # another process's pass holds the slot

    @contextmanager
    def exclusive() -> Iterator[None]:
        with slot:
            yield

    passes = Recorder()
    seen: list[datetime] = []

    def run_pass(at: datetime) -> dict[str, Any]:
        seen.append(at)
        return passes(at)

    stop_at = time.monotonic() + 1.5
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.update(report=serve_passes(
        "rank", run_pass, clock=lambda: datetime.now(UTC), until=lambda: time.monotonic() > stop_at,
        waiter=QueueWaiter(), backstop_seconds=60.0, exclusive=exclusive)))
    started = datetime.now(UTC)
    thread.start()
    time.sleep(0.8)
    assert not passes.intervals  # waiting for the slot
    released = datetime.now(UTC)
    slot.release()
    thread.join()
    assert len(passes.intervals) == 1 and seen[0] >= released > started


def test_the_heartbeat_tells_a_scheduled_run_whether_to_stand_by(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    assert not is_service_alive(store, "rank", T0, 120)
    write_heartbeat(store, "rank", 3, now=T0)
    assert read_heartbeat(store, "rank").passes == 3  # type: ignore[union-attr]
    assert is_service_alive(store, "rank", T0 + timedelta(seconds=119), 120)
    assert not is_service_alive(store, "rank", T0 + timedelta(seconds=121), 120)  # stale: it stopped or hangs
    write_heartbeat(store, "rank", 3, now=T0, stopped=True)
    assert not is_service_alive(store, "rank", T0, 120)  # ended: the schedule takes over at once
    store.put(layout.service_heartbeat_key("rank"), b"{not json")
    assert not is_service_alive(store, "rank", T0, 120)


def test_idle_looks_write_the_heartbeat() -> None:
    beats: list[int] = []
    thread, out = _run(Recorder(), 1.3, waiter=QueueWaiter(), backstop_seconds=60.0,
                       heartbeat=beats.append, heartbeat_seconds=0.4)
    thread.join()
    assert len(out["report"].passes) == 1 and len(beats) >= 3


@pytest.mark.parametrize("name", ["rank", "ingest"])
def test_heartbeat_keys_live_under_state_services(name: str) -> None:
    assert layout.service_heartbeat_key(name) == f"state/services/{name}.json"


def test_a_deadline_runs_out_after_its_minutes_and_none_never_does() -> None:
    from tasks.services import deadline_after

    never, soon = deadline_after(None), deadline_after(0.5 / 60)
    assert not never() and not soon()
    time.sleep(0.6)
    assert soon() and not never()


def test_a_pass_shows_its_own_counts_first_or_its_error_alone() -> None:
    from tasks.services import PassRecord, PassReport, service_markdown

    ok = PassRecord({"published": 2}, "2026-12-01T06:00:00+00:00", "event", 3, 1.5)
    failed = PassRecord({}, "2026-12-01T06:01:00+00:00", "backstop", 0, 0.2, error="OSError: gone")
    assert [k for k, _ in ok.fields()] == ["published", "at", "woken_by", "events", "seconds"]
    assert failed.fields()[0] == ("error", "OSError: gone")
    report = PassReport([ok, failed])
    assert report.totals() == {"passes": 2, "woken_by": {"backstop": 1, "event": 1}, "failed": 1,
                               "pass_p50_seconds": 1.5, "pass_max_seconds": 1.5}
    assert service_markdown("Long-running rank", report).endswith(
        "Latest pass: error=OSError: gone, at=2026-12-01T06:01:00+00:00, woken_by=backstop, events=0, seconds=0.2\n")
