"""serving must stay importable without the pipeline: no prefect, tasks, flows or transforms."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FORBIDDEN = ("prefect", "tasks", "flows", "transforms", "replay")

_PROBE = """
import json, sys
from pathlib import Path
import serving.app
from warehouse.store import LocalStore
serving.app.create_app(LocalStore(Path(sys.argv[1])))
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {forbidden!r})))
"""


def test_serving_app_imports_no_pipeline_module(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE.format(forbidden=set(FORBIDDEN)), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )

    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
