"""The article identity index: which canonical ids and content hashes are known, sharded by their
first hex digit so a cycle rewrites only the shards it touches (each with If-Match)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

import pyarrow as pa

from warehouse.schemas import ARTICLE_LINKS_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import read_table, write_table

IDENTITY_PREFIX = "state/articles/identity/"
CONTENT_PREFIX = "state/articles/content/"

IDS_SCHEMA = pa.schema([("article_id", pa.string()), ("version", pa.int32()), ("content_hash", pa.string()),
                        ("seen_at", pa.timestamp("us", tz="UTC"))])
HASHES_SCHEMA = pa.schema([("content_hash", pa.string()), ("article_id", pa.string()),
                           ("seen_at", pa.timestamp("us", tz="UTC"))])


def _key(prefix: str, shard: int) -> str:
    return f"{prefix}{shard:02x}.parquet"


def load_shards(store: ObjectStore, prefix: str, schema: pa.Schema, shards: Iterable[int]
                ) -> dict[int, tuple[list[dict[str, object]], str | None]]:
    """Rows and ETag of each requested shard (a missing shard is empty, ETag None)."""
    loaded = {}
    for shard in sorted(set(shards)):
        table, etag = read_table(store, _key(prefix, shard), schema)
        loaded[shard] = (table.to_pylist(), etag)
    return loaded


def save_shard(store: ObjectStore, prefix: str, schema: pa.Schema, shard: int, rows: list[dict[str, object]],
               etag: str | None, now: datetime, keep: timedelta) -> None:
    """Replace one shard, dropping entries unseen for longer than ``keep`` (retention)."""
    horizon = now - keep
    kept = sorted((r for r in rows if r["seen_at"] is None or r["seen_at"] >= horizon),
                  key=lambda r: str(r[schema.names[0]]))
    write_table(store, _key(prefix, shard), pa.Table.from_pylist(kept, schema), schema, if_match=etag,
                if_none_match=etag is None)


__all__ = ["ARTICLE_LINKS_SCHEMA", "CONTENT_PREFIX", "HASHES_SCHEMA", "IDENTITY_PREFIX",
           "IDS_SCHEMA", "load_shards", "save_shard"]
