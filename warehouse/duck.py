"""DuckDB over the store: one view per table, and the SQL files in ``warehouse/sql``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from warehouse import layout
from warehouse.schemas import (
    ARTICLE_LINKS_SCHEMA,
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

SQL_DIR = Path(__file__).resolve().parent / "sql"
"""The SQL files ship inside the package (package data), next to this module."""
TABLE_VIEWS = ("articles", "stories", "story_changes", "feeds", "publishers", "pages", "clicks", "article_links")
EXAMPLE_QUERIES = ("first_reporter", "originality_rate", "syndication_chains", "story_lineage",
                   "coverage_by_region")
"""Documented analyst queries in ``warehouse/sql/examples`` (docs/queries.md), each tested."""


def load_sql(name: str) -> str:
    """The text of ``warehouse/sql/<name>.sql``."""
    return (SQL_DIR / f"{name}.sql").read_text(encoding="utf-8")


def load_example_sql(name: str) -> str:
    """The text of one documented example query."""
    if name not in EXAMPLE_QUERIES:
        raise ValueError(f"unknown example query {name!r}; choose from {', '.join(EXAMPLE_QUERIES)}")
    return (SQL_DIR / "examples" / f"{name}.sql").read_text(encoding="utf-8")


def export_day(store: ObjectStore, day: str, output: Path) -> dict[str, int]:
    """Write one UTC day's rows of every log table, the stories active that day, and the registry,
    as Parquet files in ``output``."""
    con = connect(store)
    output.mkdir(parents=True, exist_ok=True)
    queries = {
        "articles": "select * from articles where cast(first_seen_at as date) = cast($day as date)",
        "story_changes": "select * from story_changes where cast(changed_at as date) = cast($day as date)",
        "clicks": "select * from clicks where cast(clicked_at as date) = cast($day as date)",
        "publishers": "select * from publishers",
        "feeds": "select * from feeds",
        "article_links": "select * from article_links where cast(first_seen_at as date) = cast($day as date)",
        # The stories that had an article that day, with their counts as of the export.
        "stories": "select * from stories where cast(first_seen_at as date) <= cast($day as date)"
                   " and cast(last_seen_at as date) >= cast($day as date)",
    }
    counts = {}
    try:
        for name, query in queries.items():
            params = {"day": day} if "$day" in query else None
            table = con.sql(query, params=params).to_arrow_table()
            pq.write_table(table, output / f"{name}.parquet", compression="zstd")
            counts[name] = table.num_rows
    finally:
        con.close()
    return counts


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
        "article_links_log": read_segments(store, list_segments(store, "log/article_links/"), ARTICLE_LINKS_SCHEMA),
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
