"""Ingest, step 4's budget: each fetched page's extraction, features and embedding run in an article
worker process, under a deadline and a memory cap, so one page's work fails that page alone (issue 32).

Why processes: a deadline holds only if the work can be stopped, and a thread cannot be; a memory
cap holds only per process (``RLIMIT_AS``). The caps on every text (``transforms.extraction``,
``transforms.features``, ``transforms.embedding``) bound what a page's work costs; the budget is
what still holds when a parser or a model costs more than the caps foresee.

How:

* A pool of ``workers`` processes is started with ``python -c`` (nothing of the parent's
  ``__main__`` is imported, so a worker holds the extraction libraries and the models, not
  Prefect). Each one imports the work it runs (named ``module:function``, here
  ``tasks.ingest.pages.article_or_error``) and runs it on a small page, loading the models, before it
  says it is ready: that cost is never an article's.
* A polling thread takes an idle worker, sends it the request (the page's bytes and what the row
  needs) and waits at most ``seconds`` for the answer. Past that the worker is killed and started
  again, and the article is a ``time_budget`` page error.
* Before each article the worker sets its soft ``RLIMIT_AS`` to the address space it holds plus
  ``memory_bytes``; an allocation past that fails (``MemoryError``), the worker answers
  ``memory_budget`` and exits, and is started again.
* A worker that dies without answering (a signal, the kernel's OOM killer) makes its article a
  ``worker_lost`` page error; a worker that cannot start makes it ``worker_start``, which is retried
  on the next poll (the failure is ours, not the page's).

One pool per process and budget, shared by the shards' threads, started on first use and stopped at
exit (:func:`close_article_workers`).
"""

from __future__ import annotations

import atexit
import importlib
import json
import logging
import os
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any

from tasks.errors import ArticleBudgetError
from tasks.ingest.feed_job import FeedJob
from transforms.feeds import FeedItem
from transforms.records import FeedState

if TYPE_CHECKING:
    from tasks.settings import IngestSettings

log = logging.getLogger(__name__)

READY_TIMEOUT_SECONDS = 120.0
"""How long a starting worker may take to load the models and extract its first page (about 3 s on an
idle 2-core machine); a worker not ready by then is a ``worker_start`` failure."""
STOP_GRACE_SECONDS = 2.0
"""How long a worker asked to stop may take to exit before it is killed."""

_WORKER_CODE = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
                "from tasks.ingest.budget import serve_articles; serve_articles(*sys.argv[2:])")
"""What a worker process runs: the parent's import path (as multiprocessing's spawn does), then the loop."""
_WARM_UP_TIME = datetime(2026, 1, 1, tzinfo=UTC)
_WARM_UP_PAGE = (
    b'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Parliament passes the budget | News</title>'
    b'<meta property="og:title" content="Parliament passes the budget"><meta name="description" content="The vote '
    b'came after a night of debate.">'
    b'<link rel="canonical" href="http://warm-up.invalid/a"><meta property="article:published_time" '
    b'content="2026-01-01T06:00:00Z"><script type="application/ld+json">{"@type": "NewsArticle", "headline": '
    b'"Parliament passes the budget", "author": {"name": "Jane Doe"}}</script></head><body><header><nav><ul>'
    b'<li><a href="/world/">World</a></li><li><a href="/business/">Business</a></li></ul></nav></header><main>'
    b'<article><h1>Parliament passes the budget</h1><p class="byline">By Jane Doe</p>'
    + b"<p>The vote came after a night of debate in the chamber, where the opposition had tabled more than forty "
    b"amendments to the spending plans for schools and hospitals, and the finance minister said the plan would be "
    b"carried out in full before the end of the year.</p>" * 6
    + b'</article><aside><h2>Related</h2><ul><li><a href="/b">Another story</a></li></ul></aside></main>'
    b"<footer><p>All rights reserved.</p></footer></body></html>"
)
"""The page each worker builds before it is ready: the parts of a real page (metadata, JSON-LD, chrome), so
the libraries' first-use costs fall here rather than on the first article's budget."""


@dataclass(frozen=True, slots=True)
class ArticleRequest:
    """One fetched page and what its row needs: what a polling thread sends an article worker."""

    job: FeedJob
    item: FeedItem
    html: bytes
    fetched_url: str
    now: datetime
    embed: bool
    http_charset: str | None


@dataclass(frozen=True, slots=True)
class ArticleBudget:
    """A pool's work, its size and each article's budget."""

    work: str
    """``module:function`` taking an :class:`ArticleRequest`; its result is sent back as it is."""
    workers: int
    seconds: float
    memory_bytes: int
    embed: bool
    """Whether the warm-up request asks for an embedding (so the model is loaded before the first article)."""

    @classmethod
    def from_settings(cls, work: str, settings: IngestSettings) -> ArticleBudget:
        return cls(work, settings.article_workers, settings.article_seconds, settings.article_memory_mb * 2**20,
                   settings.embeddings)


class _Worker:
    """One slot of the pool: a worker process, started again whenever it is found stopped."""

    def __init__(self, budget: ArticleBudget) -> None:
        self._budget = budget
        self._process: subprocess.Popen[bytes] | None = None
        self._requests: Connection | None = None
        self._replies: Connection | None = None
        self._ready = False

    def start(self) -> None:
        """Start the process (without waiting for it to be ready)."""
        to_child, requests = os.pipe()
        replies, from_child = os.pipe()
        try:
            args = [sys.executable, "-c", _WORKER_CODE, json.dumps(sys.path), self._budget.work, str(to_child),
                    str(from_child), str(self._budget.memory_bytes), "1" if self._budget.embed else "0"]
            self._process = subprocess.Popen(args, pass_fds=(to_child, from_child), stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL)
        except BaseException:
            for fd in (requests, replies):
                os.close(fd)
            raise
        finally:
            os.close(to_child)
            os.close(from_child)
        self._requests = Connection(requests, readable=False)
        self._replies = Connection(replies, writable=False)
        self._ready = False

    def ensure_ready(self, timeout: float) -> None:
        """Start the process if there is none and wait until it has loaded the models.

        Raises:
            OSError: The process could not be started, or it exited before it was ready.
            TimeoutError: It was not ready within ``timeout`` seconds.
        """
        if self._process is not None and self._process.poll() is not None:
            self.stop(kill=True)  # died while idle (the OOM killer, a signal): not the next article's doing
        if self._process is None:
            self.start()
        if self._ready:
            return
        assert self._replies is not None
        if not self._replies.poll(timeout):
            raise TimeoutError(f"not ready in {timeout:g} s")
        try:
            message = self._replies.recv()
        except EOFError as e:
            raise OSError(f"exited before it was ready (status {self._exit_status()})") from e
        if message[0] != "ready":
            raise OSError(f"said {message[0]!r} instead of ready")
        self._ready = True

    def run(self, request: ArticleRequest, seconds: float) -> tuple[str, Any]:
        """Send one request and wait at most ``seconds`` for the answer.

        Raises:
            TimeoutError: No answer in time (the worker is still running it).
            EOFError, OSError: The worker died.
        """
        assert self._requests is not None and self._replies is not None
        self._requests.send(request)
        if not self._replies.poll(seconds):
            raise TimeoutError
        reply: tuple[str, Any] = self._replies.recv()
        return reply

    def stop(self, *, kill: bool) -> int | None:
        """Stop the process (asked to, or killed) and forget it; returns its exit status."""
        process, self._process = self._process, None
        if process is None:
            return None
        if not kill and self._requests is not None:
            try:
                self._requests.send(None)
                process.wait(STOP_GRACE_SECONDS)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if process.poll() is None:
            process.kill()
        status = process.wait()
        for connection in (self._requests, self._replies):
            if connection is not None:
                connection.close()
        self._requests = self._replies = None
        self._ready = False
        return status

    def _exit_status(self) -> int | None:
        return None if self._process is None else self._process.poll()


class ArticleWorkers:
    """A pool of article workers; :meth:`build` is safe to call from many threads at once."""

    def __init__(self, budget: ArticleBudget) -> None:
        if budget.workers < 1:
            raise ValueError(f"an article pool needs at least one worker, got {budget.workers}")
        self.budget = budget
        self._slots = [_Worker(budget) for _ in range(budget.workers)]
        self._idle: SimpleQueue[_Worker] = SimpleQueue()
        for slot in self._slots:
            try:
                slot.start()  # the models load while the feeds are polled
            except OSError:
                log.exception("article_worker_start_failed")  # tried again when the slot is used
            self._idle.put(slot)

    def build(self, request: ArticleRequest) -> object:
        """What the pool's work gives for ``request``, computed in a worker under the budget.

        Raises:
            ArticleBudgetError: Past the time or memory budget, the worker died, or none could start.
        """
        url = request.item.link or request.fetched_url
        slot = self._idle.get()
        try:
            try:
                slot.ensure_ready(READY_TIMEOUT_SECONDS)
            except (OSError, TimeoutError) as e:
                slot.stop(kill=True)
                raise ArticleBudgetError("worker_start", f"no article worker could start: {e}", url=url) from e
            try:
                kind, outcome = slot.run(request, self.budget.seconds)
            except TimeoutError:
                slot.stop(kill=True)
                raise ArticleBudgetError(
                    "time_budget", f"extraction, features and embedding not done in {self.budget.seconds:g} s; "
                    "the worker was stopped", url=url) from None
            except (EOFError, OSError) as e:
                status = slot.stop(kill=True)
                raise ArticleBudgetError("worker_lost", f"the article worker died (exit status {status})",
                                         url=url) from e
            if kind == "memory_budget":
                slot.stop(kill=False)
                raise ArticleBudgetError(
                    "memory_budget", f"extraction, features and embedding needed more than "
                    f"{self.budget.memory_bytes // 2**20:,} MB", url=url)
            result: object = outcome
            return result
        finally:
            self._idle.put(slot)

    def warm_up(self) -> None:
        """Wait until every idle worker has loaded the models (a long-lived process does this before its
        first run). A worker that cannot start is left to be started again when it is used."""
        slots = [self._idle.get() for _ in self._slots]  # every slot is idle when nothing is in flight
        try:
            for slot in slots:
                try:
                    slot.ensure_ready(READY_TIMEOUT_SECONDS)
                except (OSError, TimeoutError):
                    log.exception("article_worker_start_failed")
                    slot.stop(kill=True)
        finally:
            for slot in slots:
                self._idle.put(slot)

    def close(self) -> None:
        """Stop every worker (a later :meth:`build` starts them again)."""
        for slot in self._slots:
            slot.stop(kill=False)


_pools: dict[ArticleBudget, ArticleWorkers] = {}
_pools_lock = threading.Lock()


def article_workers(work: str, settings: IngestSettings) -> ArticleWorkers | None:
    """This process's pool running ``work`` (``module:function``) under the settings' budget, started on
    first use; None when ``article_workers`` is 0 (articles are then built in the polling threads,
    without a budget)."""
    if settings.article_workers == 0:
        return None
    budget = ArticleBudget.from_settings(work, settings)
    with _pools_lock:
        pool = _pools.get(budget)
        if pool is None:
            pool = _pools[budget] = ArticleWorkers(budget)
        return pool


@atexit.register
def close_article_workers() -> None:
    """Stop every pool's workers (at exit; tests and benchmarks call it to start afresh)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


# --- the worker's side ------------------------------------------------------------------------------


def serve_articles(work: str, read_fd: str, write_fd: str, memory_bytes: str, embed: str) -> None:
    """An article worker: warm up, say ready, then answer requests until told to stop (None) or the
    parent goes away. Each answer is ``("done", what work returned)``, or ``("memory_budget", None)``
    after which the worker exits (its heap may be in any state)."""
    # Ctrl-C reaches the whole process group: the parent stops its workers itself (at exit, or when the
    # pipe closes), and an interrupted worker would fail the article it holds as worker_lost.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    module, _, function = work.partition(":")
    article_or_error: Callable[[ArticleRequest], object] = getattr(importlib.import_module(module), function)
    requests = Connection(int(read_fd), writable=False)
    replies = Connection(int(write_fd), readable=False)
    job = FeedJob("warm-up", "http://warm-up.invalid/feed", "warm-up", "en", "US", "", FeedState("warm-up"))
    item = FeedItem("warm-up", "http://warm-up.invalid/a", "Parliament passes the budget", "", None, None, (),
                    None, None, None)
    article_or_error(ArticleRequest(job, item, _WARM_UP_PAGE, item.link or "", _WARM_UP_TIME, embed == "1", None))
    replies.send(("ready", os.getpid()))
    extra = int(memory_bytes)
    while True:
        try:
            request = requests.recv()
        except EOFError:
            return
        if request is None:
            return
        _limit_address_space(extra)
        try:
            outcome = article_or_error(request)
        except MemoryError:
            del request
            _lift_address_space_limit()
            replies.send(("memory_budget", None))
            return
        _lift_address_space_limit()
        replies.send(("done", outcome))


def _address_space_bytes() -> int | None:
    """This process's address space (VmSize), or None where /proc cannot tell."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _limit_address_space(extra: int) -> None:
    held = _address_space_bytes()
    if held is None:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = held + extra if hard == resource.RLIM_INFINITY else min(held + extra, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _lift_address_space_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
