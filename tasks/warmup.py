"""Load what the first pipeline cycle would otherwise load on its critical path.

The sentence-embedding model (about 130 MB of weights) and the section classifier's model are
loaded once per process on first use. A long-lived process that knows it will run cycles (the
live demo's pipeline, issue 18) loads them while it waits for the Prefect server, so the first
cycle, and with it the first page, does not wait for them.
"""

from __future__ import annotations

from tasks.sections import guess_sections, load_section_model
from transforms.embedding import embed_articles


def warm_up_pipeline() -> None:
    """Load the embedding model and the section model into this process."""
    load_section_model()
    guess_sections(embed_articles([("Parliament passes the budget", "The vote came after a night of debate.", "en")]))
