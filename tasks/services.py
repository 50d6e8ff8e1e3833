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

A step's two flows are a few lines each on top of this module: the minute flow calls
:func:`scheduled_pass` (stand by, or one pass in the slot), the long-running flow
:func:`run_service` with its :class:`ServiceSpec` (the loop :func:`serve_passes`, its wake event,
heartbeat, slot, deadline and progress artifact). A loop of another shape (the cluster writer's)
takes the parts it shares: :func:`deadline_after` and :func:`listening`.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, Protocol, TypedDict, TypeVar
from uuid import UUID

from newsroom.times import parse_iso_datetime
from tasks.clock import resolve_now
from tasks.events import EventWaiter, ReceivedEvent
from tasks.settings import FreshnessSettings
from tasks.storage import configured_store
from warehouse import layout
from warehouse.errors import ObjectNotFoundError
from warehouse.store import ObjectStore

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

log = logging.getLogger(__name__)

S = TypeVar("S")

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


Wake = Literal["start", "event", "due", "backstop"]


@dataclass(frozen=True, slots=True)
class PassRecord:
    """One pass of a long-running flow: what it reported, when it ran, what woke it, how long it took."""

    counts: Mapping[str, object]
    """What the pass itself reported (its step's counts), shown as ``key=value``; empty when it failed."""
    at: str
    woken_by: Wake
    events: int
    seconds: float
    error: str | None = None

    def fields(self) -> list[tuple[str, object]]:
        """Its fields in the order the log and the artifact show them: the pass's counts (or its error) first."""
        head: list[tuple[str, object]] = [("error", self.error)] if self.error is not None else list(self.counts.items())
        return [*head, ("at", self.at), ("woken_by", self.woken_by), ("events", self.events), ("seconds", self.seconds)]


class PassTotals(TypedDict):
    """A long-running flow's passes in figures: what its flow run returns."""

    passes: int
    woken_by: dict[str, int]
    failed: int
    pass_p50_seconds: float | None
    pass_max_seconds: float | None


class ServiceSkipped(TypedDict):
    """What a long-running flow returns when ``NEWSROOM_FRESHNESS_MODE`` leaves the work to the minute runs."""

    skipped: str


@dataclass(slots=True)
class PassReport:
    """What a long-running flow did: one record per pass, with what woke it and how long it took."""

    passes: list[PassRecord] = field(default_factory=list)

    def totals(self) -> PassTotals:
        reasons = Counter(p.woken_by for p in self.passes)
        seconds = sorted(p.seconds for p in self.passes)
        return {"passes": len(self.passes), "woken_by": dict(sorted(reasons.items())),
                "failed": sum(1 for p in self.passes if p.error is not None),
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
        lines += ["", "Latest pass: " + ", ".join(f"{k}={v}" for k, v in latest.fields())]
    return "\n".join(lines) + "\n"


@dataclass(slots=True)
class _Loop:
    """Where :func:`serve_passes` stands between passes (monotonic seconds)."""

    woken_by: Wake = "start"
    last_pass: float = field(default_factory=time.monotonic)
    last_beat: float = 0.0
    events_taken: list[ReceivedEvent] = field(default_factory=list)

    def has_work(self) -> bool:
        return self.woken_by in ("start", "due", "backstop") or bool(self.events_taken)


def _run_one_pass(name: ServiceName, run_pass: Callable[[datetime], Mapping[str, object]], loop: _Loop, *,
                  clock: Callable[[], datetime],
                  exclusive: Callable[[], AbstractContextManager[object]] | None) -> PassRecord:
    """Run one pass inside ``exclusive()`` at the instant it got the slot; a pass that raises is recorded."""
    began = time.monotonic()
    at = clock()
    counts: Mapping[str, object] = {}
    error = None
    try:
        with exclusive() if exclusive is not None else nullcontext():
            at = clock()  # when it got the slot: a pass never runs at an instant older than the last
            counts = dict(run_pass(at))
    except Exception as e:  # noqa: BLE001 - one failed pass must not stop the flow for the hour
        log.error("service_pass_failed name=%s error=%r", name, e)
        error = f"{type(e).__name__}: {e}"
    loop.last_pass = time.monotonic()
    return PassRecord(counts, at.isoformat(), loop.woken_by, len(loop.events_taken),
                      round(loop.last_pass - began, 3), error)


def _seconds_to_wake(loop: _Loop, now: datetime, due_at: datetime | None, *, backstop_seconds: float,
                     batch_seconds: float, heartbeat_seconds: float | None) -> float:
    """How long an idle loop may wait: until the backstop, what falls due (plus the batch), or the next heartbeat."""
    wait = backstop_seconds - (time.monotonic() - loop.last_pass)
    if due_at is not None:
        # Never a hot loop over a feed the pass did not take: a due wake is at least a second away.
        wait = min(wait, max(MIN_DUE_WAIT_SECONDS, (due_at - now).total_seconds() + batch_seconds))
    if heartbeat_seconds is not None:
        wait = min(wait, max(0.0, heartbeat_seconds - (time.monotonic() - loop.last_beat)))
    return max(0.0, wait)


def _wait_for_events(waiter: Waiter | None, wake_at: float, until: Callable[[], bool],
                     sleep: Callable[[float], None]) -> list[ReceivedEvent]:
    """Wait until ``wake_at`` (monotonic) or an event, in slices, so ``until`` is honoured within a second."""
    while True:
        left = min(UNTIL_CHECK_SECONDS, wake_at - time.monotonic())
        taken: list[ReceivedEvent] = []
        if waiter is not None:
            taken = waiter.wait(max(0.0, left))
        elif left > 0:
            sleep(left)
        if taken or time.monotonic() >= wake_at or until():
            return taken


def serve_passes(
    name: ServiceName,
    run_pass: Callable[[datetime], Mapping[str, object]],
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
    on_pass: Callable[[PassRecord, PassReport], None] | None = None,
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
    loop = _Loop()
    while not until():
        if loop.has_work():
            record = _run_one_pass(name, run_pass, loop, clock=clock, exclusive=exclusive)
            report.passes.append(record)
            if heartbeat is not None:
                heartbeat(len(report.passes))
                loop.last_beat = loop.last_pass
            if on_pass is not None:
                on_pass(record, report)
            loop.events_taken, loop.woken_by = [], "event"
            continue
        now = clock()
        due_at = next_due(now) if next_due is not None else None
        wait = _seconds_to_wake(loop, now, due_at, backstop_seconds=backstop_seconds, batch_seconds=batch_seconds,
                                heartbeat_seconds=heartbeat_seconds if heartbeat is not None else None)
        loop.events_taken = _wait_for_events(waiter, time.monotonic() + wait, until, sleep)
        if loop.events_taken:
            if debounce_seconds > 0:
                sleep(debounce_seconds)
                loop.events_taken += waiter.take() if waiter is not None else []
            continue
        if time.monotonic() - loop.last_pass >= backstop_seconds:
            loop.woken_by = "backstop"
        elif due_at is not None and clock() >= due_at:
            loop.woken_by = "due"
        elif heartbeat is not None and time.monotonic() - loop.last_beat >= heartbeat_seconds:
            heartbeat(len(report.passes))
            loop.last_beat = time.monotonic()
    return report


def deadline_after(run_minutes: float | None) -> Callable[[], bool]:
    """Whether ``run_minutes`` (from now) ran out; never, for None (a flow running until stopped)."""
    deadline = None if run_minutes is None else time.monotonic() + run_minutes * 60
    return lambda: deadline is not None and time.monotonic() > deadline


@contextmanager
def listening(event_names: Sequence[str], *, enabled: bool = True) -> Iterator[EventWaiter | None]:
    """An :class:`~tasks.events.EventWaiter` on ``event_names``, started and stopped around the block
    (None when not ``enabled``: the flow polls on its own clock)."""
    if not enabled:
        yield None
        return
    waiter = EventWaiter(event_names)
    waiter.start()
    try:
        yield waiter
    finally:
        waiter.stop()


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """How one step runs as a long-running flow: what :func:`run_service` needs besides its pass."""

    name: ServiceName
    title: str
    """The artifact's heading (``Long-running ingest``); its description is the same in lower case."""
    wakes_on: str
    """The event that makes a pass at once (``tasks.events.FEED_PUSHED``, ``STORIES_COMMITTED``)."""
    fallback: str
    """What does the work when ``NEWSROOM_FRESHNESS_MODE`` is not ``events``, for the log line."""
    backstop_seconds: float
    debounce_seconds: float = 0.0
    batch_seconds: float = 0.0


def run_service(spec: ServiceSpec, run_pass: Callable[[ObjectStore, datetime], Mapping[str, object]], *,
                freshness: FreshnessSettings, run_minutes: float | None, report_every_passes: int,
                next_due: Callable[[ObjectStore, datetime], datetime | None] | None = None,
                ) -> PassTotals | ServiceSkipped:
    """The body of a long-running flow: :func:`serve_passes` over the configured store, woken by
    ``spec.wakes_on``, each pass in the step's concurrency slot, with the heartbeat the minute
    deployment reads, for ``run_minutes`` (None: until :func:`request_stop`).

    Does nothing unless ``NEWSROOM_FRESHNESS_MODE=events``. A ``<name>-service`` artifact shows the
    passes every ``report_every_passes`` passes and at the end; a stopped heartbeat is written last,
    so the minute deployment takes over at once.
    """
    from prefect import get_run_logger

    from tasks.reports import publish_artifact  # with Prefect's artifacts: only where a flow runs

    logger = get_run_logger()
    mode = freshness.mode
    if mode != "events":
        logger.info("%s_service_skipped mode=%s: %s", spec.name, mode, spec.fallback)
        return {"skipped": mode}
    store = configured_store()
    until_deadline = deadline_after(run_minutes)
    stop_requested(spec.name, reset=True)

    def publish_progress(report: PassReport) -> None:
        publish_artifact(f"{spec.name}-service", service_markdown(spec.title, report), spec.title.lower())

    def on_pass(record: PassRecord, report: PassReport) -> None:
        if len(report.passes) % report_every_passes == 0:
            publish_progress(report)

    with listening([spec.wakes_on]) as waiter:
        try:
            report = serve_passes(
                spec.name, lambda at: run_pass(store, at), clock=lambda: resolve_now(None),
                until=lambda: stop_requested(spec.name) or until_deadline(), waiter=waiter,
                backstop_seconds=spec.backstop_seconds, debounce_seconds=spec.debounce_seconds,
                next_due=None if next_due is None else (lambda at: next_due(store, at)),
                batch_seconds=spec.batch_seconds, exclusive=lambda: one_pass_at_a_time(spec.name),
                heartbeat=lambda passes: write_heartbeat(store, spec.name, passes), on_pass=on_pass)
        finally:
            write_heartbeat(store, spec.name, 0, stopped=True)  # the minute deployment takes over at once
    publish_progress(report)
    totals = report.totals()
    logger.info("%s_service_done %s", spec.name, " ".join(f"{k}={v}" for k, v in totals.items()))
    return totals


def scheduled_pass(name: ServiceName, now: str | None, run_pass: Callable[[ObjectStore, datetime], S], *,
                   standby: str, freshness: FreshnessSettings) -> tuple[datetime, S] | None:
    """One pass of a minute run at ``now`` (ISO; default: the current time), beside its long-running flow.

    With ``NEWSROOM_FRESHNESS_MODE=events``, a run on the current time stands by (returns None, and
    logs ``<name>_standby: <standby>``) while the long-running flow reported a pass recently, and
    otherwise holds the step's concurrency slot, running at the instant it got it, so the two never
    run side by side. Returns the instant the pass ran at and what it returned.
    """
    from prefect import get_run_logger

    at = resolve_now(now)
    store = configured_store()
    on_events = now is None and freshness.mode == "events"
    if on_events and is_service_alive(store, name, at, freshness.service_stale_seconds):
        get_run_logger().info("%s_standby: %s", name, standby)
        return None
    with one_pass_at_a_time(name) if on_events else nullcontext():
        if on_events:
            at = resolve_now(None)  # when it got the slot: after the pass it waited for, never older
        return at, run_pass(store, at)
