"""Load what the first pipeline cycle would otherwise load on its critical path.

The sentence-embedding model (about 130 MB of weights) and the seed-vocabulary section classifier
are built once per process on first use. A long-lived process that knows it will run cycles (the
live demo's pipeline, issue 18) loads them while it waits for the Prefect server, so the first
cycle, and with it the first page, does not wait for them.
"""

from __future__ import annotations

from transforms.embedding import embed_texts
from transforms.sections import classify_texts


def warm_up_pipeline() -> None:
    """Load the embedding model and the section classifier into this process."""
    embed_texts(["Parliament passes the budget after a night of debate"])
    classify_texts(["Parliament passes the budget after a night of debate"])
