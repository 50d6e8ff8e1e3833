"""BCubed and pairwise scores of a predicted clustering against gold labels.

Usage::

    python -m bench.bcubed --gold /work/shared/corpus/clustering/ecbplus-dev.jsonl --pred P.jsonl
    python -m bench.bcubed --gold .../mmds-dev.jsonl --pred P.jsonl --label linked

Gold is each line's ``event``. The predicted label is ``story_id`` (``--label event``, the
default: within-language stories) or ``linked_id`` falling back to ``story_id``
(``--label linked``: cross-language groups, as MMDS is scored). Articles missing from the
prediction count as singletons.

BCubed (Bagga & Baldwin 1998; Amigó et al. 2009): for each article, precision is the share of
its predicted cluster that shares its gold label, recall the share of its gold cluster that
shares its predicted cluster; both are averaged over articles. Pairwise scores count pairs of
articles put together.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bench.harness import print_json_line


@dataclass(frozen=True, slots=True)
class ClusterScore:
    """Scores of one predicted partition against gold."""

    bcubed_precision: float
    bcubed_recall: float
    bcubed_f1: float
    pairwise_precision: float
    pairwise_recall: float
    pairwise_f1: float
    predicted_clusters: int
    gold_clusters: int
    articles: int


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def score_partition(gold: Mapping[str, str], pred: Mapping[str, str]) -> ClusterScore:
    """Score ``pred`` (article id → cluster) against ``gold`` (article id → label).

    Only articles in ``gold`` are scored; one missing from ``pred`` is its own cluster.

    >>> s = score_partition({"a": "x", "b": "x", "c": "y"}, {"a": "1", "b": "1", "c": "2"})
    >>> (s.bcubed_f1, s.pairwise_f1)
    (1.0, 1.0)
    """
    ids = sorted(gold)
    if not ids:
        raise ValueError("gold is empty")
    labels = {i: pred.get(i, f"\x00singleton:{i}") for i in ids}
    joint = Counter((gold[i], labels[i]) for i in ids)
    gold_size = Counter(gold[i] for i in ids)
    pred_size = Counter(labels[i] for i in ids)
    precision = sum(joint[(gold[i], labels[i])] / pred_size[labels[i]] for i in ids) / len(ids)
    recall = sum(joint[(gold[i], labels[i])] / gold_size[gold[i]] for i in ids) / len(ids)

    def pairs(n: int) -> int:
        return n * (n - 1) // 2

    true_pairs = sum(pairs(n) for n in joint.values())
    pred_pairs = sum(pairs(n) for n in pred_size.values())
    gold_pairs = sum(pairs(n) for n in gold_size.values())
    pair_p = true_pairs / pred_pairs if pred_pairs else 1.0
    pair_r = true_pairs / gold_pairs if gold_pairs else 1.0
    return ClusterScore(
        bcubed_precision=precision,
        bcubed_recall=recall,
        bcubed_f1=_f1(precision, recall),
        pairwise_precision=pair_p,
        pairwise_recall=pair_r,
        pairwise_f1=_f1(pair_p, pair_r),
        predicted_clusters=len(pred_size),
        gold_clusters=len(gold_size),
        articles=len(ids),
    )


@dataclass(frozen=True, slots=True)
class LinkScore:
    """Pairs of articles of different languages put together (in one linked group) or not."""

    true_links: int
    false_links: int
    missed_links: int

    @property
    def precision(self) -> float:
        linked = self.true_links + self.false_links
        return self.true_links / linked if linked else 1.0

    @property
    def recall(self) -> float:
        gold = self.true_links + self.missed_links
        return self.true_links / gold if gold else 1.0


def score_cross_language(gold: Mapping[str, str], pred: Mapping[str, str], language: Mapping[str, str]) -> LinkScore:
    """Precision and recall of the cross-language links alone: over every pair of articles of
    different languages, whether the prediction puts them together (``pred``: article id →
    linked group, falling back to the story) against whether they share a gold event (issue 33).

    >>> s = score_cross_language({"a": "x", "b": "x", "c": "y"}, {"a": "1", "b": "1", "c": "1"},
    ...                          {"a": "en", "b": "zh", "c": "ms"})
    >>> (s.true_links, s.false_links, s.missed_links)
    (1, 2, 0)
    """
    ids = sorted(gold)
    labels = {i: pred.get(i, f"\x00singleton:{i}") for i in ids}
    true = false = missed = 0
    for n, a in enumerate(ids):
        for b in ids[n + 1:]:
            if language.get(a) == language.get(b):
                continue
            same_gold, same_pred = gold[a] == gold[b], labels[a] == labels[b]
            true += same_gold and same_pred
            false += same_pred and not same_gold
            missed += same_gold and not same_pred
    return LinkScore(true, false, missed)


def read_languages(path: Path) -> dict[str, str]:
    """Article id → ``language`` of a corpus file."""
    out: dict[str, str] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                out[str(row["id"])] = str(row.get("language"))
    return out


def read_gold(path: Path) -> dict[str, str]:
    """Article id → gold ``event`` of a corpus file."""
    out: dict[str, str] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                out[str(row["id"])] = str(row["event"])
    return out


def read_prediction(path: Path, label: Literal["event", "linked"] = "event") -> dict[str, str]:
    """Article id → predicted cluster of a ``cluster-eval`` output file."""
    out: dict[str, str] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            cluster = row.get("linked_id") if label == "linked" else None
            out[str(row["id"])] = str(cluster or row["story_id"])
    return out


def format_score(score: ClusterScore) -> str:
    """One human-readable block of a score."""
    return (
        f"BCubed    P={score.bcubed_precision:.4f} R={score.bcubed_recall:.4f} F1={score.bcubed_f1:.4f}\n"
        f"pairwise  P={score.pairwise_precision:.4f} R={score.pairwise_recall:.4f} F1={score.pairwise_f1:.4f}\n"
        f"clusters  predicted={score.predicted_clusters} gold={score.gold_clusters} articles={score.articles}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gold", type=Path, required=True, help="corpus JSONL with an 'event' per line")
    parser.add_argument("--pred", type=Path, required=True, help="cluster-eval output JSONL")
    parser.add_argument(
        "--label",
        choices=["event", "linked"],
        default="event",
        help="event: score story_id; linked: score linked_id falling back to story_id",
    )
    parser.add_argument("--json", action="store_true", help="print the scores as one JSON object")
    args = parser.parse_args(argv)
    score = score_partition(read_gold(args.gold), read_prediction(args.pred, args.label))
    if args.json:
        print_json_line({k: getattr(score, k) for k in score.__slots__})
    else:
        print(format_score(score))
    return 0


if __name__ == "__main__":
    sys.exit(main())
