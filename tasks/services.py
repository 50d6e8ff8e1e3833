"""What the long-running ingest and rank flows share with their scheduled fallbacks (issue 31).

Two rules keep a long-running flow and the minute deployment of the same step from doing the work
twice:

* **A heartbeat in the store.** The long-running flow writes ``state/services/<name>.json`` after
  every pass and while idle; a scheduled run on the real clock stands by while that heartbeat is
  younger than ``NEWSROOM_FRESHNESS_SERVICE_STALE_SECONDS``, and does the work itself otherwise, so
  the schedule takes over within two minutes when the long-running flow stops or hangs.
* **One pass in flight.** A pass on the real clock holds a slot of a Prefect global concurrency
  limit of 1 (``newsroom-ingest``, ``newsroom-rank``) from start to end, so a scheduled run that
  starts while the long-running flow is in a pass waits for it instead of running beside it. Rank
  is one job over every edition (one story snapshot and one set of aggregates serve them all), so
  its edition group is every edition and ``newsroom-rank`` holds one slot.

A double pass is harmless anyway: a page equal to the live one is not published again, an older
pass never moves a pointer back, and a writer commits only through its checkpoint's If-Match.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol
from uuid import UUID

from newsroom.times import parse_iso_datetime
from tasks.events import ReceivedEvent
from warehouse import layout
from warehouse.errors import ObjectNotFoundError
from warehouse.store import ObjectStore

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

log = logging.getLogger(__name__)

ServiceName = Literal["ingest", "rank"]
LIMIT_NAMES: dict[ServiceName, str] = {"ingest": "newsroom-ingest", "rank": "newsroom-rank"}
"""The Prefect global concurrency limit (of 1) each step's passes hold (created on first use)."""
LEASE_SECONDS = 60.0
"""A holder that dies frees its slot after this long (Prefect renews the lease while it lives)."""
HEARTBEAT_SECONDS = 30.0
"""An idle long-running flow still writes its heartbeat this often."""
MIN_DUE_WAIT_SECONDS = 1.0
"""A wake for something falling due is never sooner than this: no hot loop over a feed a pass skips."""
UNTIL_CHECK_SECONDS = 1.0
"""A long-running flow checks whether its time is up at least this often."""

_STOP: dict[ServiceName, threading.Event] = {"ingest": threading.Event(), "rank": threading.Event()}
"""Set by :func:`request_stop`: the long-running ``name`` flow of this process ends at its next check."""


def request_stop(name: ServiceName) -> None:
    """End this process's long-running ``name`` flow within a second (after its pass in flight), as
    its run time running out does; for what runs the flow inside a larger process. A flow starting
    later is not affected (:func:`stop_requested` is reset as it starts)."""
    _STOP[name].set()


def stop_requested(name: ServiceName, *, reset: bool = False) -> bool:
    """Whether :func:`request_stop` asked the ``name`` flow to end; ``reset``: clear the request (a flow starting)."""
    if reset:
        _STOP[name].clear()
        return False
    return _STOP[name].is_set()


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """When a long-running flow last did a pass (or looked, idle), and who it is."""

    name: str
    beat_at: datetime
    passes: int
    host: str
    pid: int
    is_stopped: bool = False


def write_heartbeat(store: ObjectStore, name: ServiceName, passes: int, now: datetime | None = None, *,
                    stopped: bool = False) -> None:
    """Record that the ``name`` flow is alive, or (``stopped``) that it ended, so a scheduled run takes
    over at once instead of after the heartbeat goes stale (a lost write only costs that wait)."""
    beat = {"name": name, "beat_at": (now or datetime.now(UTC)).isoformat(), "passes": passes,
            "host": socket.gethostname(), "pid": os.getpid(), "is_stopped": stopped}
    try:
        store.put(layout.service_heartbeat_key(name), json.dumps(beat, sort_keys=True).encode(),
                  content_type="application/json")
    except Exception as e:  # noqa: BLE001 - the scheduled fallback covers a missed heartbeat
        log.warning("service_heartbeat_not_written name=%s error=%r", name, e)


def read_heartbeat(store: ObjectStore, name: ServiceName) -> Heartbeat | None:
    """The ``name`` flow's last heartbeat; None if there is none or it cannot be read."""
    try:
        raw = json.loads(store.get(layout.service_heartbeat_key(name)).data)
        beat_at = parse_iso_datetime(str(raw["beat_at"]))
        if beat_at is None:
            return None
        return Heartbeat(str(raw["name"]), beat_at, int(raw["passes"]), str(raw["host"]), int(raw["pid"]),
                         bool(raw.get("is_stopped", False)))
    except ObjectNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as e:
        log.warning("service_heartbeat_unreadable name=%s error=%r", name, e)
        return None


def is_service_alive(store: ObjectStore, name: ServiceName, now: datetime, stale_seconds: float) -> bool:
    """Whether the long-running ``name`` flow reported a pass (or an idle look) within ``stale_seconds``."""
    beat = read_heartbeat(store, name)
    return beat is not None and not beat.is_stopped and (now - beat.beat_at).total_seconds() <= stale_seconds


_ENSURED: set[str] = set()
"""The Prefect API URLs whose limits this process created or found."""
WAIT_POLL_SECONDS = 0.5
"""A pass waiting for the slot asks again this often (Prefect's own helper waits out the server's
Retry-After, up to 30 s, which a hand-off cannot afford)."""


def ensure_limits(client: SyncPrefectClient) -> None:
    """Create the global concurrency limits the passes hold, if missing (one slot each); once per
    process and API."""
    api = str(client.api_url)
    if api in _ENSURED:
        return
    for limit in LIMIT_NAMES.values():
        try:
            client.upsert_global_concurrency_limit_by_name(limit, 1)
        except Exception:  # noqa: BLE001 - another process created it at the same moment
            client.read_global_concurrency_limit_by_name(limit)  # raises if it is really missing
    _ENSURED.add(api)


@contextmanager
def one_pass_at_a_time(name: ServiceName, lease_seconds: float = LEASE_SECONDS) -> Iterator[None]:
    """Hold the ``name`` step's slot (a Prefect global concurrency limit of 1) for a pass on the real
    clock, waiting while another process holds it. The limit is created on first use.

    The slot is a lease (``lease_seconds``), renewed while the pass runs, so a holder that dies
    frees it within that time. It is taken and released through Prefect's client directly:
    ``prefect.concurrency.sync.concurrency`` waits out the server's Retry-After (up to 30 s) after a
    refusal, and once stalled for minutes here on a loaded machine.
    """
    import httpx
    from prefect.client.orchestration import get_client

    limit = LIMIT_NAMES[name]
    with get_client(sync_client=True) as client:
        ensure_limits(client)
        while True:
            try:
                response = client.increment_concurrency_slots_with_lease(
                    names=[limit], slots=1, mode="concurrency", lease_duration=lease_seconds)
                break
            except httpx.HTTPStatusError as e:
                if e.response.status_code != 423:  # 423 Locked: another pass holds the slot
                    raise
                time.sleep(WAIT_POLL_SECONDS)
        granted = response.json()
        if not granted.get("limits"):
            raise RuntimeError(f"the Prefect concurrency limit {limit} does not exist")
        lease = UUID(granted["lease_id"])
        done = threading.Event()

        def renew() -> None:
            while not done.wait(lease_seconds / 3):
                try:
                    client.renew_concurrency_lease(lease, lease_seconds)
                except Exception as e:  # noqa: BLE001 - the next renewal tries again
                    log.warning("concurrency_lease_not_renewed limit=%s error=%r", limit, e)

        renewer = threading.Thread(target=renew, name=f"{limit}-lease", daemon=True)
        renewer.start()
        try:
            yield
        finally:
            done.set()
            renewer.join(timeout=5)
            try:
                client.release_concurrency_slots_with_lease(lease)
            except Exception as e:  # noqa: BLE001 - the lease expires on its own
                log.warning("concurrency_lease_not_released limit=%s error=%r", limit, e)


class Waiter(Protocol):
    """What a long-running flow waits on for events (``tasks.events.EventWaiter``)."""

    def wait(self, timeout_seconds: float) -> list[ReceivedEvent]: ...

    def take(self) -> list[ReceivedEvent]: ...


@dataclass(slots=True)
class PassReport:
    """What a long-running flow did: one summary per pass, with what woke it and how long it took."""

    passes: list[dict[str, Any]] = field(default_factory=list)

    def totals(self) -> dict[str, Any]:
        reasons = Counter(str(p["woken_by"]) for p in self.passes)
        seconds = sorted(float(p["seconds"]) for p in self.passes)
        return {"passes": len(self.passes), "woken_by": dict(sorted(reasons.items())),
                "failed": sum(1 for p in self.passes if "error" in p),
                "pass_p50_seconds": seconds[len(seconds) // 2] if seconds else None,
                "pass_max_seconds": seconds[-1] if seconds else None}


def service_markdown(title: str, report: PassReport) -> str:
    """A long-running flow's progress as a markdown artifact: passes, what woke them, how long they took."""
    totals = report.totals()
    woken = ", ".join(f"{k} {v}" for k, v in totals["woken_by"].items()) or "-"
    p50, top = totals["pass_p50_seconds"], totals["pass_max_seconds"]
    lines = [f"## {title}", "", "| passes | woken by | failed | pass p50 s | pass max s |", "|---|---|---|---|---|",
             f"| {totals['passes']} | {woken} | {totals['failed']} | {'-' if p50 is None else f'{p50:.1f}'} | "
             f"{'-' if top is None else f'{top:.1f}'} |"]
    if report.passes:
        latest = report.passes[-1]
        lines += ["", "Latest pass: " + ", ".join(f"{k}={v}" for k, v in latest.items())]
    return "\n".join(lines) + "\n"


Wake = Literal["start", "event", "due", "backstop"]


def serve_passes(
    name: ServiceName,
    run_pass: Callable[[datetime], dict[str, Any]],
    *,
    clock: Callable[[], datetime],
    until: Callable[[], bool],
    waiter: Waiter | None,
    backstop_seconds: float,
    debounce_seconds: float = 0.0,
    next_due: Callable[[datetime], datetime | None] | None = None,
    batch_seconds: float = 0.0,
    exclusive: Callable[[], AbstractContextManager[object]] | None = None,
    heartbeat: Callable[[int], None] | None = None,
    heartbeat_seconds: float = HEARTBEAT_SECONDS,
    on_pass: Callable[[dict[str, Any], PassReport], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> PassReport:
    """Run ``run_pass`` as soon as there is something to do, one pass at a time, until ``until()``.

    A pass runs at the start; then when an event arrives (after ``debounce_seconds``, collecting
    the events that follow it, so one pass covers a burst of them), when ``next_due`` says
    something fell due (plus ``batch_seconds``, so what falls due together shares a pass), and at
    least every ``backstop_seconds``. Events that arrive during a pass make one more pass after
    it, never a pass beside it. Each pass runs inside ``exclusive()`` (the step's Prefect
    concurrency slot) with ``clock()`` as its instant; one that raises is recorded and the loop
    goes on. ``heartbeat(passes)`` is called after each pass and every ``heartbeat_seconds`` while
    idle.
    """
    report = PassReport()
    woken_by: Wake = "start"
    last_pass = time.monotonic()
    last_beat = 0.0
    events_taken: list[ReceivedEvent] = []
    while not until():
        if woken_by == "start" or events_taken or woken_by in ("due", "backstop"):
            began = time.monotonic()
            at = clock()
            try:
                with exclusive() if exclusive is not None else nullcontext():
                    at = clock()  # when it got the slot: a pass never runs at an instant older than the last
                    summary: dict[str, Any] = dict(run_pass(at))
            except Exception as e:  # noqa: BLE001 - one failed pass must not stop the flow for the hour
                log.error("service_pass_failed name=%s error=%r", name, e)
                summary = {"error": f"{type(e).__name__}: {e}"}
            last_pass = time.monotonic()
            summary = {**summary, "at": at.isoformat(), "woken_by": woken_by, "events": len(events_taken),
                       "seconds": round(last_pass - began, 3)}
            report.passes.append(summary)
            if heartbeat is not None:
                heartbeat(len(report.passes))
                last_beat = last_pass
            if on_pass is not None:
                on_pass(summary, report)
            events_taken, woken_by = [], "event"
            continue
        now = clock()
        wait = backstop_seconds - (time.monotonic() - last_pass)
        due_at = next_due(now) if next_due is not None else None
        if due_at is not None:
            # Never a hot loop over a feed the pass did not take: a due wake is at least a second away.
            wait = min(wait, max(MIN_DUE_WAIT_SECONDS, (due_at - now).total_seconds() + batch_seconds))
        if heartbeat is not None:
            wait = min(wait, max(0.0, heartbeat_seconds - (time.monotonic() - last_beat)))
        wake_at = time.monotonic() + max(0.0, wait)
        while True:  # in slices, so ``until`` is honoured within a second
            left = min(UNTIL_CHECK_SECONDS, wake_at - time.monotonic())
            if waiter is not None:
                events_taken = waiter.wait(max(0.0, left))
            elif left > 0:
                sleep(left)
            if events_taken or time.monotonic() >= wake_at or until():
                break
        if events_taken:
            if debounce_seconds > 0:
                sleep(debounce_seconds)
                events_taken += waiter.take() if waiter is not None else []
            continue
        if time.monotonic() - last_pass >= backstop_seconds:
            woken_by = "backstop"
        elif due_at is not None and clock() >= due_at:
            woken_by = "due"
        elif heartbeat is not None and time.monotonic() - last_beat >= heartbeat_seconds:
            heartbeat(len(report.passes))
            last_beat = time.monotonic()
    return report
