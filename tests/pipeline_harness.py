"""Helpers for pipeline tests: run the replay site and the real flows against a store."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from corpus_paths import CLUSTERING_CORPORA
from s3server import S3Server

from replay.site import ReplaySite
from tasks.settings import current_settings, use_settings
from tasks.storage import configured_store
from warehouse.settings import WarehouseSettings
from warehouse.state_blobs import zstd_content_size
from warehouse.store import ObjectStore

CORPORA = CLUSTERING_CORPORA
START = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)


@contextmanager
def replay_site(limit: int = 90, seed: int = 7, span_hours: float = 2.0, port: int = 0,
                corpora: list[Path] | None = None) -> Iterator[ReplaySite]:
    site = ReplaySite.from_corpora(corpora or CORPORA, seed=seed, start=START, span_hours=span_hours, limit=limit)
    site.start(port=port)
    try:
        yield site
    finally:
        site.stop()


def local_env(root: Path) -> dict[str, str]:
    return {"NEWSROOM_WAREHOUSE_ROOT": str(root)}


def s3_env(server: S3Server, prefix: str) -> dict[str, str]:
    return {
        "NEWSROOM_WAREHOUSE_ROOT": f"s3://{server.bucket}/{prefix}",
        "NEWSROOM_WAREHOUSE_S3_ENDPOINT_URL": server.endpoint_url,
        "NEWSROOM_WAREHOUSE_S3_ACCESS_KEY_ID": server.access_key,
        "NEWSROOM_WAREHOUSE_S3_SECRET_ACCESS_KEY": server.secret_key,
        "NEWSROOM_WAREHOUSE_S3_REGION": server.region,
    }


@contextmanager
def pipeline_env(store_vars: dict[str, str]) -> Iterator[ObjectStore]:
    """Run the flows of this block on a store (``store_vars``: its ``NEWSROOM_WAREHOUSE_*`` variables,
    which a child process gets in its environment) with loopback fetches allowed: settings passed in,
    the environment untouched."""
    fields = {k.removeprefix("NEWSROOM_WAREHOUSE_").lower(): v for k, v in store_vars.items()}
    settings = current_settings().with_private_addresses()
    settings = replace(settings, warehouse=WarehouseSettings(**fields))  # type: ignore[arg-type]
    with use_settings(settings):
        yield configured_store()


def cycle_times(count: int, step_minutes: int = 15) -> list[datetime]:
    return [START + timedelta(minutes=step_minutes * i) for i in range(1, count + 1)]


def snapshot_store(store: ObjectStore) -> dict[str, bytes]:
    return {key: store.get(key).data for key in store.list("")}


def object_text(key: str, data: bytes) -> str:
    """Everything an object holds, as text: Parquet rows as JSON, gzip and Zstandard inflated, JSON as is."""
    if key.endswith(".parquet"):
        return json.dumps(pq.read_table(io.BytesIO(data)).to_pylist(), default=str, ensure_ascii=False)
    if key.endswith(".gz"):
        data = gzip.decompress(data)
    elif key.endswith(".zst"):
        data = pa.Codec("zstd").decompress(data, decompressed_size=zstd_content_size(data), asbytes=True)
    return data.decode("utf-8", errors="replace")
