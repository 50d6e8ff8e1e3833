"""DuckDB over the store: one view per table, and the SQL files in ``warehouse/sql``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from warehouse import layout
from warehouse.damage import describe_error, record_damage
from warehouse.errors import ObjectNotFoundError
from warehouse.schemas import (
    ARTICLE_LINKS_SCHEMA,
    ARTICLES_SCHEMA,
    CLICKS_SCHEMA,
    FEED_STATE_SCHEMA,
    FEEDS_SCHEMA,
    FETCHES_SCHEMA,
    LISTINGS_SCHEMA,
    PAGES_SCHEMA,
    PUBLISHERS_SCHEMA,
    STORY_CHANGES_SCHEMA,
)
from warehouse.store import ObjectStore
from warehouse.tables import list_segments, read_segments, read_table

SQL_DIR = Path(__file__).resolve().parent / "sql"
"""The SQL files ship inside the package (package data), next to this module."""
TABLE_VIEWS = ("articles", "stories", "story_changes", "feeds", "publishers", "pages", "clicks", "article_links",
               "fetches", "listings")
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


EXPORT_TABLES = ("articles", "story_changes", "clicks", "publishers", "feeds", "article_links", "stories")
"""The Parquet files ``export_day`` writes, in order."""


def export_day(store: ObjectStore, day: str, output: Path,
               on_table: Callable[[str, int], None] | None = None) -> dict[str, int]:
    """Write one UTC day's rows of every log table, the stories active that day, and the registry,
    as Parquet files in ``output``; ``on_table(name, rows)`` is called as each file is written."""
    con = connect(store)
    output.mkdir(parents=True, exist_ok=True)
    queries: dict[str, str] = {
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
    assert tuple(queries) == EXPORT_TABLES
    counts = {}
    try:
        for name, query in queries.items():
            params = {"day": day} if "$day" in query else None
            table = con.sql(query, params=params).to_arrow_table()
            pq.write_table(table, output / f"{name}.parquet", compression="zstd")
            counts[name] = table.num_rows
            if on_table is not None:
                on_table(name, table.num_rows)
    finally:
        con.close()
    return counts


def _live_version(store: ObjectStore, key: str) -> int | None:
    """The version a pointer names; None (recorded) when it is unreadable or gone since the listing."""
    try:
        return int(json.loads(store.get(key).data)["version"])
    except ObjectNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        record_damage(key, f"corrupt: unreadable pointer ({describe_error(e)})",
                      "skipped: its page's versions show as not live")
        return None


def _pages_table(store: ObjectStore) -> pa.Table:
    rows: list[dict[str, Any]] = []
    live: dict[str, int] = {}
    keys = store.list(layout.PAGES_PREFIX)
    for key in keys:
        if key.endswith("/latest.json"):
            version = _live_version(store, key)
            if version is not None:
                live[key.rsplit("/", 1)[0]] = version
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
    """Every log and registry table as Arrow, read from the store.

    An object that cannot be read (a truncated segment, a garbage pointer) is left out and named in
    a recorded error (:func:`warehouse.damage.record_damage`), so one bad object never stops rank,
    health or ``newsroom sql`` (issue 16).
    """
    feed_registry, _ = read_table(store, layout.FEEDS_KEY, FEEDS_SCHEMA)
    feed_state, _ = read_table(store, layout.FEED_STATE_KEY, FEED_STATE_SCHEMA)
    publishers, _ = read_table(store, layout.PUBLISHERS_KEY, PUBLISHERS_SCHEMA)

    def log_table(prefix: str, schema: pa.Schema) -> pa.Table:
        return read_segments(store, list_segments(store, prefix), schema, skip_damaged=True)

    return {
        "articles_log": log_table(layout.ARTICLES_PREFIX, ARTICLES_SCHEMA),
        "story_changes_log": log_table(layout.STORY_CHANGES_PREFIX, STORY_CHANGES_SCHEMA),
        "publishers_raw": publishers,
        "feed_registry": feed_registry,
        "feed_state": feed_state,
        "clicks_log": log_table(layout.CLICKS_PREFIX, CLICKS_SCHEMA),
        "article_links_log": log_table("log/article_links/", ARTICLE_LINKS_SCHEMA),
        "fetches_log": log_table(layout.FETCHES_PREFIX, FETCHES_SCHEMA),
        "listings_log": log_table(layout.LISTINGS_PREFIX, LISTINGS_SCHEMA),
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


QUERY_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})
"""Statement types an analyst's connection runs: queries (``select``, ``with``, ``from``, ``values``,
``describe``, ``show``, ``summarize``) and ``explain``. Everything else (``copy``, ``attach``,
``install``, ``load``, ``create``, ``set``, ``pragma``, ``export``, ``pivot``...) is refused."""


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """Confine a connection to the views already registered (``newsroom sql``, issue 16).

    The views read Arrow tables held in memory, so nothing is lost by switching off every file,
    network and extension access, and then locking the configuration so no statement turns it
    back on (STACK.md, "DuckDB sandboxing"). Python replacement scans (a query naming a variable
    of the calling code) are off too. Statements that are not queries are refused before they
    run by :func:`split_queries`: write access is not switched off by the settings alone.
    """
    con.execute("set python_enable_replacements = false")
    con.execute("set enable_external_access = false")
    con.execute("set lock_configuration = true")


def split_queries(con: duckdb.DuckDBPyConnection, sql: str) -> list[str]:
    """The statements of ``sql``, each checked to be a query (:data:`QUERY_STATEMENTS`).

    Raises:
        duckdb.Error: ``sql`` does not parse.
        PermissionError: A statement is not a query; names its position and type.
    """
    statements = con.extract_statements(sql)
    for number, statement in enumerate(statements, 1):
        if statement.type not in QUERY_STATEMENTS:
            kind = statement.type.name.lower()
            raise PermissionError(f"statement {number} is {kind}, not a query: newsroom sql runs queries only "
                                  "(select, with, from, values, describe, show, summarize, explain)")
    return [statement.query for statement in statements]
