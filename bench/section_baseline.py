"""The section fallback before issue 21 (a seed-word TF-IDF classifier), for before/after figures.

Usage::

    .venv/bin/python -m bench.section_baseline --input A.jsonl --output P.jsonl [--commit 47422e0]

Loads ``transforms/sections.py`` as it was at ``--commit`` (``git show``) and writes the same
``{"id", "section"}`` lines as ``newsroom classify-sections``, from what that code read at rank time:
``title + " " + snippet`` (the first 200 characters of the text). Score the file with
``python -m bench.section_eval --predictions P.jsonl``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.harness import REPO

BEFORE = "47422e0"
"""The last commit with the seed-word classifier."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--commit", default=BEFORE)
    args = parser.parse_args(argv)
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{args.commit}:transforms/sections.py"],
                            capture_output=True, text=True, check=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sections_before.py"
        path.write_text(source, encoding="utf-8")
        spec = importlib.util.spec_from_file_location("sections_before", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    with args.input.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    texts = [f"{r.get('title') or ''} {str(r.get('text') or '')[:200]}" for r in rows]
    guesses = module.classify_texts(texts)
    with args.output.open("w", encoding="utf-8") as out:
        for row, guess in zip(rows, guesses, strict=True):
            out.write(json.dumps({"id": row["id"], "section": guess}, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
