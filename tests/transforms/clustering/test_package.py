"""transforms/clustering as a package: its public names, and what its modules may not do."""

from __future__ import annotations

import ast
from pathlib import Path

import transforms
import transforms.clustering as clustering

_TRANSFORMS = Path(transforms.__file__).resolve().parent


def test_the_public_names_are_importable_from_the_package() -> None:
    for name in clustering.__all__:
        assert getattr(clustering, name) is not None, name
    assert clustering.LanguageClusterer.__module__ == "transforms.clustering.clusterer"


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_no_transform_switches_the_garbage_collector() -> None:
    # The writer task pauses and freezes the collector around what it loads (tasks/writer/run.py);
    # pure code never changes the interpreter's state (issue 17).
    offenders = [str(p.relative_to(_TRANSFORMS)) for p in sorted(_TRANSFORMS.rglob("*.py")) if "gc" in _imported_modules(p)]
    assert offenders == []


def test_lower_modules_never_import_the_clusterer_at_run_time() -> None:
    # The parts own their data and know nothing of the clusterer that orchestrates them; edits and
    # the state codec name it for type checking only.
    for name in ("params", "ids", "story", "idf", "term_index", "copies", "scoring", "state", "edits"):
        tree = ast.parse((_TRANSFORMS / "clustering" / f"{name}.py").read_text(encoding="utf-8"))
        top_level = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
        assert "transforms.clustering.clusterer" not in top_level, name
        assert "transforms.clustering" not in top_level, name
