"""newsroom's Prefect events: what the pipeline tells Prefect as it happens, and how a long-running
flow waits for them (issue 31).

Each hand-off an article makes on its way to a page is announced as a Prefect event, so the next
step can start at once instead of on its own clock, and an engineer sees the hand-offs in the UI's
event feed:

| event | resource | emitted by |
|---|---|---|
| ``newsroom.feed.pushed`` | ``newsroom.feed.<feed_id>`` | the WebSub receiver, once a push marker is recorded |
| ``newsroom.articles.appended`` | ``newsroom.log.articles`` | ingest, once an article segment is written |
| ``newsroom.stories.committed`` | ``newsroom.writer.<language>`` | a language writer, once its commit holds |
| ``newsroom.writer.fenced`` | ``newsroom.writer.<language>`` | a writer whose commit another writer fenced |
| ``newsroom.pages.published`` | ``newsroom.pages`` | rank, once page pointers moved |
| ``newsroom.health.<check>`` | ``newsroom.health.<check>.<subject>`` | the health checks, one per flag raised |

Events are notifications: the state they announce is already in the store, so a lost event only
costs the time until the consumer's own backstop clock fires, and a consumer acting twice on one
change finds nothing left to do. Emitting needs a Prefect API (``PREFECT_API_URL``); without one
(unit tests, a plain ``flow.fn()``) nothing is sent, and a failure to send is logged, never raised.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

log = logging.getLogger(__name__)

FEED_PUSHED = "newsroom.feed.pushed"
ARTICLES_APPENDED = "newsroom.articles.appended"
STORIES_COMMITTED = "newsroom.stories.committed"
WRITER_FENCED = "newsroom.writer.fenced"
PAGES_PUBLISHED = "newsroom.pages.published"
HEALTH_PREFIX = "newsroom.health."
"""Followed by the check's name: ``newsroom.health.freshness_lag``, ``newsroom.health.stale_snapshot``, ..."""

RESOURCE_MAX_CHARS = 200
"""A resource id is built from a store's names (feed ids, publisher ids, languages): capped."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]+")


def resource_id(*parts: str) -> str:
    """``newsroom.<part>.<part>...``, each part reduced to characters safe in a resource id.

    >>> resource_id("health", "freshness_lag", "all feeds")
    'newsroom.health.freshness_lag.all-feeds'
    """
    cleaned = [_UNSAFE.sub("-", p[:RESOURCE_MAX_CHARS]).strip("-") or "-" for p in parts]
    return ".".join(["newsroom", *cleaned])[:RESOURCE_MAX_CHARS]


def _api_url() -> str | None:
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return str(url) if url else None


def emit(event: str, resource: str, payload: Mapping[str, Any] | None = None,
         related: Sequence[Mapping[str, str]] = ()) -> bool:
    """Send one event to the Prefect API in effect; True if it was handed to Prefect's sender.

    Never raises: an event announces state already stored, so losing one only delays the consumer
    until its backstop clock.
    """
    if _api_url() is None:
        return False
    try:
        from prefect.events import emit_event

        sent = emit_event(event=event, resource={"prefect.resource.id": resource}, payload=dict(payload or {}),
                          related=[dict(r) for r in related] or None)
    except Exception as e:  # noqa: BLE001 - a notification must never fail the work it announces
        log.warning("event_not_sent event=%s resource=%s error=%r", event, resource, e)
        return False
    return sent is not None


def emit_flags(flags: Sequence[Mapping[str, str]]) -> int:
    """One ``newsroom.health.<check>`` event per health flag (``check``, ``subject``, ``detail``);
    returns how many were sent. The automations in ``prefect.yaml`` react to them."""
    return sum(emit(HEALTH_PREFIX + f["check"], resource_id("health", f["check"], f["subject"]),
                    {"check": f["check"], "subject": f["subject"], "detail": f["detail"][:1000]})
               for f in flags)


@dataclass(frozen=True, slots=True)
class ReceivedEvent:
    """One event a waiting flow received: its name, resource id, payload and when it occurred."""

    event: str
    resource: str
    payload: Mapping[str, object]
    """As the Prefect API gave it: not validated here (each waiting flow reads what it needs)."""
    occurred: datetime


class EventWaiter:
    """Wakes a long-running loop as soon as one of some Prefect events arrives.

    A daemon thread holds a subscription to the API's event stream (Prefect's
    ``get_events_subscriber``, filtered by name) and keeps what arrives; :meth:`wait` returns it,
    or an empty list once its timeout passes, so the loop's own clock stays the backstop. A lost
    connection is retried every few seconds; meanwhile the loop runs on its clock alone.
    """

    RETRY_SECONDS = 5.0

    def __init__(self, names: Sequence[str]) -> None:
        self._names = list(names)
        self._lock = threading.Condition()
        self._pending: list[ReceivedEvent] = []
        self._stopping = threading.Event()
        self._connected = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> bool:
        """Subscribe in the background; False (and the loop runs on its clock) without a Prefect API."""
        if _api_url() is None:
            log.info("event_waiter_off names=%s: no Prefect API configured", ",".join(self._names))
            return False
        self._thread = threading.Thread(target=self._run, name="event-waiter", daemon=True)
        self._thread.start()
        return True

    def wait_connected(self, timeout_seconds: float) -> bool:
        """Whether the subscription is up (within ``timeout_seconds``)."""
        return self._connected.wait(timeout_seconds)

    def wait(self, timeout_seconds: float) -> list[ReceivedEvent]:
        """The events received since the last call, waiting up to ``timeout_seconds`` for one."""
        deadline = time.monotonic() + max(0.0, timeout_seconds)
        with self._lock:
            while not self._pending and not self._stopping.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._lock.wait(left)
            taken, self._pending = self._pending, []
        return taken

    def take(self) -> list[ReceivedEvent]:
        """The events received since the last call, without waiting."""
        return self.wait(0.0)

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            self._lock.notify_all()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            for task in asyncio.all_tasks(loop):
                loop.call_soon_threadsafe(task.cancel)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                asyncio.run(self._listen())
            except asyncio.CancelledError:
                return
            except Exception as e:  # noqa: BLE001 - the loop's clock covers the gap; try again
                log.warning("event_waiter_disconnected names=%s error=%r", ",".join(self._names), e)
            self._connected.clear()
            self._stopping.wait(self.RETRY_SECONDS)

    async def _listen(self) -> None:
        from prefect.events.clients import get_events_subscriber
        from prefect.events.filters import EventFilter, EventNameFilter

        self._loop = asyncio.get_running_loop()
        event_filter = EventFilter(event=EventNameFilter(name=self._names))  # type: ignore[call-arg]
        async with get_events_subscriber(filter=event_filter, reconnect_on_clean_close=True) as subscriber:
            self._connected.set()
            async for event in subscriber:
                received = ReceivedEvent(event.event, event.resource.id, dict(event.payload), event.occurred)
                with self._lock:
                    self._pending.append(received)
                    self._lock.notify_all()
                if self._stopping.is_set():
                    return
