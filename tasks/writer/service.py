"""The long-running writer (issue 15): one process keeps each language's window in memory and
consumes article segments as they land, committing each batch through the same If-Match fence.

Every ``poll_seconds`` it lists the article log; when a segment it has not consumed is there, it
runs each language's writer (:func:`tasks.writer.run.cluster_language`) on the state it kept from its
own last commit, so a batch costs its articles and a delta of what they changed, never a load. A
commit by anyone else (another writer, ``newsroom doctor``) moves the checkpoint's ETag: the next
batch loads the state that writer stored, and a fenced batch is dropped as in the per-minute flow.
Compaction (folding the chain into a new base) runs in a background thread once the chain holds
``compact_every`` deltas; the batch after it adopts the base. Repairs run every
``repair_every_minutes`` on the state in memory.

Lag is measured per segment: from when it landed (the caller's ``landed_at``, or when this writer
first listed it) to the commit of the batch that consumed it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol, TypedDict

from tasks.errors import WriterFencedError
from tasks.writer.kept import KeptStates, keep_states_in_memory
from tasks.writer.run import WriterSummary, cluster_language, languages_of_segments
from tasks.writer.state import COMPACT_EVERY, compact_writer_state
from warehouse import layout
from warehouse.checkpoints import WriterCheckpoint
from warehouse.maintenance import is_compacted
from warehouse.store import ObjectStore
from warehouse.tables import list_segments

log = logging.getLogger(__name__)


class LanguageRepair(Protocol):
    """A language's repair on the state the service keeps (``tasks.repair.repair_language``)."""

    def __call__(self, store: ObjectStore, language: str, now: datetime, *, kept: KeptStates | None = None
                 ) -> object: ...


class ServiceTotals(TypedDict):
    """A long-running writer's totals over its batches (its flow run's result and artifact)."""

    batches: int
    articles: int
    state_bytes: int
    segments: int
    lag_p50_seconds: float | None
    lag_p95_seconds: float | None
    lag_max_seconds: float | None
    compactions: int
    states_reused: int
    fenced: int
    failed: int


@dataclass(slots=True)
class ServiceReport:
    """What a long-running writer did: per batch summaries and per segment lag (seconds)."""

    batches: list[WriterSummary] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    compactions: int = 0
    states_reused: int = 0

    def lag_quantile(self, q: float) -> float | None:
        if not self.lags:
            return None
        ordered = sorted(self.lags)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def totals(self) -> ServiceTotals:
        return {"batches": len(self.batches), "articles": sum(int(b.get("articles", 0)) for b in self.batches),
                "state_bytes": sum(int(b.get("state_bytes", 0)) for b in self.batches),
                "segments": len(self.lags), "lag_p50_seconds": self.lag_quantile(0.5),
                "lag_p95_seconds": self.lag_quantile(0.95), "lag_max_seconds": max(self.lags, default=None),
                "compactions": self.compactions, "states_reused": self.states_reused,
                "fenced": sum(1 for b in self.batches if "fenced" in b),
                "failed": sum(1 for b in self.batches if "error" in b)}


def _consumed(store: ObjectStore, language: str) -> set[str]:
    try:
        checkpoint = WriterCheckpoint.parse(store.get(layout.story_checkpoint_key(language)).data)
    except Exception:  # noqa: BLE001 - a missing or damaged checkpoint: the writer run says why
        return set()
    return set(checkpoint.consumed) if checkpoint else set()


@dataclass(slots=True)
class _Listing:
    """The article segments the service has seen: when each was first listed, and the languages
    of those read (when the service writes every language in the log)."""

    first_listed: dict[str, float] = field(default_factory=dict)
    known: set[str] = field(default_factory=set)
    languages_read: set[str] = field(default_factory=set)

    def look(self, store: ObjectStore, languages: Sequence[str] | None) -> tuple[list[str], list[str]]:
        """The segments listed now (compacted ones aside), and the languages to write."""
        segments = [k for k in list_segments(store, layout.ARTICLES_PREFIX) if not is_compacted(k)]
        listed = time.time()
        for key in segments:
            self.first_listed.setdefault(key, listed)
        if languages:
            return segments, list(languages)
        # The languages of the segments not read before, added to those known.
        fresh = [k for k in segments if k not in self.languages_read]
        if fresh:
            self.known.update(languages_of_segments(store, fresh))
            self.languages_read.update(fresh)
        return segments, sorted(self.known)


@dataclass(slots=True)
class _Compactions:
    """Folds of each language's chain, one at a time per language, in a background thread."""

    report: ServiceReport
    pool: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="writer-compaction"))
    pending: dict[str, Future[str | None]] = field(default_factory=dict)

    def after_batch(self, store: ObjectStore, language: str, summary: WriterSummary, compact_every: int) -> None:
        """Count a fold that finished, and start one when the batch left its chain due."""
        future = self.pending.get(language)
        if future is not None and future.done():
            self.report.compactions += int(future.result() is not None)
            del self.pending[language]
        if summary.get("chain", 0) - 1 >= compact_every and language not in self.pending:
            self.pending[language] = self.pool.submit(compact_writer_state, store, language, compact_every)

    def finish(self) -> None:
        """Wait for the folds under way; a failed fold leaves the chain as it was."""
        for future in self.pending.values():
            try:
                self.report.compactions += int(future.result() is not None)
            except Exception as e:  # noqa: BLE001 - a failed fold leaves the chain as it was
                log.error("writer_service_compaction_failed error=%r", e)
        self.pool.shutdown(wait=True)


def _write_batch(store: ObjectStore, language: str, now: datetime, kept: KeptStates) -> WriterSummary:
    """One language's writer run on the state kept in memory; a fenced or failed run is its summary."""
    try:
        return cluster_language(store, language, now, compact_every=0, kept=kept)
    except WriterFencedError as e:
        return {"language": language, "committed": False, "fenced": str(e)}
    except Exception as e:  # noqa: BLE001 - one language's failure must not stop the others
        log.error("writer_service_batch_failed language=%s error=%r", language, e)
        return {"language": language, "committed": False, "error": f"{type(e).__name__}: {e}"}


def _repair_all(store: ObjectStore, languages: Sequence[str], now: datetime, repair: LanguageRepair,
                kept: KeptStates) -> None:
    """Each language's repair on the state in memory; a fenced one waits for the next interval."""
    for language in languages:
        try:
            repair(store, language, now, kept=kept)
        except WriterFencedError:
            pass


def serve_language_writers(
    store: ObjectStore,
    languages: Sequence[str] | None,
    *,
    clock: Callable[[], datetime],
    until: Callable[[], bool],
    poll_seconds: float = 5.0,
    compact_every: int = COMPACT_EVERY,
    repair_every_minutes: float | None = 10.0,
    repair: LanguageRepair | None = None,
    landed_at: Callable[[str], float | None] | None = None,
    on_batch: Callable[[WriterSummary, ServiceReport], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ServiceReport:
    """Run the language writers as one long-lived process until ``until()`` (see the module doc).

    Args:
        store: The store.
        languages: The languages to write (every language in the log, looked up each poll, if None).
        clock: Stream time of a batch (the current time in production; a replay's in benches).
        until: Whether to stop (checked between polls).
        poll_seconds: Pause between looks at the log when nothing new landed.
        compact_every: Deltas after which the chain is folded in the background.
        repair_every_minutes: Stream minutes between repairs (None: the repair deployment's job).
        repair: Each language's repair (``tasks.repair.repair_language``; None: no repairs here).
        landed_at: When a segment landed (``time.time()`` seconds), if the caller knows.
        on_batch: Called after each batch with its summary and the report so far.
        sleep: How to wait (tests pass a no-op).

    Returns:
        The report.
    """
    report = ServiceReport()
    listing = _Listing()
    last_repair: datetime | None = None
    compactions = _Compactions(report)

    def landed(key: str) -> float:
        at = landed_at(key) if landed_at else None
        return at if at is not None else listing.first_listed[key]

    try:
        with keep_states_in_memory() as kept:
            while not until():
                segments, targets = listing.look(store, languages)
                waiting = {lang: [k for k in segments if k not in _consumed(store, lang)] for lang in targets}
                if not any(waiting.values()):
                    sleep(poll_seconds)
                    continue
                now = clock()
                for language in (lang for lang in targets if waiting[lang]):
                    summary = _write_batch(store, language, now, kept)
                    committed_at = time.time()
                    done = _consumed(store, language)
                    lags = [committed_at - landed(k) for k in waiting[language] if k in done]
                    report.lags.extend(lags)
                    summary = {**summary, "at": now.isoformat(), "segments": len(lags),
                               "lag_max_seconds": max(lags, default=None)}
                    report.batches.append(summary)
                    compactions.after_batch(store, language, summary, compact_every)
                    if on_batch is not None:
                        on_batch(summary, report)
                if last_repair is None:
                    last_repair = now  # the first repair one interval after the writer starts, as the flow's
                if repair is not None and repair_every_minutes and now - last_repair >= timedelta(minutes=repair_every_minutes):
                    _repair_all(store, targets, now, repair, kept)
                    last_repair = now
                report.states_reused = kept.hits
    finally:
        compactions.finish()
    return report
