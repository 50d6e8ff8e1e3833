"""The section classifier's model, read once from package data, and the one function that applies it.

``guess_sections`` is what ingest calls for every new article (``tasks.ingest.article.build_article_row``,
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
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from transforms.embedding import (
    EMBEDDING_DIM,
    EMBEDDING_MODEL,
    EMBEDDING_MODEL_ID,
    EMBEDDING_PACKAGE_VERSION,
    embed_articles,
    is_current_embedding,
)
from transforms.records import ArticleRow
from transforms.sections import (
    LearnedSections,
    SectionModel,
    classify_embeddings,
    empty_learned,
    guess_and_learn,
    learned_from_dict,
    learned_to_dict,
    named_section,
    section_model_from_dict,
)
from warehouse import layout
from warehouse.damage import describe_error, record_damage
from warehouse.errors import ObjectNotFoundError, PreconditionFailedError
from warehouse.store import ObjectStore

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


def load_learned_sections(store: ObjectStore) -> tuple[LearnedSections, str | None]:
    """What the stream taught the section model so far, and the ETag it was read at (None: never
    stored). A stored state that cannot be read is recorded as damage and read as the cold start."""
    model = load_section_model()
    try:
        obj = store.get(layout.LEARNED_SECTIONS_KEY)
    except ObjectNotFoundError:
        return empty_learned(model, EMBEDDING_MODEL_ID), None
    try:
        return learned_from_dict(json.loads(obj.data), model, EMBEDDING_MODEL_ID), obj.etag
    except (ValueError, TypeError, RecursionError) as e:
        record_damage(layout.LEARNED_SECTIONS_KEY, f"corrupt: {describe_error(e)}",
                      "read as the shipped model; replaced by the next run's")
        return empty_learned(model, EMBEDDING_MODEL_ID), obj.etag


def _teach_items(rows: Sequence[ArticleRow], teach: bool) -> list[tuple[str, str | None, Any]]:
    """Each row as ``guess_and_learn`` reads it: its named section only when ``teach``, and only an
    embedding of this release's model."""
    return [(row.language, named_section(row.section, row.categories) if teach else None,
             row.embedding if row.embedding is not None and is_current_embedding(row.embedding_model) else None)
            for row in rows]


def teach_sections(store: ObjectStore, rows: Sequence[ArticleRow], now: datetime) -> tuple[list[ArticleRow], TaughtSections]:
    """Guess the section of a run's new articles with what the stream taught, and fold in those
    whose feed or page names one (``transforms.sections.guess_and_learn``, issue 33).

    Args:
        store: Where the taught state lives.
        rows: The run's new article rows, in arrival order.
        now: The run's instant (a run already folded, rerun after a crash, folds nothing again).

    Returns:
        The rows with ``section_guess`` from the taught model (the cold start's guess where there
        is nothing taught for a language), and what to store after the rows are written
        (:func:`store_taught_sections`).
    """
    model = load_section_model()
    if not rows:  # nothing to guess or teach: the state is not read
        return [], TaughtSections(empty_learned(model, EMBEDDING_MODEL_ID), None, [], now.isoformat())
    learned, etag = load_learned_sections(store)
    run = now.isoformat()
    guesses = guess_and_learn(_teach_items(rows, run not in learned.folded_runs), model, learned)
    out = [row if row.embedding is None else replace(row, section_guess=guess)
           for row, guess in zip(rows, guesses, strict=True)]
    named = [row for row, (_, section, vector) in zip(rows, _teach_items(rows, True), strict=True)
             if section is not None and vector is not None]
    learned.note_run(run)
    return out, TaughtSections(learned, etag, named, run)


@dataclass(frozen=True, slots=True)
class TaughtSections:
    """What a run taught the section model, to store once its rows are written."""

    learned: LearnedSections
    etag: str | None
    rows: list[ArticleRow]
    """The rows that named a section (folded again onto a newer state if another run stored first)."""
    run: str


def store_taught_sections(store: ObjectStore, taught: TaughtSections, attempts: int = 3) -> bool:
    """Store what a run taught, fenced by the ETag it read; when another run stored first, fold
    this run's examples onto that state and try again. Returns whether it was stored (a lost
    state only means those examples taught nothing)."""
    if not taught.rows:
        return True
    learned, etag = taught.learned, taught.etag
    model = load_section_model()
    for _ in range(attempts):
        try:
            store.put(layout.LEARNED_SECTIONS_KEY, json.dumps(learned_to_dict(learned)).encode("utf-8"),
                      if_match=etag, if_none_match=etag is None, content_type="application/json")
            return True
        except PreconditionFailedError:
            learned, etag = load_learned_sections(store)
            guess_and_learn(_teach_items(taught.rows, taught.run not in learned.folded_runs), model, learned)
            learned.note_run(taught.run)
    log.warning("sections_not_taught rows=%d: lost %d conditional puts", len(taught.rows), attempts)
    return False


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
