"""``newsroom sql``: exit status, and output other tools can read whole."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from tasks.sql import run_sql
from warehouse import layout
from warehouse.schemas import PUBLISHERS_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import write_table

REPO = Path(__file__).resolve().parents[2]
LONG_NAME = "The " + "Very " * 40 + "Long Gazette | of record"


def _store(tmp_path: Path) -> LocalStore:
    store = LocalStore(tmp_path / "store")
    rows = [{"publisher_id": "p1", "name": LONG_NAME, "domain": "", "region": "US", "language": "en", "tier": 1,
             "authority": 0.5, "is_paywalled": False, "is_opted_out": False},
            {"publisher_id": "p2", "name": None, "domain": "b.example", "region": "US", "language": "en", "tier": 2,
             "authority": 0.25, "is_paywalled": True, "is_opted_out": False}]
    write_table(store, layout.PUBLISHERS_KEY, pa.Table.from_pylist(rows, PUBLISHERS_SCHEMA), PUBLISHERS_SCHEMA)
    return store


QUERY = "select publisher_id, name, domain, authority from publishers order by publisher_id"


def test_csv_and_jsonl_keep_values_whole_and_tell_null_from_empty(tmp_path: Path) -> None:
    store = _store(tmp_path)
    out = io.StringIO()
    assert run_sql(store, QUERY, out=out, fmt="csv") == 0
    header, first, second = list(csv.reader(io.StringIO(out.getvalue())))
    assert header == ["publisher_id", "name", "domain", "authority"]
    assert first == ["p1", LONG_NAME, "", "0.5"] and second[:2] == ["p2", ""]
    assert '"p1","' + LONG_NAME + '",""' in out.getvalue() and '"p2",,' in out.getvalue()  # '' quoted, NULL bare

    out = io.StringIO()
    assert run_sql(store, QUERY, out=out, fmt="jsonl") == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert rows == [{"publisher_id": "p1", "name": LONG_NAME, "domain": "", "authority": 0.5},
                    {"publisher_id": "p2", "name": None, "domain": "b.example", "authority": 0.25}]


def test_the_table_marks_cut_values_and_nulls(tmp_path: Path) -> None:
    out = io.StringIO()
    assert run_sql(_store(tmp_path), QUERY, out=out) == 0
    lines = out.getvalue().splitlines()
    assert "…" in lines[2] and LONG_NAME not in lines[2]
    assert "| NULL" in lines[3] and lines[-1] == "(2 rows)"


def test_a_failed_query_exits_1_and_the_rest_still_run(tmp_path: Path) -> None:
    store = _store(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    status = run_sql(store, None, out=out, err=err,
                     inp=io.StringIO("select * from nope;\nselect count(*) as n from publishers;\n"))
    assert status == 1
    assert "nope" in err.getvalue() and "nope" not in out.getvalue()
    assert out.getvalue().splitlines()[2].strip() == "2"

    done = subprocess.run([sys.executable, "-m", "flows.cli", "sql", "select * from nope"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO), "NEWSROOM_WAREHOUSE_ROOT": str(tmp_path / "store")},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "error:" in done.stderr
