"""Per-host politeness: one queue per host, a concurrency cap and an AIMD token bucket.

Work for a host waits in that host's queue until the host has a free slot (at most
``max_concurrency`` requests in flight) and a token. A dispatcher hands ready work to a shared
thread pool, so no worker ever sleeps on a busy host and the limits hold however many workers
run. Each response adjusts its host's rate: a 429, a 5xx, no response at all or a slow response
halves it (multiplicative decrease); any other response adds a little back (additive increase),
up to the configured rate.

Within one ingest run the shards are already by host (``plan_due_feeds``), so one limiter per
shard sees every request to its hosts: feeds, robots.txt and article pages.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class HostLimits:
    """Politeness limits applied to every host."""

    max_concurrency: int = 2
    rate_per_second: float = 2.0  # the ceiling the additive increase climbs back to
    burst: float = 4.0
    min_rate_per_second: float = 0.05
    increase_per_success: float = 0.1
    slow_seconds: float = 5.0
    trip_after: int = 4  # overloads in a row after which the host's remaining work is skipped this run

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        if not 0 < self.min_rate_per_second <= self.rate_per_second:
            raise ValueError("need 0 < min_rate_per_second <= rate_per_second")
        if self.burst < 1:
            raise ValueError("burst must be >= 1")
        if self.trip_after < 1:
            raise ValueError("trip_after must be >= 1")


@dataclass(slots=True)
class HostStats:
    """What one host saw during a run (for logs, tests and benchmarks)."""

    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    decreases: int = 0
    rate_per_second: float = 0.0
    overload_streak: int = 0
    skipped: int = 0


@dataclass(slots=True)
class _Bucket:
    rate: float
    tokens: float
    updated: float
    stats: HostStats = field(default_factory=HostStats)


def host_of_url(url: str) -> str:
    """The politeness key of a URL: its lower-cased ``host[:port]``.

    >>> host_of_url("http://News.Example:8080/feed"), host_of_url("https://a.example/x")
    ('news.example:8080', 'a.example')
    """
    return urlsplit(url).netloc.lower()


class HostLimiter:
    """Concurrency slots and an AIMD token bucket per host; thread-safe."""

    def __init__(self, limits: HostLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        self._hosts: dict[str, _Bucket] = {}

    def _bucket(self, host: str, now: float) -> _Bucket:
        bucket = self._hosts.get(host)
        if bucket is None:
            bucket = _Bucket(self.limits.rate_per_second, self.limits.burst, now)
            bucket.stats.rate_per_second = bucket.rate
            self._hosts[host] = bucket
        else:
            bucket.tokens = min(self.limits.burst, bucket.tokens + (now - bucket.updated) * bucket.rate)
            bucket.updated = now
        return bucket

    def try_acquire(self, host: str) -> float:
        """Take a slot and a token for ``host``: 0.0 when taken, else seconds until worth retrying.

        ``math.inf`` means every slot is busy: retry when a request of this host finishes.
        """
        with self._lock:
            now = self._clock()
            bucket = self._bucket(host, now)
            if bucket.stats.in_flight >= self.limits.max_concurrency:
                return math.inf
            if bucket.stats.overload_streak >= self.limits.trip_after:
                bucket.stats.in_flight += 1  # a tripped host: hand the item out at once, to be skipped
                return 0.0
            if bucket.tokens < 1.0:
                return (1.0 - bucket.tokens) / bucket.rate
            bucket.tokens -= 1.0
            bucket.stats.in_flight += 1
            bucket.stats.requests += 1
            bucket.stats.max_in_flight = max(bucket.stats.max_in_flight, bucket.stats.in_flight)
            return 0.0

    def acquire(self, host: str) -> None:
        """Block until ``host`` has a slot and a token (for callers outside a dispatcher)."""
        while True:
            wait = self.try_acquire(host)
            if wait == 0.0:
                return
            time.sleep(min(wait, 0.05))

    def is_tripped(self, host: str) -> bool:
        """Whether ``host`` answered with overload signs ``trip_after`` times in a row: its remaining
        work this run should be skipped (and retried next run) rather than crawl at the minimum rate."""
        with self._lock:
            bucket = self._hosts.get(host)
            return bucket is not None and bucket.stats.overload_streak >= self.limits.trip_after

    def release(self, host: str, status: int | None, elapsed_seconds: float, *, skipped: bool = False) -> None:
        """Free the slot and adapt the rate: ``status`` None means no response (timeout, reset).

        ``skipped`` work sent no request and leaves the rate alone.
        """
        with self._lock:
            bucket = self._bucket(host, self._clock())
            bucket.stats.in_flight -= 1
            if skipped:
                bucket.stats.skipped += 1
                return
            overloaded = status is None or status == 429 or status >= 500 or elapsed_seconds > self.limits.slow_seconds
            if overloaded:
                bucket.rate = max(self.limits.min_rate_per_second, bucket.rate / 2)
                bucket.tokens = min(bucket.tokens, 0.0)  # no burst right after a sign of overload
                bucket.stats.decreases += 1
                bucket.stats.overload_streak += 1
            else:
                bucket.stats.overload_streak = 0
                bucket.rate = min(self.limits.rate_per_second, bucket.rate + self.limits.increase_per_success)
            bucket.stats.rate_per_second = bucket.rate

    def stats(self) -> dict[str, HostStats]:
        with self._lock:
            return {h: HostStats(b.stats.requests, b.stats.in_flight, b.stats.max_in_flight, b.stats.decreases,
                                 b.rate, b.stats.overload_streak, b.stats.skipped) for h, b in self._hosts.items()}


class _Outcome(Generic[R]):
    __slots__ = ("error", "value")

    def __init__(self) -> None:
        self.value: R | None = None
        self.error: BaseException | None = None


def run_per_host(
    items: Sequence[T],
    *,
    host_of: Callable[[T], Hashable],
    work: Callable[[T], R],
    status_of: Callable[[R], int | None],
    limiter: HostLimiter,
    pool: ThreadPoolExecutor,
    max_in_flight: int,
    skip: Callable[[T], R] | None = None,
    elapsed_of: Callable[[R], float | None] | None = None,
) -> list[R]:
    """Run ``work`` over ``items`` under the host limits; results come back in input order.

    ``elapsed_of`` reads from a result how long the host took to answer, when ``work`` does more than
    the request (a page's row is built after it is fetched, issue 32): only the host's own time may
    count as a slow response. Without it, or when it gives None, the work's wall time counts.

    ``max_in_flight`` workers each take the next item of a host that has a free slot and a token
    (hosts in round robin), so one busy or throttled host never holds a worker idle while another
    host has work. ``status_of`` reads the HTTP status from a result (None: no response) to feed the
    AIMD rate. Once a host is tripped (``HostLimits.trip_after`` overloads in a row), its remaining
    items get ``skip(item)`` instead, without a request, if ``skip`` is given. An exception from ``work`` is a bug (expected failures are results): it is re-raised
    once every item has finished.
    """
    run = _PerHostRun(items, host_of=host_of, work=work, status_of=status_of, limiter=limiter, skip=skip,
                      elapsed_of=elapsed_of)
    workers: list[Future[None]] = [pool.submit(run.work_until_done) for _ in range(max(1, min(max_in_flight, len(items))))]
    for future in workers:
        future.result()
    for outcome in run.outcomes:
        if outcome.error is not None:
            raise outcome.error
    return [outcome.value for outcome in run.outcomes]  # type: ignore[misc]


class _PerHostRun(Generic[T, R]):
    """One :func:`run_per_host` call: each host's queue of item indexes, the outcomes, and the
    condition its workers wait on for a host's slot or token."""

    def __init__(self, items: Sequence[T], *, host_of: Callable[[T], Hashable], work: Callable[[T], R],
                 status_of: Callable[[R], int | None], limiter: HostLimiter, skip: Callable[[T], R] | None,
                 elapsed_of: Callable[[R], float | None] | None) -> None:
        self.items, self.work, self.status_of, self.limiter = items, work, status_of, limiter
        self.skip, self.elapsed_of = skip, elapsed_of
        self.queues: dict[str, deque[int]] = {}
        for index, item in enumerate(items):
            self.queues.setdefault(str(host_of(item)), deque()).append(index)
        self.hosts = deque(self.queues)  # hosts with items not yet started, in round-robin order
        self.outcomes: list[_Outcome[R]] = [_Outcome() for _ in items]
        self.changed = threading.Condition()

    def take(self) -> tuple[str, int] | float | None:
        """The next (host, index) allowed to start, else seconds worth waiting; None when all started."""
        if not self.hosts:
            return None
        soonest = math.inf
        for _ in range(len(self.hosts)):
            host = self.hosts[0]
            self.hosts.rotate(-1)  # the host is now last
            wait = self.limiter.try_acquire(host)
            if wait == 0.0:
                queue = self.queues[host]
                index = queue.popleft()
                if not queue:
                    self.hosts.pop()
                    del self.queues[host]
                return host, index
            soonest = min(soonest, wait)
        return soonest

    def wait_for_next(self) -> tuple[str, int] | None:
        """The next (host, index) to run, once its host has a slot and a token; None when all started."""
        with self.changed:
            while True:
                taken = self.take()
                if taken is None or isinstance(taken, tuple):
                    return taken
                self.changed.wait(timeout=min(taken, 0.5))

    def work_until_done(self) -> None:
        """One worker: run items until every item has started."""
        while (taken := self.wait_for_next()) is not None:
            self.run_one(*taken)

    def run_one(self, host: str, index: int) -> None:
        """Run (or, for a tripped host, skip) one item, then hand its host's slot back with the status
        and the time the host took, and wake the waiting workers."""
        started = time.monotonic()
        status: int | None = None
        answered: float | None = None
        skipped = self.skip is not None and self.limiter.is_tripped(host)
        outcome = self.outcomes[index]
        try:
            if skipped:
                outcome.value = self.skip(self.items[index])  # type: ignore[misc]
            else:
                outcome.value = self.work(self.items[index])
                status = self.status_of(outcome.value)
                if self.elapsed_of is not None:
                    answered = self.elapsed_of(outcome.value)
        except BaseException as e:  # noqa: B036 - re-raised once every item has finished
            outcome.error = e
        finally:
            elapsed = time.monotonic() - started if answered is None else answered
            self.limiter.release(host, status, elapsed, skipped=skipped)
            with self.changed:
                self.changed.notify()
