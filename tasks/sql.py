"""``newsroom sql``: DuckDB over every table, for analysts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

import duckdb

from tasks.progress import NO_PROGRESS, Progress
from warehouse.damage import collect_damage
from warehouse.duck import (
    EXPORT_TABLES,
    TABLE_VIEWS,
    connect,
    export_day,
    load_example_sql,
    lock_down,
    split_queries,
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


def run_sql(store: ObjectStore, query: str | None, out: TextIO = sys.stdout, inp: TextIO = sys.stdin,
            err: TextIO = sys.stderr, fmt: str = "table") -> int:
    """Run one query, or read queries from standard input (one per ``;``) when none is given.

    The connection is confined to the store's views (:func:`warehouse.duck.lock_down`): no file,
    network or extension access, configuration locked, and only queries run. A text holding several
    statements prints every result in order; one that holds a statement that is not a query is
    refused whole, before any of it runs (issue 16). Objects the views could not read (a corrupt
    segment or pointer) are left out and named on ``err`` as warnings.

    Returns the exit status: 1 when any query failed or was refused (each failure is written to
    ``err`` on one line, and the queries after it still run), else 0. ``fmt``: ``table`` for
    people (long values cut), ``csv`` or ``jsonl`` for other tools (whole values, NULL told from
    the empty string).
    """
    with collect_damage() as damaged:
        con = connect(store)
    for item in damaged:
        err.write(f"warning: left out {item.key}: {item.problem}\n")
    lock_down(con)
    failed = False

    def run(text: str) -> None:
        nonlocal failed
        try:
            for statement in split_queries(con, text):
                _print_result(con, statement, out, fmt)
        except (duckdb.Error, PermissionError) as e:
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


def example_query(name: str) -> str:
    return load_example_sql(name)


def export_tables(store: ObjectStore, day: str, output: Path, progress: Progress = NO_PROGRESS) -> dict[str, int]:
    """``newsroom export``: a day's tables as Parquet for other tools (the store is read first, then
    each table is written; ``progress`` counts the tables)."""
    advance = progress.stage(f"exporting {day}", len(EXPORT_TABLES))
    return export_day(store, day, output, on_table=lambda name, rows: advance(1))
