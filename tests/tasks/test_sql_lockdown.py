"""``newsroom sql`` stays inside the store (issue 16): after the views are registered, DuckDB has no
file, network or extension access and its configuration is locked, and only queries run. Each
escape the attack run found is refused with a one-line error and exit 1, while every documented
query (README, docs/*.md, ``--example``) still returns rows, on a local and an S3 store."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from store_faults import World, damage

from tasks.sql import run_sql
from warehouse import layout
from warehouse.duck import EXAMPLE_QUERIES, load_example_sql
from warehouse.store import LocalStore

pytestmark = [pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_QUOTED = re.compile(r'newsroom sql (?:--format \w+ )?"([^"]+)"')
_PIPED = re.compile(r'echo "([^"]+)" \| newsroom sql')
_EXAMPLE = re.compile(r"newsroom sql --example (\w+)")


def documented_queries() -> list[tuple[str, str]]:
    """Every query the docs show (``newsroom sql "..."``, ``echo "..." | newsroom sql``), by where it is,
    and every ``--example``."""
    found: dict[str, str] = {}
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for pattern in (_QUOTED, _PIPED):
            for query in pattern.findall(text):
                found.setdefault(query, path.name)
        for name in _EXAMPLE.findall(text):
            if name in EXAMPLE_QUERIES:
                found.setdefault(load_example_sql(name), f"{path.name} --example {name}")
    for name in EXAMPLE_QUERIES:
        found.setdefault(load_example_sql(name), f"--example {name}")
    return sorted((where, query) for query, where in found.items())


def _run(store: object, query: str | None, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run_sql(store, query, out=out, err=err, inp=io.StringIO(stdin))  # type: ignore[arg-type]
    return status, out.getvalue(), err.getvalue()


def test_the_docs_show_queries() -> None:
    places = {where.split()[0] for where, _ in documented_queries()}
    assert {"README.md", "queries.md"} <= places
    assert len(documented_queries()) >= len(EXAMPLE_QUERIES) + 5


@pytest.mark.slow
@pytest.mark.parametrize("where,query", documented_queries(), ids=lambda v: v.split(" --")[0][:40])
def test_every_documented_query_returns_rows_on_a_locked_down_connection(pipeline_world: World, where: str,
                                                                         query: str) -> None:
    status, out, err = _run(pipeline_world.source, query)
    assert status == 0, err
    assert not err
    rows = out.strip().splitlines()[-1]
    assert rows.startswith("(") and rows != "(0 rows)", (where, out[-300:])


ESCAPES = {
    "read_csv": "select * from read_csv('/etc/passwd')",
    "read_text": "select content from read_text('/etc/passwd')",
    "glob": "select * from glob('/etc/*')",
    "copy_to_store": "copy (select 1 as hijacked) to '{store}/pages/en-GB/top/latest.json' (format json)",
    "copy_to_file": "copy (select * from publishers) to '{tmp}/publishers.csv'",
    "attach": "attach '{tmp}/other.duckdb' as other",
    "install": "install httpfs",
    "load": "load json",
    "create": "create table loot as select 1 as a",
    "create_macro": "create macro leak() as 1",
    "set_external_access": "set enable_external_access = true",
    "set_other": "set threads = 1",
    "pragma": "pragma database_list",
    "export": "export database '{tmp}/dump'",
    "query_then_copy": "select 42 as answer; copy (select 1) to '{tmp}/after.csv'",
    # explain analyze runs what it explains (issue 32): refused unless that is a query
    "explain_analyze_create": "explain analyze create table loot as select * from range(1000000000)",
    "explain_create_view": "explain create view articles as select 1 as a",
    "explain_drop_view": "/* why */ EXPLAIN ANALYZE drop view articles",
    "explain_macro": "explain (format json) create macro leak() as 1",
    "explain_copy": "explain analyze copy (select 1) to '{tmp}/after.csv'",
    "explain_set": "explain set threads = 1",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_each_escape_is_refused_with_one_line(tmp_path: Path, name: str) -> None:
    store = LocalStore(tmp_path / "store")
    pointer = "pages/en-GB/top/latest.json"
    store.put(pointer, b'{"version": 1}')
    query = ESCAPES[name].format(store=store.root, tmp=tmp_path)
    status, out, err = _run(store, query)
    assert status == 1
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert out == ""  # refused whole, before any statement of it runs
    assert store.get(pointer).data == b'{"version": 1}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]  # nothing written beside the store


def test_several_statements_print_every_result(tmp_path: Path) -> None:
    status, out, err = _run(LocalStore(tmp_path / "store"), "select 1 as first; select 2 as second; select 3 as third")
    assert status == 0, err
    assert [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0] in
            ("first", "second", "third")] == ["first", "second", "third"]
    assert out.count("(1 rows)") == 3


def test_the_command_line_refuses_an_escape_without_a_traceback(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "flows.cli", "sql", "select * from read_csv('/etc/passwd')"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO),
                               "NEWSROOM_WAREHOUSE_ROOT": str(tmp_path / "store")})
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "root:" not in done.stdout + done.stderr


@pytest.mark.slow
def test_sql_works_on_a_store_with_damaged_objects(pipeline_world: World) -> None:
    store, built = pipeline_world.copy(), pipeline_world.built
    damage(store, built.keys["article_segment"], "corrupt")
    damage(store, built.keys["pointer"], "corrupt")
    # Each query reads only the tables it names (issue 28), and names what it left out of them.
    status, out, err = _run(store, "select 1 as one; select count(*) > 0 as has_pages from pages; "
                                   "select count(*) > 0 as has_articles from articles")
    assert status == 0, err
    assert "(1 rows)" in out and "true" in out.lower()
    warned = [line for line in err.splitlines() if line.startswith("warning: left out ")]
    assert {built.keys["article_segment"], layout.page_pointer_key(built.edition, "top")} <= \
        {line.split()[3].rstrip(":") for line in warned}, err


def test_explain_of_a_query_still_runs(tmp_path: Path) -> None:
    status, out, err = _run(LocalStore(tmp_path / "store"), "explain analyze select count(*) from articles")
    assert status == 0, err
    assert "analyzed_plan" in out


def test_a_query_past_its_time_limit_is_stopped_with_a_clear_message(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    queries = io.StringIO("select count(*) from range(100000000000) as a;\nselect 7 as after;\n")
    status = run_sql(LocalStore(tmp_path / "store"), None, out=out, err=err, inp=queries, timeout_seconds=0.5)
    assert time.monotonic() - started < 60
    assert status == 1
    assert err.getvalue().startswith("error: the query ran past its time limit of 0.5 s") and \
        "NEWSROOM_WAREHOUSE_SQL_TIMEOUT_SECONDS" in err.getvalue()
    assert "after" in out.getvalue()  # the queries after it still run


def test_the_memory_limit_holds_and_cannot_be_lifted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.settings import forget_environment_settings

    monkeypatch.setenv("NEWSROOM_WAREHOUSE_QUERY_MEMORY_LIMIT", "300MB")
    forget_environment_settings()
    store = LocalStore(tmp_path / "store")
    status, out, err = _run(store, "select current_setting('memory_limit') as limit_now")
    assert status == 0, err
    assert "286.1 MiB" in out or "300.0 MB" in out, out
    status, out, err = _run(store, "select current_setting('memory_limit'); set memory_limit = '20GB'")
    assert status == 1 and "not a query" in err
