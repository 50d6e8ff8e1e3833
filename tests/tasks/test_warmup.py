"""The live demo's pipeline loads its models before the first cycle (issue 18), in its article
workers when it has them (issue 32)."""

from __future__ import annotations

import transforms.embedding as embedding
from tasks.ingest.article import ARTICLE_WORK
from tasks.ingest.budget import article_workers, close_article_workers
from tasks.sections import load_section_model
from tasks.settings import IngestSettings
from tasks.warmup import warm_up_pipeline


def test_warm_up_loads_the_embedding_and_section_models() -> None:
    load_section_model.cache_clear()
    warm_up_pipeline(IngestSettings(article_workers=0))  # type: ignore[call-arg]
    assert embedding._model is not None
    assert load_section_model.cache_info().currsize == 1


def test_warm_up_readies_the_article_workers_which_hold_the_models() -> None:
    settings = IngestSettings(article_workers=1)  # type: ignore[call-arg]
    try:
        warm_up_pipeline(settings)
        pool = article_workers(ARTICLE_WORK, settings)
        assert pool is not None and all(slot._ready for slot in pool._slots)  # said ready: the models are loaded
    finally:
        close_article_workers()
