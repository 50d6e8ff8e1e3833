"""Per-host limits: the token bucket and AIMD on a fake clock, and the dispatcher on real servers."""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from tasks.politeness import HostLimiter, HostLimits, host_of_url, run_per_host


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_and_concurrency_slots() -> None:
    clock = FakeClock()
    limiter = HostLimiter(HostLimits(max_concurrency=2, rate_per_second=1.0, burst=2.0), clock)
    assert limiter.try_acquire("a") == 0.0
    assert limiter.try_acquire("a") == 0.0
    assert limiter.try_acquire("a") == math.inf  # both slots busy
    assert limiter.try_acquire("b") == 0.0  # another host is independent
    limiter.release("a", 200, 0.1)
    assert limiter.try_acquire("a") == pytest.approx(1.0)  # a slot, but the bucket is empty
    clock.now = 1.0
    assert limiter.try_acquire("a") == 0.0
    assert limiter.stats()["a"].max_in_flight == 2 and limiter.stats()["a"].requests == 3


@pytest.mark.parametrize(
    ("status", "elapsed", "decreased"),
    [(429, 0.1, True), (503, 0.1, True), (500, 0.1, True), (None, 0.1, True), (200, 9.0, True), (200, 0.1, False),
     (304, 0.1, False), (404, 0.1, False)],
    ids=["429", "503", "500", "no-response", "slow", "ok", "not-modified", "not-found"],
)
def test_aimd(status: int | None, elapsed: float, decreased: bool) -> None:
    limiter = HostLimiter(HostLimits(rate_per_second=2.0, increase_per_success=0.5, slow_seconds=5.0), FakeClock())
    limiter.try_acquire("a")
    limiter.release("a", 429, 0.1)  # start from 1.0/s so an increase is visible
    limiter.try_acquire("a")
    limiter.release("a", status, elapsed)
    assert limiter.stats()["a"].rate_per_second == (0.5 if decreased else 1.5)


def test_rate_never_drops_below_the_minimum() -> None:
    limiter = HostLimiter(HostLimits(rate_per_second=1.0, min_rate_per_second=0.25), FakeClock())
    for _ in range(10):
        limiter.try_acquire("a")
        limiter.release("a", 503, 0.1)
    assert limiter.stats()["a"].rate_per_second == 0.25


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError):
        HostLimits(max_concurrency=0)
    with pytest.raises(ValueError):
        HostLimits(rate_per_second=0.1, min_rate_per_second=1.0)


class _Counting(BaseHTTPRequestHandler):
    lock = threading.Lock()
    in_flight: Counter[int] = Counter()
    peak: Counter[int] = Counter()
    peak_all = 0
    """Requests in flight across every host at once, at the most."""
    user_agents: set[str] = set()
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        port = self.server.server_address[1]
        with self.lock:
            self.in_flight[port] += 1
            self.peak[port] = max(self.peak[port], self.in_flight[port])
            _Counting.peak_all = max(_Counting.peak_all, sum(self.in_flight.values()))
            self.user_agents.add(self.headers.get("User-Agent", ""))
        time.sleep(0.05)
        with self.lock:
            self.in_flight[port] -= 1
        status = 429 if self.path.startswith("/429") else 200
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


@pytest.fixture
def servers() -> Iterator[list[str]]:
    started = [ThreadingHTTPServer(("127.0.0.1", 0), _Counting) for _ in range(3)]
    for s in started:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield [f"http://127.0.0.1:{s.server_address[1]}" for s in started]
    for s in started:
        s.shutdown()


@pytest.mark.integration
def test_dispatcher_holds_per_host_limits_with_many_workers(servers: list[str]) -> None:
    urls = [f"{base}/item/{i}" for base in servers for i in range(12)]
    limiter = HostLimiter(HostLimits(max_concurrency=2, rate_per_second=20.0, burst=2.0))
    started = time.monotonic()
    with httpx.Client(trust_env=False, headers={"User-Agent": "newsroom/0.1 (+https://example.org/bot)"}) as client, \
            ThreadPoolExecutor(max_workers=32) as pool:
        statuses = run_per_host(urls, host_of=host_of_url, work=lambda u: client.get(u).status_code,
                                status_of=lambda s: s, limiter=limiter, pool=pool, max_in_flight=32)
    elapsed = time.monotonic() - started
    assert statuses == [200] * len(urls)
    assert max(_Counting.peak.values()) == 2  # 32 workers, never more than 2 per host
    assert len(_Counting.peak) == 3
    # 12 requests a host at 20/s with a burst of 2: at least 0.5 s (a lower bound: load only adds).
    assert elapsed >= 0.5
    assert _Counting.peak_all > 2, "the hosts ran side by side"
    assert _Counting.user_agents == {"newsroom/0.1 (+https://example.org/bot)"}


@pytest.mark.integration
def test_429s_slow_a_host_down_and_only_that_host(servers: list[str]) -> None:
    urls = [f"{servers[0]}/429/{i}" for i in range(4)] + [f"{servers[1]}/ok/{i}" for i in range(4)]
    limiter = HostLimiter(HostLimits(max_concurrency=2, rate_per_second=50.0, burst=4.0))
    with httpx.Client(trust_env=False) as client, ThreadPoolExecutor(max_workers=8) as pool:
        run_per_host(urls, host_of=host_of_url, work=lambda u: client.get(u).status_code, status_of=lambda s: s,
                     limiter=limiter, pool=pool, max_in_flight=8)
    stats = limiter.stats()
    throttled, healthy = stats[host_of_url(servers[0])], stats[host_of_url(servers[1])]
    assert throttled.decreases == 4 and throttled.rate_per_second == pytest.approx(50.0 / 16)
    assert healthy.decreases == 0 and healthy.rate_per_second == 50.0


def test_a_bug_in_the_work_is_raised_after_the_rest_finish() -> None:
    done: list[int] = []

    def work(i: int) -> int:
        if i == 3:
            raise RuntimeError("bug")
        done.append(i)
        return i

    limiter = HostLimiter(HostLimits(rate_per_second=1000.0, burst=100.0))
    with ThreadPoolExecutor(max_workers=4) as pool, pytest.raises(RuntimeError, match="bug"):
        run_per_host(list(range(8)), host_of=lambda i: i % 2, work=work, status_of=lambda _: 200,
                     limiter=limiter, pool=pool, max_in_flight=4)
    assert sorted(done) == [0, 1, 2, 4, 5, 6, 7]
    assert all(s.in_flight == 0 for s in limiter.stats().values())


def test_a_host_that_keeps_failing_is_tripped_and_its_remaining_work_skipped() -> None:
    limiter = HostLimiter(HostLimits(rate_per_second=1000.0, burst=100.0, trip_after=3))
    calls: list[int] = []

    def work(i: int) -> int:
        calls.append(i)
        return 503 if i % 2 == 0 else 200  # host 0 fails every time, host 1 never

    with ThreadPoolExecutor(max_workers=1) as pool:
        results = run_per_host(list(range(20)), host_of=lambda i: i % 2, work=work, status_of=lambda s: s,
                               limiter=limiter, pool=pool, max_in_flight=1, skip=lambda i: -1)
    assert results[0::2] == [503, 503, 503] + [-1] * 7
    assert results[1::2] == [200] * 10
    stats = limiter.stats()
    assert stats["0"].skipped == 7 and stats["0"].requests == 3 and stats["1"].skipped == 0
    assert all(s.in_flight == 0 for s in stats.values())


@pytest.mark.parametrize(("answered", "decreased"), [(0.01, False), (None, True)], ids=["host-was-quick", "wall-time"])
def test_a_host_is_judged_on_its_answer_not_on_the_work_after_it(answered: float | None, decreased: bool) -> None:
    """A page whose row takes long to build (or waits for an article worker) is no slow response of
    its host's (issue 32); without a time of the answer, the work's wall time counts."""
    limiter = HostLimiter(HostLimits(rate_per_second=1000.0, burst=100.0, slow_seconds=0.05))

    def work(i: int) -> tuple[int, float | None]:
        time.sleep(0.1)  # the build after the fetch
        return 200, answered

    with ThreadPoolExecutor(max_workers=1) as pool:
        run_per_host([0], host_of=lambda i: "h", work=work, status_of=lambda r: r[0], elapsed_of=lambda r: r[1],
                     limiter=limiter, pool=pool, max_in_flight=1)
    assert (limiter.stats()["h"].decreases == 1) is decreased
