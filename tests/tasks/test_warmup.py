"""The live demo's pipeline loads its models before the first cycle (issue 18)."""

from __future__ import annotations

import transforms.embedding as embedding
from tasks.sections import load_section_model
from tasks.warmup import warm_up_pipeline


def test_warm_up_loads_the_embedding_and_section_models() -> None:
    load_section_model.cache_clear()
    warm_up_pipeline()
    assert embedding._model is not None
    assert load_section_model.cache_info().currsize == 1
