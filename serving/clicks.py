"""The clicks log: each replica buffers clicks in memory and writes one segment per interval.

Choice (issue 19, replacing issue 6's one object per click): ``/r/{token}`` adds the click to
this replica's buffer and answers 302 at once; the store is never on the redirect's path. A
flusher thread writes the buffer every ``NEWSROOM_SERVING_CLICK_FLUSH_SECONDS`` (5 s) as one
Parquet segment per UTC day, ``log/clicks/date=YYYY-MM-DD/batch-<content hash>.parquet``
(CLICKS_SCHEMA), and the app's shutdown (SIGTERM) writes what is left before the process exits.
At tens of thousands of clicks a second that is one object per replica per interval instead of
one per click (bench/click_objects.py).

What can be lost: a replica killed without its shutdown (SIGKILL, a power cut) loses the clicks
it had not written, at most one interval's while the store is healthy. While the store fails the
buffer keeps the clicks and every interval tries again, up to ``NEWSROOM_SERVING_CLICK_BUFFER_MAX``
clicks; past that a click is refused. A click refused, or left unwritten at shutdown because the
store is down, is written to the application log (``click_not_logged``, with the click's fields
but never the reader's pseudonym) so it can be counted.

``X-Click-Logged`` on the 302 says what this replica did with the click: ``buffered`` (accepted,
or already accepted: a reload), to be written within one interval; ``false`` (refused, only in
the application log). It never promised more than the replica knows at the time of the redirect.

A reload is one click: ``click_id`` derives from the token's MAC (see ``ClickPayload``); a
replica remembers the ids it accepted recently and takes a reload as the same click, and a reload
served by another replica (or after the replica forgot) is a second row with the same
``click_id``, which the profiles fold, the ``clicks`` view and compaction each count once. Two
readers' links, minted with different nonces, are two clicks.

Personal reads are not written here: whoever holds a link would write into its reader's
profile. ``POST /v1/click-token`` records the read, on the reader's own session.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Protocol

from serving.errors import ClickLogError, ProfileStoreError
from serving.profiles import ProfileStore
from serving.signing import ClickPayload
from warehouse import layout
from warehouse.errors import WarehouseError
from warehouse.schemas import CLICKS_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import content_segment_id, rows_to_table, write_segment

logger = logging.getLogger(__name__)


def record_read_quietly(profiles: ProfileStore, reader_hash: str, story_id: str, at: float) -> None:
    """Add the story to a signed-in reader's reads; a profile store failure must not block the click."""
    if not reader_hash:
        return
    try:
        profiles.record_read(reader_hash, story_id, at)
    except ProfileStoreError as e:
        logger.warning("read_not_recorded error=%s", e)


class ClickLog(Protocol):
    def append(self, click: ClickPayload, clicked_at: datetime) -> bool:
        """Accept one click. Returns False when this click was accepted before (a reload).

        Raises:
            ClickLogError: The click was refused (it will not be written).
        """
        ...

    def flush(self) -> int:
        """Write what is buffered now; returns how many clicks were written."""
        ...

    def close(self) -> None:
        """Stop, after writing what is buffered."""
        ...


def _log_lost(click: ClickPayload, clicked_at: datetime, error: object) -> None:
    logger.warning(
        "click_not_logged click_id=%s article_id=%s story_id=%s surface=%s position=%d "
        "is_personal=%s clicked_at=%s error=%s",
        click.click_id, click.article_id, click.story_id, click.surface, click.position,
        bool(click.reader_hash), clicked_at.astimezone(UTC).isoformat(), error,
    )


def log_click(clicks: ClickLog, click: ClickPayload, clicked_at: datetime) -> bool:
    """Hand ``click`` to the clicks log; a refusal is logged as lost instead of failing the redirect.

    Returns:
        Whether the click log holds the click (newly, or from an earlier reload).
    """
    try:
        clicks.append(click, clicked_at)
    except ClickLogError as e:
        _log_lost(click, clicked_at, e)
        return False
    return True


REMEMBERED_CLICK_IDS = 100_000
"""How many accepted click ids a replica remembers to take a reload as the same click (~10 MB)."""
EARLY_FLUSH_CLICKS = 50_000
"""A buffer this long is written without waiting for the interval, which bounds a segment's size."""


def _row(click: ClickPayload, clicked_at: datetime) -> dict[str, object]:
    return {
        "click_id": click.click_id,
        "article_id": click.article_id,
        "story_id": click.story_id,
        "reader_hash": click.reader_hash,
        "surface": click.surface,
        "position": click.position,
        "clicked_at": clicked_at.astimezone(UTC),
    }


class BufferedClickLog:
    """Clicks buffered in memory, written as one segment per UTC day per interval (and on close)."""

    def __init__(self, store: ObjectStore, *, flush_seconds: float = 5.0, max_buffered: int = 200_000) -> None:
        if flush_seconds <= 0:
            raise ValueError(f"flush_seconds must be positive, got {flush_seconds}")
        self._store = store
        self.flush_seconds = flush_seconds
        self.max_buffered = max_buffered
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._buffer: dict[str, tuple[ClickPayload, datetime]] = {}
        self._seen: dict[str, None] = {}
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self.segments_written = 0

    @property
    def buffered(self) -> int:
        with self._lock:
            return len(self._buffer)

    def start(self) -> None:
        """Start the flusher thread (the app's lifespan does, and ``close`` stops it)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="click-flusher", daemon=True)
            self._thread.start()

    def append(self, click: ClickPayload, clicked_at: datetime) -> bool:
        with self._lock:
            if click.click_id in self._seen:
                return False
            if len(self._buffer) >= self.max_buffered:
                raise ClickLogError(f"click buffer full ({self.max_buffered} clicks unwritten)")
            self._buffer[click.click_id] = (click, clicked_at)
            self._seen[click.click_id] = None
            if len(self._seen) > REMEMBERED_CLICK_IDS:
                del self._seen[next(iter(self._seen))]
            if len(self._buffer) >= EARLY_FLUSH_CLICKS:
                self._wake.set()
        return True

    def flush(self) -> int:
        """Write the buffer, one segment per UTC day; on a store failure keep it for the next try.

        Returns:
            Clicks written (0 when there were none, or the store failed).
        """
        with self._flush_lock:  # one flush at a time: the interval's and a shutdown's never interleave
            with self._lock:
                taken, self._buffer = self._buffer, {}
            if not taken:
                return 0
            by_day: dict[str, list[dict[str, object]]] = {}
            for click, at in taken.values():
                by_day.setdefault(f"{at.astimezone(UTC):%Y-%m-%d}", []).append(_row(click, at))
            written: set[str] = set()
            try:
                for rows in by_day.values():
                    rows.sort(key=lambda r: (r["clicked_at"], r["click_id"]))  # type: ignore[return-value]
                    table = rows_to_table(rows, CLICKS_SCHEMA)
                    key = layout.click_batch_key(rows[0]["clicked_at"], content_segment_id(table))  # type: ignore[arg-type]
                    write_segment(self._store, key, table, CLICKS_SCHEMA)  # a retried batch finds its own key
                    self.segments_written += 1
                    written.update(str(r["click_id"]) for r in rows)
            except BaseException as e:
                kept = {cid: v for cid, v in taken.items() if cid not in written}
                with self._lock:  # back in front of what arrived meanwhile, for the next try
                    self._buffer = {**kept, **self._buffer}
                if not isinstance(e, (OSError, WarehouseError)):
                    raise
                logger.warning("clicks_not_flushed clicks=%d error=%s: %s", len(kept), type(e).__name__, e)
                return len(written)
        logger.debug("clicks_flushed clicks=%d segments=%d", len(written), len(by_day))
        return len(written)

    def _run(self) -> None:
        while not self._closing.is_set():
            self._wake.wait(self.flush_seconds)
            self._wake.clear()
            if self._closing.is_set():
                break
            try:
                self.flush()
            except Exception:  # a bug must not stop the flusher: the clicks stay buffered for close()
                logger.exception("click_flush_failed")

    def close(self) -> None:
        """Stop the flusher and write what is left; clicks the store still refuses are logged as lost."""
        self._closing.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None
        self.flush()
        with self._lock:
            lost, self._buffer = self._buffer, {}
        for click, at in lost.values():
            _log_lost(click, at, "store unavailable at shutdown")
        if lost:
            logger.error("clicks_lost_at_shutdown clicks=%d", len(lost))
