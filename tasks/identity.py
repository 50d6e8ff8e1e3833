"""Give each fetched article one identity before it is written (issue #3).

New content under a known canonical URL becomes the next version; a page whose content is already
stored under another URL (AMP, print) is recorded as a link, not stored twice; an unchanged page
seen again (another feed listing it) is dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from transforms.identity import KnownArticle, index_shard, resolve_identity, shards_for
from transforms.records import ArticleRow
from warehouse import layout
from warehouse.damage import describe_error, record_damage
from warehouse.errors import ObjectNotFoundError, WarehouseError
from warehouse.identity import (
    CONTENT_PREFIX,
    HASHES_SCHEMA,
    IDENTITY_PREFIX,
    IDS_SCHEMA,
    load_shards,
    save_shard,
)
from warehouse.schemas import ARTICLE_LINKS_SCHEMA, ARTICLES_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import content_segment_id, read_segment, rows_to_table, write_segment

IDENTITY_RETENTION = timedelta(days=30)


@dataclass(slots=True)
class IdentityBatch:
    """The rows to store, the links to record, and the index shards to write after the rows."""

    rows: list[ArticleRow]
    links: list[dict[str, object]]
    """Rows of ``ARTICLE_LINKS_SCHEMA``: another URL (AMP, print) of an article already stored."""
    counts: dict[str, int]
    _ids: dict[int, tuple[dict[str, dict[str, object]], str | None]] = field(default_factory=dict)
    """Each identity shard read: its rows (``IDS_SCHEMA``, as :func:`load_shards` reads them) by
    article id, and its ETag."""
    _hashes: dict[int, tuple[dict[str, dict[str, object]], str | None]] = field(default_factory=dict)
    """Each content hash shard read (``HASHES_SCHEMA``) by content hash, and its ETag."""


def assign_identities(store: ObjectStore, rows: list[ArticleRow], now: datetime) -> IdentityBatch:
    """Resolve every row's identity against the index, in (first_seen_at, article_id) order."""
    id_shards = load_shards(store, IDENTITY_PREFIX, IDS_SCHEMA, shards_for(r.article_id for r in rows))
    hash_shards = load_shards(store, CONTENT_PREFIX, HASHES_SCHEMA, shards_for(r.content_hash for r in rows))
    ids = {s: ({r["article_id"]: r for r in entries}, etag) for s, (entries, etag) in id_shards.items()}
    hashes = {s: ({r["content_hash"]: r for r in entries}, etag) for s, (entries, etag) in hash_shards.items()}
    by_id = {k: KnownArticle(k, int(v["version"]), str(v["content_hash"]))
             for entries, _ in ids.values() for k, v in entries.items()}
    by_hash = {k: str(v["article_id"]) for entries, _ in hashes.values() for k, v in entries.items()}
    kept: list[ArticleRow] = []
    links: list[dict[str, object]] = []
    counts = {"new": 0, "new_version": 0, "unchanged": 0, "linked": 0}
    for row in sorted(rows, key=lambda r: (r.first_seen_at, r.article_id, r.content_hash)):
        decision = resolve_identity(row.article_id, row.content_hash, by_id, by_hash)
        counts[decision.kind] += 1
        if decision.kind in ("new", "new_version"):
            kept.append(replace(row, version=decision.version))
            ids[index_shard(row.article_id)][0][row.article_id] = {
                "article_id": row.article_id, "version": decision.version,
                "content_hash": row.content_hash, "seen_at": now}
            hash_entries = hashes[index_shard(row.content_hash)][0]
            hash_entries.setdefault(row.content_hash, {"content_hash": row.content_hash,
                                                       "article_id": row.article_id, "seen_at": now})
        elif decision.kind == "linked":
            links.append({"article_id": row.article_id, "url": row.url, "canonical_url": row.canonical_url,
                          "linked_to": decision.linked_to, "publisher_id": row.publisher_id,
                          "first_seen_at": row.first_seen_at})
    return IdentityBatch(kept, links, counts, ids, hashes)


def commit_identities(store: ObjectStore, batch: IdentityBatch, now: datetime) -> None:
    """Write the links segment and the touched index shards (after the articles segment)."""
    if batch.links:
        table = rows_to_table(batch.links, ARTICLE_LINKS_SCHEMA)
        write_segment(store, layout.article_links_key(now, content_segment_id(table)), table, ARTICLE_LINKS_SCHEMA)
    if not batch.rows:
        return
    for shard in shards_for(r.article_id for r in batch.rows):
        entries, etag = batch._ids[shard]
        save_shard(store, IDENTITY_PREFIX, IDS_SCHEMA, shard, list(entries.values()), etag, now, IDENTITY_RETENTION)
    for shard in shards_for(r.content_hash for r in batch.rows):
        entries, etag = batch._hashes[shard]
        save_shard(store, CONTENT_PREFIX, HASHES_SCHEMA, shard, list(entries.values()), etag, now,
                   IDENTITY_RETENTION)


def roll_forward_pending(store: ObjectStore, now: datetime) -> int:
    """Commit the identities of the article segment a crashed ingest run wrote (the one
    ``state/ingest/pending.json`` names) and drop the marker; returns the articles rolled forward.

    Ingest writes the marker, then its segment, then the identity shards, then deletes the marker.
    A run that died between the segment and the shards left articles the index does not know, so
    the next run would fetch them again as new and the log would hold each twice; committing them
    first makes that run see them as stored (the log holds every article version once, which is
    what lets queries read it without a window over every row, issue 28). A marker naming no
    segment (the run died before writing it) is just dropped.
    """
    try:
        marker = json.loads(store.get(layout.INGEST_PENDING_KEY).data)
        key = str(marker["segment"])
    except ObjectNotFoundError:
        return 0
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        record_damage(layout.INGEST_PENDING_KEY, f"corrupt: {describe_error(e)}", "deleted")
        store.delete(layout.INGEST_PENDING_KEY)
        return 0
    rolled = 0
    try:
        table = read_segment(store, key, ARTICLES_SCHEMA)
    except ObjectNotFoundError:
        table = None
    except WarehouseError as e:
        record_damage(key, f"corrupt: {describe_error(e)}", "its identities were not rolled forward")
        table = None
    if table is not None and table.num_rows:
        batch = assign_identities(store, [ArticleRow.from_row(r) for r in table.to_pylist()], now)
        commit_identities(store, batch, now)
        rolled = len(batch.rows)
    store.delete(layout.INGEST_PENDING_KEY)
    return rolled


def mark_pending(store: ObjectStore, segment_key: str) -> None:
    """Name the segment this run is about to write (see :func:`roll_forward_pending`)."""
    store.put(layout.INGEST_PENDING_KEY, json.dumps({"segment": segment_key}).encode(),
              content_type="application/json")


def clear_pending(store: ObjectStore) -> None:
    store.delete(layout.INGEST_PENDING_KEY)
