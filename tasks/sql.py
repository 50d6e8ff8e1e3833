"""``newsroom sql``: DuckDB over every table, for analysts."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TextIO

import duckdb

from tasks.errors import QueryTimeoutError
from tasks.progress import NO_PROGRESS, Progress
from tasks.settings import current_settings
from warehouse.catalog import TablePlan
from warehouse.damage import collect_damage
from warehouse.duck import (
    EXPORT_TABLES,
    TABLE_VIEWS,
    connect,
    export_day,
    load_example_sql,
    lock_down,
    register_sources,
    run_resilient,
    sources_named_in,
    split_queries,
    views_script,
)
from warehouse.store import ObjectStore

TABLE_CELL_CHARS = 80


def _print_result(con: duckdb.DuckDBPyConnection, query: str, out: TextIO, fmt: str = "table") -> None:
    relation = con.sql(query)
    if relation is None:
        return
    if fmt == "table":
        out.write(_format(relation))
        out.write("\n")
    elif fmt == "csv":  # every value whole; NULL is a bare empty field, '' a quoted one
        for row in [relation.columns, *relation.fetchall()]:
            out.write(",".join(_csv_field(v) for v in row))
            out.write("\n")
    else:  # one JSON object a row; NULL is null
        for row in relation.fetchall():
            out.write(json.dumps(dict(zip(relation.columns, row, strict=True)), default=str, ensure_ascii=False))
            out.write("\n")


def _csv_field(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return '"' + str(value).replace('"', '""') + '"'


def _format(relation: duckdb.DuckDBPyRelation) -> str:
    """A table for people: NULL shown as NULL, values over 80 characters cut with an ellipsis."""
    columns = relation.columns
    rows = relation.fetchall()
    cells = [[str(c) for c in columns]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    lines.append(f"({len(rows)} rows)")
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return "NULL"
    text = str(value)
    return text if len(text) <= TABLE_CELL_CHARS else text[:TABLE_CELL_CHARS - 1] + "…"


def open_warehouse(store: ObjectStore, sources: Iterable[str] | None = None,
                   plans: Mapping[str, TablePlan] | None = None) -> duckdb.DuckDBPyConnection:
    """DuckDB over the store (:func:`warehouse.duck.connect`) under the settings' query memory and
    spill limits (``NEWSROOM_WAREHOUSE_QUERY_*``): what ``newsroom sql``, health, the dashboards and
    explain open."""
    settings = current_settings().warehouse
    return connect(store, sources=sources, plans=plans, memory_limit=settings.query_memory_limit,
                   spill_limit=settings.query_spill_limit)


def run_sql(store: ObjectStore, query: str | None, out: TextIO = sys.stdout, inp: TextIO = sys.stdin,
            err: TextIO = sys.stderr, fmt: str = "table", timeout_seconds: float | None = None) -> int:
    """Run one query, or read queries from standard input (one per ``;``) when none is given.

    The connection is confined to the store's views (:func:`warehouse.duck.lock_down`): no file,
    network or extension access, configuration locked (its memory limit included), and only
    queries run. A text holding several statements prints every result in order; one that holds a
    statement that is not a query (an ``explain`` of one included) is refused whole, before any of
    it runs (issue 16, 32). A query still running after ``timeout_seconds`` (default
    ``NEWSROOM_WAREHOUSE_SQL_TIMEOUT_SECONDS``) is stopped. Each query reads only the tables it
    names (issue 28); objects they could not read (a corrupt segment or pointer) are left out and
    named on ``err`` as warnings.

    Returns the exit status: 1 when any query failed, was refused or stopped (each failure is
    written to ``err`` on one line, and the queries after it still run), else 0. ``fmt``: ``table``
    for people (long values cut), ``csv`` or ``jsonl`` for other tools (whole values, NULL told
    from the empty string).
    """
    limit = timeout_seconds if timeout_seconds is not None else current_settings().warehouse.sql_timeout_seconds
    con = open_warehouse(store, sources=())
    lock_down(con)
    registered: set[str] = set()
    failed = False

    def run(text: str) -> None:
        nonlocal failed
        try:
            statements = split_queries(con, text)
            needed = sources_named_in(text) - registered
            if needed:
                with collect_damage() as damaged:
                    register_sources(con, store, needed)
                registered.update(needed)
                for item in damaged:
                    err.write(f"warning: left out {item.key}: {item.problem}\n")
            for statement in statements:
                with collect_damage() as damaged:
                    _run_with_limit(con, store, statement, limit, out, fmt)
                for item in damaged:
                    err.write(f"warning: left out {item.key}: {item.problem}\n")
        except (duckdb.Error, PermissionError, QueryTimeoutError) as e:
            err.write("error: " + " ".join(str(e).split()) + "\n")
            failed = True

    try:
        if query:
            run(query)
            return int(failed)
        if inp.isatty():
            out.write(f"newsroom sql: views {', '.join(TABLE_VIEWS)}. End each query with ';', Ctrl-D to quit.\n")
        buffer = ""
        for line in inp:
            buffer += line
            if buffer.strip().endswith(";"):
                run(buffer)
                buffer = ""
        if buffer.strip():
            run(buffer)
        return int(failed)
    finally:
        con.close()


def _run_with_limit(con: duckdb.DuckDBPyConnection, store: ObjectStore, statement: str, limit: float, out: TextIO,
                    fmt: str) -> None:
    """Run and print one statement, interrupting it once it has run ``limit`` seconds."""
    stopped = threading.Event()

    def interrupt() -> None:
        stopped.set()
        con.interrupt()

    timer = threading.Timer(limit, interrupt)
    timer.start()
    try:
        run_resilient(con, store, lambda: _print_result(con, statement, out, fmt))
    except duckdb.InterruptException as e:
        if stopped.is_set():
            raise QueryTimeoutError(f"the query ran past its time limit of {limit:g} s and was stopped "
                                    "(NEWSROOM_WAREHOUSE_SQL_TIMEOUT_SECONDS)") from e
        raise
    finally:
        timer.cancel()


def write_views_file(store: ObjectStore, path: Path) -> int:
    """``newsroom sql --views-file``: the store's views as a DuckDB script (:func:`warehouse.duck.views_script`);
    returns how many views it creates."""
    script = views_script(store)
    path.write_text(script, encoding="utf-8")
    return script.count("create or replace view ")


def example_query(name: str) -> str:
    return load_example_sql(name)


def export_tables(store: ObjectStore, day: str, output: Path, progress: Progress = NO_PROGRESS) -> dict[str, int]:
    """``newsroom export``: a day's tables as Parquet for other tools (the store is read first, then
    each table is written; ``progress`` counts the tables)."""
    advance = progress.stage(f"exporting {day}", len(EXPORT_TABLES))
    return export_day(store, day, output, on_table=lambda name, rows: advance(1))
