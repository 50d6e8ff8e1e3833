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
