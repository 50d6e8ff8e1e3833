"""The clicks log: one small Parquet segment per click, written before the reader is redirected.

Choice (issue 6): ``/r/{token}`` writes the click as its own immutable object
(``log/clicks/date=YYYY-MM-DD/<click_id>.parquet``, CLICKS_SCHEMA) and answers 302 after the
store acknowledged the put (LocalStore fsyncs; S3 acknowledges durable writes). No in-memory
buffer can lose a click on a crash, and no local WAL ties a replica to its disk. The cost is one
PUT per click, which is small next to page views; the profiles flow reads the segments and a
compaction job can merge old days later. ``click_id`` derives from the token's MAC (see
``ClickPayload``), so a reload of the same link is the same click (a put with If-None-Match finds
it already there), while two readers' links, minted with different nonces, are two clicks.

When the store is down (``ClickLogError``) the reader is still redirected: a reader who clicked
a headline expects the article, and a 500 or a 503 would withhold it over our bookkeeping. The
click is then lost; ``log_click`` writes it to the application log (``click_not_logged`` with
the click's fields, never the reader's pseudonym) so it can be counted, and the answer carries
``X-Click-Logged: false``.

Personal reads are not written here: whoever holds a link would write into its reader's
profile. ``POST /v1/click-token`` records the read, on the reader's own session.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Protocol

from serving.errors import ClickLogError, ProfileStoreError
from serving.profiles import ProfileStore
from serving.signing import ClickPayload
from warehouse import layout
from warehouse.errors import PreconditionFailedError, WarehouseError
from warehouse.schemas import CLICKS_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import check_schema, rows_to_table, table_to_parquet_bytes

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
        """Record one click durably. Returns False when this click was already logged.

        Raises:
            ClickLogError: The click could not be stored.
        """
        ...


def log_click(clicks: ClickLog, click: ClickPayload, clicked_at: datetime) -> bool:
    """Append ``click``; on a store failure log it as lost instead of failing the redirect.

    Returns:
        Whether the click is in the clicks log (newly or from an earlier reload).
    """
    try:
        clicks.append(click, clicked_at)
    except ClickLogError as e:
        logger.warning(
            "click_not_logged click_id=%s article_id=%s story_id=%s surface=%s position=%d "
            "is_personal=%s clicked_at=%s error=%s",
            click.click_id, click.article_id, click.story_id, click.surface, click.position,
            bool(click.reader_hash), clicked_at.astimezone(UTC).isoformat(), e,
        )
        return False
    return True


class StoreClickLog:
    """Clicks as one segment object per click in the object store."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store

    def append(self, click: ClickPayload, clicked_at: datetime) -> bool:
        at = clicked_at.astimezone(UTC)
        key = layout.click_segment_key(at, click.click_id)
        row = {
            "click_id": click.click_id,
            "article_id": click.article_id,
            "story_id": click.story_id,
            "reader_hash": click.reader_hash,
            "surface": click.surface,
            "position": click.position,
            "clicked_at": at,
        }
        table = check_schema(rows_to_table([row], CLICKS_SCHEMA), CLICKS_SCHEMA, key=key)
        try:
            self._store.put(key, table_to_parquet_bytes(table), if_none_match=True)
        except PreconditionFailedError:
            return False
        except (OSError, WarehouseError) as e:
            raise ClickLogError(f"click not stored: {type(e).__name__}") from e
        return True
