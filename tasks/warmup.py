"""Load what the first pipeline cycle would otherwise load on its critical path.

The sentence-embedding model (about 130 MB of weights) and the section classifier's model are
loaded once per process on first use. A long-lived process that knows it will run cycles (the
live demo's pipeline, issue 18) loads them while it waits for the Prefect server, so the first
cycle, and with it the first page, does not wait for them. With article workers (issue 32) it is
they that hold the models: they are started and made ready instead, and this process loads none.
"""

from __future__ import annotations

from tasks.ingest.article import ARTICLE_WORK
from tasks.ingest.budget import article_workers
from tasks.sections import guess_sections, load_section_model
from tasks.settings import IngestSettings, get_ingest_settings
from transforms.embedding import embed_articles


def warm_up_pipeline(settings: IngestSettings | None = None) -> None:
    """Start this process's article workers and wait until they have loaded the models; without
    workers (``article_workers`` 0), load the embedding and section models into this process."""
    settings = settings or get_ingest_settings()
    workers = article_workers(ARTICLE_WORK, settings)
    if workers is not None:
        workers.warm_up()
        return
    load_section_model()
    guess_sections(embed_articles([("Parliament passes the budget", "The vote came after a night of debate.", "en")]))
