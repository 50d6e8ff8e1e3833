"""Story clustering benchmark: newsroom's clusterer against an online TF-IDF baseline (issues 4, 14).

Usage::

    .venv/bin/python bench/cluster_eval.py [--corpus-dir /work/shared/corpus/clustering] [--orders 3]
        [--files ecbplus ecbplus-timed gnews2014 mmds]

For each dev file, runs ``tasks.cluster_eval.run_cluster_eval`` (the same code as
``newsroom cluster-eval``) and a baseline in the same run: scikit-learn ``TfidfVectorizer`` fitted
on the whole batch, then greedy online assignment of each article, in stream order
(``published_at`` order where every line has one, else input order, as ``cluster-eval`` reads
it), to the most similar story centroid if the cosine reaches a threshold, else a new story.
The baseline's threshold is swept and two of its points reported, both chosen with the gold
labels (so a generous baseline): the best BCubed F1, and the best F1 with BCubed precision at
least 0.90.

The files:

- ``ecbplus``: ECB+ dev without times (a stress test: two events of one topic arrive together);
- ``ecbplus-timed``: the same articles with constructed stream times (``published_at``);
- ``gnews2014``: Google News 2014 headlines (no body), publisher hostnames as ``source``;
- ``mmds``: MMDS dev, scored on ``linked_id`` (cross-language groups), and on ``story_id``.

The last line is every figure as one JSON object (``bench/headline.py`` reads it).

``--orders N`` also reruns newsroom on N-1 seeded shuffles of the input lines, because the
held-out files come in another order: the mean and the worst F1 over orders are printed. A
shuffle changes the stream order only for the files without ``published_at``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bcubed import ClusterScore, read_gold, read_prediction, score_partition  # noqa: E402
from tasks.cluster_eval import run_cluster_eval  # noqa: E402
from tasks.progress import terminal_progress  # noqa: E402

DEFAULT_CORPUS = Path("/work/shared/corpus/clustering")
FILES = {
    "ecbplus": "ecbplus-dev.jsonl",
    "ecbplus-timed": "ecbplus-dev-timed.jsonl",
    "gnews2014": "gnews2014-dev.jsonl",
    "mmds": "mmds-dev.jsonl",
}
BASELINE_THRESHOLDS = [round(0.05 * i, 2) for i in range(2, 17)]
BASELINE_MIN_PRECISION = 0.90


def _read_rows(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def stream_order(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """The rows in the order ``cluster-eval`` clusters them: by ``published_at`` when every row has
    one (ties keep input order), else as given."""
    if rows and all(isinstance(r.get("published_at"), str) and r["published_at"] for r in rows):
        return [r for _, r in sorted(enumerate(rows), key=lambda ir: (str(ir[1]["published_at"]), ir[0]))]
    return list(rows)


def baseline_clusters(rows: list[dict[str, object]], threshold: float) -> dict[str, str]:
    """Online TF-IDF baseline: greedy assignment, in stream order, to the best centroid (the sum of
    its articles' TF-IDF vectors) at or above ``threshold`` cosine, one pass per language."""
    rows = stream_order(rows)
    texts = [f"{r['title']}\n{r['text']}" for r in rows]
    analyzer = "char_wb" if any(r["language"] == "zh" for r in rows) else "word"
    vectorizer = TfidfVectorizer(
        sublinear_tf=True,
        analyzer=analyzer,
        ngram_range=(2, 3) if analyzer == "char_wb" else (1, 1),
        stop_words=None,
        min_df=1,
    )
    matrix = vectorizer.fit_transform(texts).tocsr()
    out: dict[str, str] = {}
    by_language: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_language.setdefault(str(r["language"]), []).append(i)
    for language, idx in by_language.items():
        sums: list[dict[int, float]] = []
        norms_sq: list[float] = []
        postings: dict[int, list[int]] = defaultdict(list)
        for i in idx:
            start, end = matrix.indptr[i], matrix.indptr[i + 1]
            vec = dict(zip(matrix.indices[start:end].tolist(), matrix.data[start:end].tolist(), strict=True))
            dots: dict[int, float] = defaultdict(float)
            for term, weight in vec.items():
                for k in postings[term]:
                    dots[k] += weight * sums[k][term]
            best, best_score = -1, -1.0
            for k in sorted(dots):
                score = dots[k] / math.sqrt(norms_sq[k]) if norms_sq[k] > 0 else 0.0
                if score > best_score:
                    best, best_score = k, score
            if best < 0 or best_score < threshold:
                best = len(sums)
                sums.append({})
                norms_sq.append(0.0)
            total = sums[best]
            for term, weight in vec.items():
                if term not in total:
                    postings[term].append(best)
                old = total.get(term, 0.0)
                total[term] = old + weight
                norms_sq[best] += (old + weight) ** 2 - old**2
            out[str(rows[i]["id"])] = f"{language}-{best}"
    return out


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


def _revision() -> str:
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" (with uncommitted changes)" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-dir", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--orders", type=int, default=3, help="input orders to run newsroom on (1 = file order)")
    parser.add_argument("--files", nargs="+", choices=sorted(FILES), default=list(FILES))
    args = parser.parse_args(argv)
    print(f"newsroom at {_revision()}")
    figures: dict[str, dict[str, object]] = {}
    header = (f"{'file':13} {'system':38} {'B3-P':>6} {'B3-R':>6} {'B3-F1':>6} {'pw-P':>6} {'pw-R':>6} "
              f"{'pw-F1':>6} {'pred':>5} {'gold':>5}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp, terminal_progress() as progress:
        workdir = Path(tmp)
        advance = progress.stage("cluster-eval runs", len(args.files) * args.orders)
        for name in args.files:
            path = args.corpus_dir / FILES[name]
            rows = _read_rows(path)
            gold = read_gold(path)
            sweep = [(t, score_partition(gold, baseline_clusters(rows, t))) for t in BASELINE_THRESHOLDS]
            best_t, best = max(sweep, key=lambda ts: ts[1].bcubed_f1)
            print(f"{name:13} {'tfidf-online (best t=' + str(best_t) + ')':38} {_fmt(best)}")
            figures[name] = {"articles": len(rows), "baseline_bcubed_f1": round(best.bcubed_f1, 4),
                             "baseline_threshold": best_t}
            precise = [ts for ts in sweep if ts[1].bcubed_precision >= BASELINE_MIN_PRECISION]
            if precise:
                p_t, p_best = max(precise, key=lambda ts: ts[1].bcubed_f1)
                label = f"tfidf-online (P>={BASELINE_MIN_PRECISION:.2f}, t={p_t})"
                print(f"{name:13} {label:38} {_fmt(p_best)}")
            f1s, linked_f1s = [], []
            for seed in range(args.orders):
                by_story, by_link, elapsed = _run_newsroom(path, seed, workdir)
                advance(1)
                f1s.append(by_story.bcubed_f1)
                linked_f1s.append(by_link.bcubed_f1)
                tag = "file order" if seed == 0 else f"shuffle {seed}"
                if name == "mmds":
                    print(f"{name:13} {'newsroom linked_id, ' + tag:38} {_fmt(by_link)}")
                print(f"{name:13} {'newsroom story_id, ' + tag:38} {_fmt(by_story)}")
                print(f"{'':13} {'':38} ({len(rows)} articles in {elapsed:.2f} s)")
                if seed == 0:  # file order: the figure; MMDS is scored on its cross-language groups
                    score = by_link if name == "mmds" else by_story
                    figures[name].update(bcubed_f1=round(score.bcubed_f1, 4), scored_on="linked_id" if name == "mmds"
                                         else "story_id", seconds=round(elapsed, 2),
                                         ratio=round(score.bcubed_f1 / best.bcubed_f1, 3))
            if args.orders > 1:
                scores = linked_f1s if name == "mmds" else f1s
                label = "linked" if name == "mmds" else "story_id"
                print(f"{name:13} {label} F1 over {args.orders} orders: mean {np.mean(scores):.3f}, worst {min(scores):.3f}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
