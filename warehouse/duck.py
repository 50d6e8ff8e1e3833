"""DuckDB over the store: one view per table, and the SQL files in ``warehouse/sql``."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import duckdb
import pyarrow as pa

from warehouse import layout
from warehouse.schemas import (
    ARTICLES_SCHEMA,
    CLICKS_SCHEMA,
    FEED_STATE_SCHEMA,
    FEEDS_SCHEMA,
    PAGES_SCHEMA,
    PUBLISHERS_SCHEMA,
    STORY_CHANGES_SCHEMA,
)
from warehouse.store import ObjectStore
from warehouse.tables import list_segments, read_segments, read_table

TABLE_VIEWS = ("articles", "stories", "story_changes", "feeds", "publishers", "pages", "clicks")


def load_sql(name: str) -> str:
    """The text of ``warehouse/sql/<name>.sql``."""
    return resources.files("warehouse").joinpath("sql", f"{name}.sql").read_text(encoding="utf-8")


def _pages_table(store: ObjectStore) -> pa.Table:
    rows: list[dict[str, Any]] = []
    live: dict[str, int] = {}
    keys = store.list(layout.PAGES_PREFIX)
    for key in keys:
        if key.endswith("/latest.json"):
            live[key.rsplit("/", 1)[0]] = int(json.loads(store.get(key).data)["version"])
    for key in keys:
        parts = key.split("/")
        name = parts[-1]
        if not (name.startswith("v") and name.endswith(".json")):
            continue
        folder = key.rsplit("/", 1)[0]
        version = int(name[1:-5])
        edition, section = (parts[1], parts[2]) if len(parts) == 4 else (parts[1], "")
        rows.append({"edition": edition, "section": section, "version": version, "key": key,
                     "is_live": live.get(folder) == version})
    return pa.Table.from_pylist(rows, schema=PAGES_SCHEMA)


def read_raw_tables(store: ObjectStore) -> dict[str, pa.Table]:
    """Every log and registry table as Arrow, read from the store."""
    feed_registry, _ = read_table(store, layout.FEEDS_KEY, FEEDS_SCHEMA)
    feed_state, _ = read_table(store, layout.FEED_STATE_KEY, FEED_STATE_SCHEMA)
    publishers, _ = read_table(store, layout.PUBLISHERS_KEY, PUBLISHERS_SCHEMA)
    return {
        "articles_log": read_segments(store, list_segments(store, layout.ARTICLES_PREFIX), ARTICLES_SCHEMA),
        "story_changes_log": read_segments(store, list_segments(store, layout.STORY_CHANGES_PREFIX),
                                           STORY_CHANGES_SCHEMA),
        "publishers_raw": publishers,
        "feed_registry": feed_registry,
        "feed_state": feed_state,
        "clicks_log": read_segments(store, list_segments(store, layout.CLICKS_PREFIX), CLICKS_SCHEMA),
        "pages_raw": _pages_table(store),
    }


def connect(store: ObjectStore) -> duckdb.DuckDBPyConnection:
    """An in-process DuckDB with the views ``articles``, ``stories``, ``story_changes``, ``feeds``,
    ``publishers``, ``pages`` and ``clicks`` over the store."""
    con = duckdb.connect()
    con.execute("set autoinstall_known_extensions = false")
    con.execute("set timezone = 'UTC'")
    for name, table in read_raw_tables(store).items():
        con.register(name, table)
    con.execute(load_sql("views"))
    return con
