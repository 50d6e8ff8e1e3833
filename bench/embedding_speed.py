"""Embedding throughput: USE multilingual v3 (``transforms.embedding``) on the corpus's articles.

Usage::

    taskset -c 0,1 .venv/bin/python bench/embedding_speed.py [--corpus-dir ../shared/corpus/clustering]

Embeds the title and lede (``embedding_text``) of every ECB+ and MMDS dev article, the way
ingestion does (one article per call, from the fetch fan-out) and in batches of 64 (as
``newsroom cluster-eval`` does), after one warm-up call that loads the weights. The writer's
speed (bench/cluster_speed.py) excludes this: embeddings are computed at ingest, once per article.
The baseline in the same run is the rest of the per-article feature work, ``features_from_text``
(tokens, terms, entities, MinHash), on the same articles.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transforms.embedding import embed_texts, embedding_text  # noqa: E402
from transforms.features import features_from_text  # noqa: E402

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "clustering"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-dir", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args(argv)
    rows = []
    for name in ("ecbplus-dev.jsonl", "mmds-dev.jsonl"):
        with (args.corpus_dir / name).open(encoding="utf-8") as fh:
            rows.extend(json.loads(line) for line in fh if line.strip())
    texts = [embedding_text(r["title"], r["text"], r["language"]) for r in rows]
    embed_texts(["warm up"])
    start = time.perf_counter()
    for text in texts:
        embed_texts([text])
    single = time.perf_counter() - start
    start = time.perf_counter()
    embed_texts(texts, batch_size=64)
    batched = time.perf_counter() - start
    now = datetime(2026, 1, 1, tzinfo=UTC)
    start = time.perf_counter()
    for r in rows:
        features_from_text(str(r["id"]), r["title"], r["text"], r["language"], now)
    features = time.perf_counter() - start
    n = len(texts)
    words = sum(len(t.split()) for t in texts) / n
    print(f"{n} articles (en, ms, zh), {words:.0f} whitespace tokens per embedded text")
    print(f"embedding, one per call:  {n / single:7.1f} articles/s ({1000 * single / n:.1f} ms each)")
    print(f"embedding, batches of 64: {n / batched:7.1f} articles/s ({1000 * batched / n:.1f} ms each)")
    print(f"baseline, features_from_text (terms, entities, MinHash): {n / features:7.1f} articles/s "
          f"({1000 * features / n:.1f} ms each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
