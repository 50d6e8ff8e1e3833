"""Where the tests find ``../shared/corpus`` (the real data they run against), defined once.

``NEWSROOM_CORPUS_DIR`` if set (as for ``newsroom demo``); else the ``shared/corpus`` folder beside
the checkout, where the project keeps it; else the project machines' ``/work/shared/corpus``, so a
clone made anywhere (``git clone . $(mktemp -d)``) still finds it.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _corpus_dir() -> Path:
    configured = os.environ.get("NEWSROOM_CORPUS_DIR")
    if configured:
        return Path(configured)
    beside = REPO.parent / "shared" / "corpus"
    return beside if beside.is_dir() else Path("/work/shared/corpus")


CORPUS = _corpus_dir()
CLUSTERING_CORPORA = [CORPUS / "clustering" / "ecbplus-dev.jsonl", CORPUS / "clustering" / "mmds-dev.jsonl"]
