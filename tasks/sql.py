"""``newsroom sql``: DuckDB over every table, for analysts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import duckdb

from warehouse.duck import TABLE_VIEWS, connect, export_day, load_example_sql
from warehouse.store import ObjectStore


def _print_result(con: duckdb.DuckDBPyConnection, query: str, out: TextIO) -> None:
    relation = con.sql(query)
    if relation is None:
        return
    out.write(_format(relation))
    out.write("\n")


def _format(relation: duckdb.DuckDBPyRelation) -> str:
    columns = relation.columns
    rows = relation.fetchall()
    cells = [[str(c) for c in columns]] + [["" if v is None else str(v)[:80] for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    lines.append(f"({len(rows)} rows)")
    return "\n".join(lines)


def run_sql(store: ObjectStore, query: str | None, out: TextIO = sys.stdout, inp: TextIO = sys.stdin) -> int:
    """Run one query, or read queries from standard input (one per ``;``) when none is given."""
    con = connect(store)
    try:
        if query:
            _print_result(con, query, out)
            return 0
        if inp.isatty():
            out.write(f"newsroom sql: views {', '.join(TABLE_VIEWS)}. End each query with ';', Ctrl-D to quit.\n")
        buffer = ""
        for line in inp:
            buffer += line
            if buffer.strip().endswith(";"):
                try:
                    _print_result(con, buffer, out)
                except duckdb.Error as e:
                    out.write(f"error: {e}\n")
                buffer = ""
        if buffer.strip():
            _print_result(con, buffer, out)
        return 0
    finally:
        con.close()


def example_query(name: str) -> str:
    return load_example_sql(name)


def export_tables(store: ObjectStore, day: str, output: Path) -> dict[str, int]:
    """``newsroom export``: a day's tables as Parquet for other tools."""
    return export_day(store, day, output)
