"""DuckDB over the store: one view per table, and the SQL files in ``warehouse/sql``."""

from __future__ import annotations

import atexit
import json
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypedDict, TypeVar
from urllib.parse import urlsplit

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from warehouse import layout
from warehouse.catalog import LOG_TABLES, TablePlan, checked_metadata, dataset_of, filesystem_of, plan_table
from warehouse.damage import describe_error, record_damage
from warehouse.errors import ObjectNotFoundError
from warehouse.schemas import (
    FEED_STATE_SCHEMA,
    FEEDS_SCHEMA,
    PAGES_SCHEMA,
    PUBLISHERS_SCHEMA,
)
from warehouse.settings import WarehouseSettings, get_settings
from warehouse.store import ObjectStore, S3Store, open_store

T = TypeVar("T")

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
    start = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)
    con = connect(store)
    output.mkdir(parents=True, exist_ok=True)
    # Ranges on the stored columns, not casts of them, so each reaches the files' statistics and
    # the export reads that day's files (issue 28).
    in_day = "{column} >= $start and {column} < $end"
    queries: dict[str, str] = {
        "articles": "select * from articles where " + in_day.format(column="first_seen_at"),
        "story_changes": "select * from story_changes where " + in_day.format(column="changed_at"),
        "clicks": "select * from clicks where " + in_day.format(column="clicked_at"),
        "publishers": "select * from publishers",
        "feeds": "select * from feeds",
        "article_links": "select * from article_links where " + in_day.format(column="first_seen_at"),
        # The stories that had an article that day, with their counts as of the export.
        "stories": "select * from stories where first_seen_at < $end and last_seen_at >= $start",
    }
    assert tuple(queries) == EXPORT_TABLES
    counts = {}
    try:
        for name, query in queries.items():
            params = {"start": start, "end": start + timedelta(days=1)} if "$start" in query else None
            table = run_resilient(con, store, lambda q=query, p=params: con.sql(q, params=p).to_arrow_table())
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


class _PageVersionRow(TypedDict):
    """A row of the ``pages`` source (:data:`warehouse.schemas.PAGES_SCHEMA`)."""

    edition: str
    section: str
    version: int
    key: str
    is_live: bool


def _pages_table(store: ObjectStore) -> pa.Table:
    """Every page version and whether its pointer names it: one listing and one read a pointer."""
    rows: list[_PageVersionRow] = []
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
        if not (name.startswith("v") and name.endswith(".json") and name[1:-5].isdigit()):
            continue
        folder = key.rsplit("/", 1)[0]
        version = int(name[1:-5])
        edition, section = (parts[1], parts[2]) if len(parts) == 4 else (parts[1], "")
        rows.append({"edition": edition, "section": section, "version": version, "key": key,
                     "is_live": live.get(folder) == version})
    return pa.Table.from_pylist(rows, schema=PAGES_SCHEMA)


def _state_table(store: ObjectStore, key: str, schema: pa.Schema) -> pa.Table | ds.Dataset:
    """A whole-table object (registry, feed state) as a dataset over its file, so a query reads only
    the columns it names (the feed state's guid lists are most of its bytes); empty when absent,
    and empty (recorded) when unreadable or of another schema, as :func:`read_table` reads it."""
    fs, base = filesystem_of(store)
    try:
        checked_metadata(fs, f"{base}/{key}", schema)
    except ValueError as e:
        if store.head(key) is not None:
            record_damage(key, f"corrupt: {e}", "read as empty")
        return schema.empty_table()
    return dataset_of(store, [key], schema)


SOURCES = ("articles", "story_changes", "clicks", "article_links", "fetches", "listings", "publishers",
           "feeds", "feed_state", "pages")
"""What a connection can read: the log tables (:data:`warehouse.catalog.LOG_TABLES`), the registry's
two tables, the feed state, and the page versions."""
_NEEDS: dict[str, tuple[str, ...]] = {
    **{name: (name,) for name in LOG_TABLES},
    **{f"{name}_log": (name,) for name in LOG_TABLES},
    **{f"{name}_settled": (name,) for name in LOG_TABLES},
    **{f"{name}_fresh": (name,) for name in LOG_TABLES},
    "articles_as_of": ("articles",),
    "story_assignments": ("story_changes",),
    "story_assignments_as_of": ("story_changes",),
    "stories": ("story_changes", "articles"),
    "publishers": ("publishers",), "publishers_raw": ("publishers",),
    "feeds": ("feeds", "feed_state"), "feed_registry": ("feeds",), "feed_state": ("feed_state",),
    "pages": ("pages",), "pages_raw": ("pages",),
}
_NAMES = re.compile(r"\b(" + "|".join(sorted(_NEEDS, key=len, reverse=True)) + r")\b", re.IGNORECASE)


def sources_named_in(*sql: str) -> frozenset[str]:
    """The sources (:data:`SOURCES`) the views and macros named in ``sql`` read.

    >>> sorted(sources_named_in("select count(*) from stories where language = 'en'"))
    ['articles', 'story_changes']
    """
    return frozenset(s for text in sql for m in _NAMES.finditer(text) for s in _NEEDS[m.group(1).lower()])


def connect(store: ObjectStore, *, sources: Iterable[str] | None = None,
            plans: Mapping[str, TablePlan] | None = None, memory_limit: str | None = None,
            spill_limit: str | None = None, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """An in-process DuckDB with every view of ``views.sql`` over the store (issue 28).

    The log tables are registered as pyarrow datasets over their Parquet files where they lie
    (:mod:`warehouse.catalog`): nothing is read until a query runs, and a query reads the columns it
    names and, through the files' statistics, only the files its predicates can match.

    Args:
        sources: The sources (:data:`SOURCES`) the caller's queries read (see
            :func:`sources_named_in`); the others are registered empty, so their views exist and
            cost nothing (:func:`register_sources` adds them later). None registers them all.
        plans: Log tables' plans the caller made already (:func:`warehouse.catalog.plan_table`),
            used instead of planning them again.
        memory_limit: DuckDB's memory limit (e.g. ``"1GB"``); past it, sorts, joins and aggregates
            spill to a temporary folder of this connection, up to ``spill_limit`` of disk.
        threads: DuckDB's worker threads.
    """
    con = duckdb.connect()
    con.execute("set autoinstall_known_extensions = false")
    con.execute("set timezone = 'UTC'")
    con.execute("set temp_directory = $dir", {"dir": _spill_directory()})
    if memory_limit is not None:
        con.execute("set memory_limit = $limit", {"limit": memory_limit})
    if spill_limit is not None:
        con.execute("set max_temp_directory_size = $limit", {"limit": spill_limit})
    if threads is not None:
        con.execute("set threads = $threads", {"threads": threads})
    for name, table in LOG_TABLES.items():
        for part in ("settled", "fresh"):
            con.register(f"{name}_{part}", table.schema.empty_table())
    for view, (_, _, schema) in _STATE_TABLES.items():
        con.register(view, schema.empty_table())
    con.register("pages_raw", PAGES_SCHEMA.empty_table())
    con.execute(load_sql("views"))
    register_sources(con, store, SOURCES if sources is None else sources, plans)
    return con


_STATE_TABLES = {
    "publishers_raw": ("publishers", layout.PUBLISHERS_KEY, PUBLISHERS_SCHEMA),
    "feed_registry": ("feeds", layout.FEEDS_KEY, FEEDS_SCHEMA),
    "feed_state": ("feed_state", layout.FEED_STATE_KEY, FEED_STATE_SCHEMA),
}


def register_sources(con: duckdb.DuckDBPyConnection, store: ObjectStore, sources: Iterable[str],
                     plans: Mapping[str, TablePlan] | None = None) -> None:
    """Register ``sources`` (:data:`SOURCES`) on a connection made by :func:`connect`, in place of
    their empty stand-ins; the views see them at their next query. Registering one again reads its
    files' listing again."""
    wanted = set(sources)
    unknown = wanted - set(SOURCES)
    if unknown:
        raise ValueError(f"unknown sources {sorted(unknown)}; choose from {', '.join(SOURCES)}")
    for name in sorted(wanted & set(LOG_TABLES)):
        table = LOG_TABLES[name]
        plan = (plans or {}).get(name) or plan_table(store, table)
        _register_part(con, store, f"{name}_settled", plan.settled)
        _register_part(con, store, f"{name}_fresh", plan.fresh)
    for view, (source, key, schema) in _STATE_TABLES.items():
        if source in wanted:
            con.register(view, _state_table(store, key, schema))
    if "pages" in wanted:
        con.register("pages_raw", _pages_table(store))


def views_script(store: ObjectStore) -> str:
    """A DuckDB script creating the same views over the store's files as they are now, for an
    analyst's own DuckDB (the CLI's ``.read``, Python, a notebook): ``newsroom sql --views-file``.

    Each log part becomes ``read_parquet`` over the files a query here would read (so the analyst
    counts what ``newsroom sql`` counts); the registry and feed state, their files; the page
    versions, a table of them as listed now. On S3 the paths are ``s3://`` URLs, which the
    analyst's DuckDB reads through its httpfs extension (the script says how); newsroom itself
    never installs anything. Files move when maintenance compacts them: write the script again
    after it runs (a query on a file since merged fails, naming it).
    """
    con = duckdb.connect()
    lines = ["-- newsroom views over " + store.uri + " (generated; write it again after maintenance runs)",
             "set timezone = 'UTC';"]
    if isinstance(store, S3Store):
        lines += ["-- reading s3:// needs DuckDB's httpfs extension and the store's credentials, e.g.:",
                  "--   install httpfs; load httpfs;",
                  "--   create secret (type s3, key_id '...', secret '...', region '" + store.region + "'"
                  + (f", endpoint '{urlsplit(store.endpoint_url).netloc}', url_style 'path', use_ssl "
                     f"{'true' if urlsplit(store.endpoint_url).scheme == 'https' else 'false'}" if store.endpoint_url
                     else "") + ");"]

    def files(keys: Iterable[str]) -> str:
        return "[" + ", ".join(_sql_string(_file_url(store, k)) for k in keys) + "]"

    def empty(schema: pa.Schema) -> str:
        con.register("shape", schema.empty_table())
        columns = con.sql("describe shape").fetchall()
        return "select " + ", ".join(f"cast(null as {kind}) as {_sql_identifier(name)}"
                                     for name, kind, *_ in columns) + " where false"

    def view(name: str, keys: Iterable[str], schema: pa.Schema) -> str:
        keys = list(keys)
        columns = ", ".join(_sql_identifier(n) for n in schema.names)
        body = (f"select {columns} from read_parquet({files(keys)}, union_by_name = true)" if keys
                else empty(schema))
        return f"create or replace view {name} as {body};"

    for name, table in LOG_TABLES.items():
        plan = plan_table(store, table)
        lines.append(view(f"{name}_settled", plan.settled, table.schema))
        lines.append(view(f"{name}_fresh", plan.fresh, table.schema))
    for name, (_, key, schema) in _STATE_TABLES.items():
        lines.append(view(name, [key] if store.head(key) is not None else [], schema))
    pages = _pages_table(store).to_pylist()
    if pages:
        values = ", ".join(f"({_sql_string(p['edition'])}, {_sql_string(p['section'])}, {p['version']}, "
                           f"{_sql_string(p['key'])}, {str(p['is_live']).lower()})" for p in pages)
        lines.append(f"create or replace view pages_raw as select * from (values {values}) "
                     "as t(edition, section, version, key, is_live);")
    else:
        lines.append(f"create or replace view pages_raw as {empty(PAGES_SCHEMA)};")
    con.close()
    return "\n".join(lines) + "\n" + load_sql("views")


def _file_url(store: ObjectStore, key: str) -> str:
    if isinstance(store, S3Store):
        return f"s3://{store.bucket}/{store.prefix}{key}"
    fs, base = filesystem_of(store)
    return f"{base}/{key}"


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _sql_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def connect_from_settings(settings: WarehouseSettings | None = None) -> duckdb.DuckDBPyConnection:
    """DuckDB over the store the ``NEWSROOM_WAREHOUSE_*`` settings name, every view registered,
    under their memory limits: the one step of an analyst's Python session or notebook
    (``from warehouse.duck import connect_from_settings; con = connect_from_settings()``)."""
    settings = settings or get_settings()
    return connect(open_store(settings), memory_limit=settings.query_memory_limit,
                   spill_limit=settings.query_spill_limit)


_PARTS: dict[int, dict[str, tuple[str, ...]]] = {}
"""The files each log part of a connection reads (by ``id(con)``), so a scan that fails on a
damaged file can be repaired (:func:`run_resilient`)."""
_STREAM_FAILED = re.compile(r"registered as '(?P<part>[a-z_]+_(?:settled|fresh))' failed")
RETRIES_AFTER_DAMAGE = 3


def _register_part(con: duckdb.DuckDBPyConnection, store: ObjectStore, part: str, keys: Iterable[str]) -> None:
    name = part.rsplit("_", 1)[0]
    kept = tuple(keys)
    _PARTS.setdefault(id(con), {})[part] = kept
    con.register(part, dataset_of(store, kept, LOG_TABLES[name].schema))


def run_resilient(con: duckdb.DuckDBPyConnection, store: ObjectStore, action: Callable[[], T]) -> T:
    """``action()`` (a query on ``con``, read to the end), again without any file it found damaged.

    A segment whose footer reads but whose pages do not (a bit flipped in storage) fails the scan
    of the part that reads it, and the error does not say which file: each file of that part is
    then read on its own, the damaged ones are named (:func:`warehouse.damage.record_damage`) and
    left out, and the query runs again. Costless until a scan fails (issue 28).
    """
    for attempt in range(RETRIES_AFTER_DAMAGE + 1):
        try:
            return action()
        except duckdb.Error as e:
            found = _STREAM_FAILED.search(str(e))
            parts = _PARTS.get(id(con), {})
            if found is None or found.group("part") not in parts or attempt == RETRIES_AFTER_DAMAGE:
                raise
            part = found.group("part")
            schema = LOG_TABLES[part.rsplit("_", 1)[0]].schema
            damaged = damaged_files(store, parts[part], schema)
            if not damaged:
                raise
            _register_part(con, store, part, [k for k in parts[part] if k not in damaged])
    raise AssertionError("unreachable")


def damaged_files(store: ObjectStore, keys: Iterable[str], schema: pa.Schema) -> list[str]:
    """The files among ``keys`` whose rows cannot be read, each named in a recorded error; read one
    at a time, a row group at a time, so memory stays that of a row group."""
    fs, base = filesystem_of(store)
    found = []
    for key in keys:
        try:
            with fs.open_input_file(f"{base}/{key}") as handle:
                parquet = pq.ParquetFile(handle, pre_buffer=False)
                columns = [n for n in schema.names if n in parquet.schema_arrow.names]
                for _ in parquet.iter_batches(columns=columns, use_threads=False):
                    pass
        except FileNotFoundError:
            continue
        except (pa.ArrowException, OSError, ValueError) as e:
            record_damage(key, f"corrupt: unreadable Parquet pages: {describe_error(e)}", "skipped")
            found.append(key)
    return found


def article_rows(store: ObjectStore, article_ids: Iterable[str], columns: Iterable[str],
                 plan: TablePlan | None = None) -> pa.Table:
    """The stored rows (every version) of the articles ``article_ids`` names, ``columns`` only.

    A lookup by id reads the row groups whose statistics can hold the ids (a closed day's merged
    segment is sorted by article id), not the whole log: what ``newsroom explain`` reads for one
    story's lineage (issue 28).
    """
    ids = sorted(set(article_ids))
    table = LOG_TABLES["articles"]
    names = list(columns)
    if not ids:
        return pa.schema([table.schema.field(c) for c in names]).empty_table()
    plan = plan or plan_table(store, table)
    dataset = dataset_of(store, [*plan.settled, *plan.fresh], table.schema)
    if isinstance(dataset, pa.Table):
        return dataset.select(names)
    return dataset.to_table(columns=names, filter=pc.field("article_id").isin(ids))


_SPILL_DIRECTORIES: list[str] = []


def _spill_directory() -> str:
    """A folder of this connection's own for DuckDB to spill to (removed when the process exits)."""
    path = tempfile.mkdtemp(prefix="newsroom-duckdb-")
    if not _SPILL_DIRECTORIES:
        atexit.register(lambda: [shutil.rmtree(p, ignore_errors=True) for p in _SPILL_DIRECTORIES])
    _SPILL_DIRECTORIES.append(path)
    return path


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
    """The statements of ``sql``, each checked to be a query (:data:`QUERY_STATEMENTS`); an
    ``explain`` (or ``explain analyze``, which runs what it explains) must explain a query too.

    Raises:
        duckdb.Error: ``sql`` does not parse.
        PermissionError: A statement is not a query; names its position and type.
    """
    statements = con.extract_statements(sql)
    for number, statement in enumerate(statements, 1):
        kind = _query_kind(con, statement)
        if kind is not None:
            raise PermissionError(f"statement {number} is {kind}, not a query: newsroom sql runs queries only "
                                  "(select, with, from, values, describe, show, summarize, explain of a query)")
    return [statement.query for statement in statements]


def _query_kind(con: duckdb.DuckDBPyConnection, statement: duckdb.Statement, depth: int = 0) -> str | None:
    """None when ``statement`` is a query (or explains one), else what it is (``create``, ...)."""
    if statement.type not in QUERY_STATEMENTS:
        return statement.type.name.lower()
    if statement.type != duckdb.StatementType.EXPLAIN:
        return None
    inner = _explained(statement.query)
    if inner is None or depth > 2:
        return "explain of something not recognised as a query"
    try:
        explained = con.extract_statements(inner)
    except duckdb.Error:
        return "explain of something not recognised as a query"
    if len(explained) != 1:
        return "explain of several statements"
    kind = _query_kind(con, explained[0], depth + 1)
    return None if kind is None else f"explain of {kind}"


def _explained(text: str) -> str | None:
    """The statement an ``explain [analyze] [(options)]`` text explains, or None.

    >>> _explained("/* why */ EXPLAIN ANALYZE create table t as select 1")
    'create table t as select 1'
    >>> _explained("explain (format json) select 1")
    'select 1'
    """
    tokens = [(pos, kind) for pos, kind in duckdb.tokenize(text) if kind != duckdb.token_type.comment]
    words = [(pos, text[pos:end].strip().lower()) for (pos, _), end in
             zip(tokens, [p for p, _ in tokens[1:]] + [len(text)], strict=True)]
    index = 0
    if index < len(words) and words[index][1] == "explain":
        index += 1
    else:
        return None
    if index < len(words) and words[index][1] == "analyze":
        index += 1
    if index < len(words) and words[index][1].startswith("("):
        depth = 0
        while index < len(words):
            depth += words[index][1].count("(") - words[index][1].count(")")
            index += 1
            if depth <= 0:
                break
    return text[words[index][0]:].strip() if index < len(words) else None
