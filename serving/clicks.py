"""The clicks log: one small Parquet segment per click, durable before the reader is redirected.

Choice (issue 6): ``/r/{token}`` writes the click as its own immutable object
(``log/clicks/date=YYYY-MM-DD/<click_id>.parquet``, CLICKS_SCHEMA) and answers 302 only after the
store acknowledged the put (LocalStore fsyncs; S3 acknowledges durable writes). No in-memory
buffer can lose a click on a crash, and no local WAL ties a replica to its disk. The cost is one
PUT per click, which is small next to page views; the profiles flow reads the segments and a
compaction job can merge old days later. ``click_id`` derives from the token, so a reload of the
same link is the same click (a put with If-None-Match finds it already there).
"""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime
from typing import Protocol

from serving.errors import ProfileStoreError
from serving.profiles import ProfileStore
from serving.signing import ClickPayload
from warehouse import layout
from warehouse.errors import PreconditionFailedError
from warehouse.schemas import CLICKS_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import check_schema, rows_to_table, table_to_parquet_bytes

logger = logging.getLogger(__name__)


def record_read_quietly(profiles: ProfileStore, click: ClickPayload, at: float) -> None:
    """Add the story to a signed-in reader's reads; a profile store failure must not block the click."""
    if not click.reader_hash:
        return
    try:
        profiles.record_read(click.reader_hash, click.story_id, at)
    except ProfileStoreError as e:
        logger.warning("read_not_recorded error=%s", e)


class ClickLog(Protocol):
    def append(self, token: str, click: ClickPayload, clicked_at: datetime) -> bool:
        """Record one click durably. Returns False when this token's click was already logged."""
        ...


def click_id_of(token: str) -> str:
    return hashlib.blake2b(token.encode(), digest_size=12).hexdigest()


class StoreClickLog:
    """Clicks as one segment object per click in the object store."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store

    def append(self, token: str, click: ClickPayload, clicked_at: datetime) -> bool:
        click_id = click_id_of(token)
        at = clicked_at.astimezone(UTC)
        key = layout.click_segment_key(at, click_id)
        row = {
            "click_id": click_id,
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
        return True
