"""Which of a stream's signals make stories (issue 14): ablations of the clusterer on the four dev files.

Usage::

    .venv/bin/python -m bench.story_signals [--corpus-dir /work/shared/corpus/clustering] [--orders 5]
        [--pairs]

Computes each dev file's features once (as ``newsroom cluster-eval`` does: ``published_at`` order
where given, the sentence embedding of title and lede), then runs ``cluster_and_repair`` (the
writer's and the repair pass's code) under each variant of the parameters below and scores it
(BCubed). The untimed files (ECB+ without times, MMDS) are also run in ``--orders - 1`` seeded
shuffles of their lines, with synthetic times one second apart as ``cluster-eval`` gives them,
because their held-out halves come in another order: their precision is reported as the mean and
the worst over orders. MMDS is scored on its cross-language groups (``linked_id``).

Variants: the shipped parameters, then each new signal taken out alone, then the time signals
swept. ``--pairs`` also prints how well single signals rank same-story against other-story pairs
of Google News headlines (ROC AUC) and the best BCubed F1 an offline average-link clustering of
all the headlines reaches at precision >= 0.90 with the cut chosen by the gold labels (an oracle).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import numpy as np

from bench.bcubed import ClusterScore, read_gold, score_partition
from tasks.cluster_eval import SYNTHETIC_EPOCH, read_eval_articles
from transforms.clustering import ClusterParams, RepairParams, cluster_and_repair, link_languages
from transforms.features import ArticleFeatures

DEFAULT_CORPUS = Path("/work/shared/corpus/clustering")
FILES = {
    "ecbplus": "ecbplus-dev.jsonl",
    "ecbplus-timed": "ecbplus-dev-timed.jsonl",
    "gnews": "gnews2014-dev.jsonl",
    "mmds": "mmds-dev.jsonl",
}
UNTIMED = ("ecbplus", "mmds")

VARIANTS: list[tuple[str, ClusterParams, RepairParams]] = [
    ("shipped", ClusterParams(), RepairParams()),
    ("no embedding for bodies", ClusterParams(embedding_weight=0.0), RepairParams()),
    ("no embedding for headlines", ClusterParams(headline_embedding_weight=0.0), RepairParams()),
    ("no adoption", ClusterParams(), RepairParams(adopt=False)),
    ("splits without the separation bar, margin 0.10",
     ClusterParams(), RepairParams(split_min_separation=0.0, split_margin=0.10)),
    ("splits with 3 sources a half", ClusterParams(), RepairParams(split_min_sources=3)),
    ("body embedding offset 0.5", ClusterParams(embedding_offset=0.5), RepairParams()),
    ("headline embedding 1.5 / 0.35", ClusterParams(headline_embedding_offset=0.35), RepairParams()),
    ("headline embedding 2.0 / 0.35", ClusterParams(headline_embedding_weight=2.0, headline_embedding_offset=0.35),
     RepairParams()),
    ("no time penalty", ClusterParams(time_penalty_per_hour=0.0), RepairParams()),
    ("time penalty 0.01 / h", ClusterParams(time_penalty_per_hour=0.01), RepairParams()),
    ("active window 24 h", ClusterParams(active_window_hours=24.0), RepairParams()),
    ("repair lookback 48 h", ClusterParams(), RepairParams(lookback_hours=48.0, merge_gap_hours=48.0)),
]


def _orders(articles: list[ArticleFeatures], count: int) -> list[list[ArticleFeatures]]:
    """The file order and ``count - 1`` shuffles, each with synthetic times one second apart."""
    out = [articles]
    for seed in range(1, count):
        shuffled = list(articles)
        random.Random(seed).shuffle(shuffled)
        out.append([dataclasses.replace(f, first_seen_at=SYNTHETIC_EPOCH + timedelta(seconds=i))
                    for i, f in enumerate(shuffled)])
    return out


def _score(name: str, articles: Sequence[ArticleFeatures], gold: dict[str, str], params: ClusterParams,
           repair: RepairParams) -> ClusterScore:
    assignments = cluster_and_repair(articles, params, repair)
    pred = {a.article_id: a.story_id for a in assignments}
    if name == "mmds":
        links = link_languages(articles, assignments, params)
        pred = {aid: links.get(sid) or sid for aid, sid in pred.items()}
    return score_partition(gold, pred)


def _pairs(articles: list[ArticleFeatures], gold: dict[str, str]) -> None:
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform
    from sklearn.metrics import roc_auc_score

    ids = [f.article_id for f in articles]
    events = np.array([gold[i] for i in ids])
    df: dict[str, int] = {}
    for f in articles:
        for t in f.terms:
            df[t] = df.get(t, 0) + 1
    vocab = {t: i for i, t in enumerate(df)}
    terms = np.zeros((len(articles), len(vocab)))
    for row, f in enumerate(articles):
        for t, w in zip(f.terms, f.term_weights, strict=True):
            terms[row, vocab[t]] = w * math.log((len(articles) + 1) / (df[t] + 1))
    terms /= np.maximum(np.linalg.norm(terms, axis=1, keepdims=True), 1e-12)
    embeddings = np.array([f.embedding for f in articles])
    upper = np.triu_indices(len(articles), 1)
    same = (events[:, None] == events[None, :])[upper]
    for label, sim in [("headline terms (IDF-weighted)", terms @ terms.T), ("headline embedding", embeddings @ embeddings.T),
                       ("0.5 terms + 0.5 embedding", 0.5 * (terms @ terms.T) + 0.5 * (embeddings @ embeddings.T))]:
        distance = np.clip(1.0 - sim, 0.0, None)
        np.fill_diagonal(distance, 0.0)
        tree = linkage(squareform(distance, checks=False), "average")
        best: ClusterScore | None = None
        for cut in np.linspace(0.2, 0.99, 40):
            labels = fcluster(tree, t=cut, criterion="distance")
            s = score_partition(gold, {i: str(x) for i, x in zip(ids, labels, strict=True)})
            if s.bcubed_precision >= 0.90 and (best is None or s.bcubed_f1 > best.bcubed_f1):
                best = s
        bound = "none" if best is None else f"F1 {best.bcubed_f1:.3f} (P {best.bcubed_precision:.3f}, R {best.bcubed_recall:.3f})"
        print(f"  {label:32} ROC AUC {roc_auc_score(same, sim[upper]):.3f}; oracle average link at P>=0.90: {bound}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-dir", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--orders", type=int, default=5, help="orders of the untimed files (1 = file order)")
    parser.add_argument("--pairs", action="store_true", help="also rank Google News headline pairs by single signals")
    args = parser.parse_args(argv)
    data = {name: (read_eval_articles(args.corpus_dir / path), read_gold(args.corpus_dir / path))
            for name, path in FILES.items()}
    if args.pairs:
        print("Google News dev, every pair of headlines:")
        _pairs(*data["gnews"])
    runs = {name: _orders(articles, args.orders if name in UNTIMED else 1) for name, (articles, _) in data.items()}
    print(f"{'variant':48} {'ECB+ untimed P mean/min, F1':28} {'ECB+ timed P R F1':20} {'GNews P R F1':20} "
          f"{'MMDS linked F1 mean':19}")
    for label, params, repair in VARIANTS:
        start = time.perf_counter()
        cells = []
        for name in FILES:
            scores = [_score(name, articles, data[name][1], params, repair) for articles in runs[name]]
            p = [s.bcubed_precision for s in scores]
            f1 = [s.bcubed_f1 for s in scores]
            if name == "ecbplus":
                cells.append(f"{np.mean(p):.3f}/{min(p):.3f}, {np.mean(f1):.3f}")
            elif name == "mmds":
                cells.append(f"{np.mean(f1):.3f} (P {np.mean(p):.3f})")
            else:
                cells.append(f"{p[0]:.3f} {scores[0].bcubed_recall:.3f} {f1[0]:.3f}")
        print(f"{label:48} {cells[0]:28} {cells[1]:20} {cells[2]:20} {cells[3]:19} ({time.perf_counter() - start:.0f} s)",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
