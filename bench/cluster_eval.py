"""Story clustering benchmark: newsroom's clusterer against an online TF-IDF baseline.

Usage::

    .venv/bin/python bench/cluster_eval.py [--corpus-dir /work/shared/corpus/clustering] [--orders 3]
        [--files ecbplus mmds ecbplus-timed gnews2014]

For each dev file (ECB+ and MMDS), runs ``tasks.cluster_eval.run_cluster_eval`` (the same code
as ``newsroom cluster-eval``) and a baseline: scikit-learn ``TfidfVectorizer`` fitted on the
whole batch, then greedy online assignment of each article, in input order, to the most
similar story centroid if the cosine reaches a threshold, else a new story. The baseline's
threshold is swept and its best BCubed F1 reported (an oracle choice, so a generous baseline).

``--orders N`` also reruns newsroom on N-1 seeded shuffles of the input, because the held-out
files come in another order: the mean and the worst F1 over orders are printed.

Scores: ECB+ on ``story_id`` (gold ``event``); MMDS on ``linked_id`` falling back to
``story_id`` (cross-language groups), and on ``story_id`` alone for reference.

``--files`` picks the dev files (default ECB+ and MMDS; ``ecbplus-timed`` and ``gnews2014`` are the
other two). The last line is every figure as one JSON object (bench/headline.py reads it).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bcubed import ClusterScore, read_gold, read_prediction, score_partition  # noqa: E402
from tasks.cluster_eval import run_cluster_eval  # noqa: E402
from tasks.progress import terminal_progress  # noqa: E402

DEFAULT_CORPUS = Path("/work/shared/corpus/clustering")
DEV_FILES = {"ecbplus": "ecbplus-dev.jsonl", "mmds": "mmds-dev.jsonl", "ecbplus-timed": "ecbplus-dev-timed.jsonl",
             "gnews2014": "gnews2014-dev.jsonl"}
BASELINE_THRESHOLDS = [round(0.05 * i, 2) for i in range(2, 17)]


def _read_rows(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def baseline_clusters(rows: list[dict[str, object]], threshold: float,
                      matrix: sparse.csr_matrix | None = None) -> dict[str, str]:
    """Online TF-IDF baseline: greedy assignment to the best centroid at or above ``threshold``.

    ``matrix`` is :func:`baseline_matrix` of ``rows``, fitted once for a whole threshold sweep.
    """
    if matrix is None:
        matrix = baseline_matrix(rows)
    out: dict[str, str] = {}
    by_language: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_language.setdefault(str(r["language"]), []).append(i)
    for language, idx in by_language.items():
        # Centroid sums as rows of one array, scored against each article at once (the same
        # cosines as one dot product per centroid, at the cost of one matrix-vector product).
        sums = np.zeros((len(idx), matrix.shape[1]))
        norms = np.zeros(len(idx))
        count = 0
        for i in idx:
            vec = matrix[i].toarray().ravel()
            if count:
                with np.errstate(divide="ignore", invalid="ignore"):
                    scores = np.where(norms[:count] > 0, sums[:count] @ vec / norms[:count], 0.0)
                best = int(np.argmax(scores))
                best_score = float(scores[best])
            else:
                best, best_score = -1, -1.0
            if best >= 0 and best_score >= threshold:
                sums[best] += vec
                norms[best] = np.linalg.norm(sums[best])
                out[str(rows[i]["id"])] = f"{language}-{best}"
            else:
                sums[count] = vec
                norms[count] = np.linalg.norm(vec)
                out[str(rows[i]["id"])] = f"{language}-{count}"
                count += 1
    return out


def baseline_matrix(rows: list[dict[str, object]]) -> sparse.csr_matrix:
    """The baseline's TF-IDF of title and text, fitted on the whole batch."""
    texts = [f"{r['title']}\n{r['text']}" for r in rows]
    analyzer = "char_wb" if any(r["language"] == "zh" for r in rows) else "word"
    vectorizer = TfidfVectorizer(
        sublinear_tf=True,
        analyzer=analyzer,
        ngram_range=(2, 3) if analyzer == "char_wb" else (1, 1),
        stop_words=None,
        min_df=1,
    )
    return vectorizer.fit_transform(texts)


def _run_newsroom(path: Path, order_seed: int, workdir: Path) -> tuple[ClusterScore, ClusterScore, float]:
    rows = _read_rows(path)
    if order_seed:
        random.Random(order_seed).shuffle(rows)
    shuffled = workdir / f"in-{order_seed}.jsonl"
    shuffled.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    pred = workdir / f"out-{order_seed}.jsonl"
    start = time.perf_counter()
    run_cluster_eval(shuffled, pred)
    elapsed = time.perf_counter() - start
    gold = read_gold(path)
    return (
        score_partition(gold, read_prediction(pred, "event")),
        score_partition(gold, read_prediction(pred, "linked")),
        elapsed,
    )


def _fmt(s: ClusterScore) -> str:
    return (
        f"{s.bcubed_precision:6.3f} {s.bcubed_recall:6.3f} {s.bcubed_f1:6.3f} "
        f"{s.pairwise_precision:6.3f} {s.pairwise_recall:6.3f} {s.pairwise_f1:6.3f} "
        f"{s.predicted_clusters:5d} {s.gold_clusters:5d}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-dir", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument(
        "--orders", type=int, default=3, help="input orders to run newsroom on (1 = file order)"
    )
    parser.add_argument("--files", nargs="+", choices=sorted(DEV_FILES), default=["ecbplus", "mmds"])
    args = parser.parse_args(argv)
    files = [(name, args.corpus_dir / DEV_FILES[name]) for name in args.files]
    figures: dict[str, dict[str, object]] = {}
    header = f"{'file':8} {'system':34} {'B3-P':>6} {'B3-R':>6} {'B3-F1':>6} {'pw-P':>6} {'pw-R':>6} {'pw-F1':>6} {'pred':>5} {'gold':>5}"
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp, terminal_progress() as progress:
        workdir = Path(tmp)
        advance = progress.stage("cluster-eval runs", len(files) * args.orders)
        for name, path in files:
            rows = _read_rows(path)
            gold = read_gold(path)
            best_t, best = None, None
            matrix = baseline_matrix(rows)
            for t in BASELINE_THRESHOLDS:
                s = score_partition(gold, baseline_clusters(rows, t, matrix))
                if best is None or s.bcubed_f1 > best.bcubed_f1:
                    best_t, best = t, s
            assert best is not None
            print(f"{name:8} {'tfidf-online (best t=' + str(best_t) + ')':34} {_fmt(best)}")
            figures[name] = {"articles": len(rows), "baseline_bcubed_f1": round(best.bcubed_f1, 4),
                             "baseline_threshold": best_t}
            f1s, linked_f1s = [], []
            for seed in range(args.orders):
                by_story, by_link, elapsed = _run_newsroom(path, seed, workdir)
                advance(1)
                f1s.append(by_story.bcubed_f1)
                linked_f1s.append(by_link.bcubed_f1)
                tag = "file order" if seed == 0 else f"shuffle {seed}"
                print(f"{name:8} {'newsroom story_id, ' + tag:34} {_fmt(by_story)}")
                if name == "mmds":
                    print(f"{name:8} {'newsroom linked_id, ' + tag:34} {_fmt(by_link)}")
                print(f"{'':8} {'':34} ({len(rows)} articles in {elapsed:.2f} s)")
                if seed == 0:  # file order: the figure; MMDS is scored on its cross-language groups
                    score = by_link if name == "mmds" else by_story
                    figures[name].update(bcubed_f1=round(score.bcubed_f1, 4), scored_on="linked_id" if name == "mmds"
                                         else "story_id", seconds=round(elapsed, 2),
                                         ratio=round(score.bcubed_f1 / best.bcubed_f1, 3))
            if args.orders > 1:
                print(
                    f"{name:8} story_id F1 over {args.orders} orders: mean {np.mean(f1s):.3f}, worst {min(f1s):.3f}"
                )
                if name == "mmds":
                    print(
                        f"{name:8} linked F1 over {args.orders} orders: mean {np.mean(linked_f1s):.3f}, worst {min(linked_f1s):.3f}"
                    )
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
