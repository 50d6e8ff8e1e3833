"""The section classifier's model, read once from package data, and the one function that applies it.

``guess_sections`` is what ingest calls for every new article (``tasks.ingest.pages.build_article_row``,
stored as ``articles.section_guess``) and what ``newsroom classify-sections`` calls for every input
line, so the command scores exactly the pipeline's code path (issue 21). The model is trained by
``scripts/train_section_model.py``; ``transforms.sections`` holds the pure arithmetic and this
module the file read, which ``transforms`` may not do (STYLE §1).

``newsroom classify-sections --input A.jsonl --output P.jsonl`` reads cluster-eval's input format
(``id, title, text, language``; every other key, gold labels included, is ignored and never read)
and writes one ``{"id", "section"}`` line per input line, in input order, ``section`` a canonical
section or null where the classifier abstains.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path

from transforms.embedding import (
    EMBEDDING_DIM,
    EMBEDDING_MODEL,
    EMBEDDING_MODEL_ID,
    EMBEDDING_PACKAGE_VERSION,
    embed_articles,
)
from transforms.sections import SectionModel, classify_embeddings, section_model_from_dict

log = logging.getLogger(__name__)

MODEL_RESOURCE = "data/section_model.json"


@lru_cache(maxsize=1)
def load_section_model() -> SectionModel:
    """The shipped model, read and checked once per process.

    Raises:
        ValueError: The file is not a model for the embedding ingest computes.
    """
    data = json.loads(resources.files("tasks").joinpath(MODEL_RESOURCE).read_text(encoding="utf-8"))
    model = section_model_from_dict(data)
    # The package release too: the weights mean something only for the vectors they were fitted on (issue 33).
    package_version = data["embedding"].get("package_version")
    if model.embedding_model != EMBEDDING_MODEL or model.dim != EMBEDDING_DIM or package_version != EMBEDDING_PACKAGE_VERSION:
        raise ValueError(f"section model {model.version} was fitted on {model.embedding_model} {package_version} "
                         f"({model.dim} dims), ingest embeds with {EMBEDDING_MODEL_ID} ({EMBEDDING_DIM} dims)")
    log.info("section_model_loaded version=%s classes=%d min_probability=%.2f", model.version,
             len(model.classes), model.min_probability)
    return model


def guess_sections(embeddings: Sequence[Sequence[float] | None]) -> list[str | None]:
    """The section each article's text suggests (None where unsure or without an embedding).

    Args:
        embeddings: Each article's embedding of title and lede, as ``embed_articles`` computes it.
    """
    return classify_embeddings(embeddings, load_section_model())


def classify_sections_file(input_path: Path, output_path: Path) -> int:
    """Run ``guess_sections`` over a cluster-eval JSONL file; returns the lines written.

    ``id`` is echoed as written (a number stays a number) so a scorer joins on it as it reads it.
    """
    rows: list[dict[str, object]] = []
    with input_path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                raw = json.loads(line)
                rows.append({k: raw.get(k) for k in ("id", "title", "text", "language")})
    items = [(str(r["title"] or ""), str(r["text"] or ""), str(r["language"] or "und")) for r in rows]
    sections = guess_sections(embed_articles(items))
    with output_path.open("w", encoding="utf-8") as out:
        for row, section in zip(rows, sections, strict=True):
            out.write(json.dumps({"id": row["id"], "section": section}, ensure_ascii=False) + "\n")
    return len(rows)
