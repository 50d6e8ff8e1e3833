"""The house rules that keep the code readable, measured on the tree as it is (issue 34).

- untyped data (``dict[str, Any]``) stays rare in the product packages;
- no function runs past 80 lines;
- a module past 600 lines says in its docstring why it is one room;
- every module of tasks/ has its place in the layers contract of pyproject.toml.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ("newsroom", "flows", "tasks", "transforms", "warehouse", "serving", "websub")
MAX_UNTYPED = 60
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600
ONE_ROOM = re.compile(r"one room|one module on purpose", re.IGNORECASE)


def _product_files() -> list[Path]:
    return sorted(p for package in PRODUCT for p in (REPO / package).rglob("*.py"))


def test_untyped_dicts_stay_rare_in_the_product_packages() -> None:
    found = [f"{p.relative_to(REPO)}:{n}" for p in _product_files()
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "dict[str, Any]" in line]
    assert len(found) <= MAX_UNTYPED, found


def test_no_function_is_longer_than_eighty_lines() -> None:
    long = []
    for path in _product_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long


def test_a_module_past_six_hundred_lines_says_why_it_is_one_room() -> None:
    unexplained = []
    for path in _product_files():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_MODULE_LINES and not ONE_ROOM.search(ast.get_docstring(ast.parse(text)) or ""):
            unexplained.append(str(path.relative_to(REPO)))
    assert not unexplained, unexplained


def test_every_module_of_tasks_has_a_layer() -> None:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers" and c["layers"][0].startswith("tasks."))
    placed = {name.strip() for layer in layers for name in re.split(r"[|:]", layer)}
    modules = {f"tasks.{p.stem if p.is_file() else p.name}" for p in (REPO / "tasks").iterdir()
               if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()}
    assert modules - placed == set(), f"tasks modules missing from the layers contract: {sorted(modules - placed)}"
    assert placed - modules == set(), f"the layers contract names modules that are gone: {sorted(placed - modules)}"
