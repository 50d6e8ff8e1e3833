"""What a bag of words can reach on ECB+ at event level: an offline, oracle-tuned upper bound.

Usage::

    .venv/bin/python -m bench.cluster_ceiling [--input ../shared/corpus/clustering/ecbplus-dev.jsonl]

Clusters every article at once (no arrival order, no online decisions) by average-link
agglomeration over a similarity matrix, and keeps the cut with the best BCubed F1 against the
gold events: a threshold chosen by the labels themselves, which no real system has. The
similarities: TF-IDF over words (English stop words removed), TF-IDF over capitalised words and
numbers (names, places, dates), the USE multilingual embedding of title and lede, and weighted
mixes. Whatever scores here bounds what a clusterer built on the same evidence can score.

It also prints how clean the neighbourhoods are (the share of each article's k nearest
articles that tell the same event) and the same oracle cut over a shared-nearest-neighbour
similarity (the share of two articles' k nearest articles they have in common, Jarvis–Patrick).
The second is not a bound of the first kind: it is only high when ``k`` is near the size of the
gold events (ECB+ events have 5 to 22 articles), which a real stream, whose stories run from one
article to hundreds, does not have.

With ``--stories OUT.jsonl`` (a ``newsroom cluster-eval`` output) it also asks what a merge pass
could see: for every pair of output stories whose majority events share a gold topic, the
average-link similarity of their articles, and how well it ranks the pairs that tell one event
(fragments a merge should join) above the pairs that tell two (ROC AUC; 0.5 is a coin).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import roc_auc_score

from bench.bcubed import ClusterScore, read_gold, score_partition
from bench.harness import CORPUS_DIR
from transforms.embedding import embed_texts, embedding_text

DEFAULT_INPUT = CORPUS_DIR / "clustering" / "ecbplus-dev.jsonl"
_NAME_RE = re.compile(r"\b[A-Z][\w'-]+|\b\d[\d,.]*\b")


def _tfidf_similarity(texts: list[str], **options: object) -> np.ndarray:
    matrix = TfidfVectorizer(sublinear_tf=True, **options).fit_transform(texts)  # type: ignore[arg-type]
    return (matrix @ matrix.T).toarray()


def best_cut(similarity: np.ndarray, ids: list[str], gold: dict[str, str]) -> ClusterScore:
    """Average-link dendrogram over ``similarity``; the cut with the best BCubed F1."""
    distance = np.clip(similarity.max() - similarity, 0, None)
    np.fill_diagonal(distance, 0)
    tree = linkage(squareform(distance, checks=False), method="average")
    best: ClusterScore | None = None
    for cut in np.quantile(tree[:, 2], np.linspace(0.5, 0.99, 60)):
        labels = fcluster(tree, t=cut, criterion="distance")
        score = score_partition(gold, {i: str(label) for i, label in zip(ids, labels, strict=True)})
        if best is None or score.bcubed_f1 > best.bcubed_f1:
            best = score
    assert best is not None
    return best


def neighbour_purity(similarity: np.ndarray, events: list[str], k: int) -> float:
    """The share of each article's ``k`` most similar other articles that tell the same event."""
    scores = similarity.copy()
    np.fill_diagonal(scores, -np.inf)
    nearest = np.argsort(-scores, axis=1)[:, :k]
    return float(np.mean([[events[j] == events[i] for j in row] for i, row in enumerate(nearest)]))


def shared_neighbours(similarity: np.ndarray, k: int) -> np.ndarray:
    """Jarvis–Patrick similarity: |kNN(i) ∩ kNN(j)| / (k + 1), each article its own neighbour."""
    scores = similarity.copy()
    np.fill_diagonal(scores, -np.inf)
    member = np.zeros_like(similarity)
    member[np.arange(len(scores))[:, None], np.argsort(-scores, axis=1)[:, :k]] = 1.0
    np.fill_diagonal(member, 1.0)
    return (member @ member.T) / (k + 1)


def story_pair_separation(
    similarity: np.ndarray, rows: list[dict[str, object]], stories: dict[str, str],
) -> tuple[float, int, int]:
    """ROC AUC of same-event over different-event same-topic story pairs, and the two counts."""
    members: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        members.setdefault(stories[str(row["id"])], []).append(index)
    majority = {
        story: max(set(events := [str(rows[i]["event"]) for i in index]), key=events.count)
        for story, index in members.items()
    }
    topic = {str(r["event"]): str(r.get("topic")) for r in rows}
    keys = sorted(members)
    labels, scores = [], []
    for a, left in enumerate(keys):
        for right in keys[a + 1:]:
            if topic[majority[left]] != topic[majority[right]]:
                continue
            labels.append(majority[left] == majority[right])
            scores.append(float(similarity[np.ix_(members[left], members[right])].mean()))
    return float(roc_auc_score(labels, scores)), sum(labels), len(labels) - sum(labels)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT)
    parser.add_argument("--stories", type=Path, help="a cluster-eval output to probe merges on")
    args = parser.parse_args(argv)
    with args.input.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    gold = read_gold(args.input)
    ids = [str(r["id"]) for r in rows]
    full = [f"{r['title']}\n{r['text']}" for r in rows]
    words = _tfidf_similarity(full, stop_words="english")
    names = _tfidf_similarity([" ".join(_NAME_RE.findall(t)) for t in full], lowercase=False)
    vectors = embed_texts([embedding_text(r["title"], r["text"], r["language"]) for r in rows])
    embedding = vectors @ vectors.T
    candidates = {
        "words": words, "names and numbers": names, "embedding": embedding,
        "0.3 words + 0.7 names": 0.3 * words + 0.7 * names,
        "0.5 words + 0.5 names": 0.5 * words + 0.5 * names,
        "0.7 words + 0.3 embedding": 0.7 * words + 0.3 * embedding,
        "0.5 names + 0.5 embedding": 0.5 * names + 0.5 * embedding,
        "0.4 words + 0.4 names + 0.2 embedding": 0.4 * words + 0.4 * names + 0.2 * embedding,
    }
    print(f"{'similarity':42} {'B3-P':>6} {'B3-R':>6} {'B3-F1':>6} {'pred':>5} (gold {len(set(gold.values()))})")
    for name, similarity in candidates.items():
        s = best_cut(similarity, ids, gold)
        print(f"{name:42} {s.bcubed_precision:6.3f} {s.bcubed_recall:6.3f} {s.bcubed_f1:6.3f} {s.predicted_clusters:5d}")
    mix = 0.5 * words + 0.5 * names
    for k in (5, 8, 15):
        s = best_cut(shared_neighbours(mix, k), ids, gold)
        label = f"shared neighbours of the 0.5/0.5 mix, k={k}"
        print(f"{label:42} {s.bcubed_precision:6.3f} {s.bcubed_recall:6.3f} {s.bcubed_f1:6.3f} {s.predicted_clusters:5d}")
    events = [gold[i] for i in ids]
    for name, similarity in (("words", words), ("0.5 words + 0.5 names", mix), ("embedding", embedding)):
        purity = ", ".join(f"k={k}: {neighbour_purity(similarity, events, k):.3f}" for k in (1, 3, 5))
        print(f"same-event share of the nearest articles, {name}: {purity}")
    if args.stories:
        with args.stories.open(encoding="utf-8") as fh:
            stories = {str(o["id"]): str(o["story_id"]) for o in map(json.loads, fh) if o}
        for name, similarity in (("words", words), ("names", names), ("0.5 words + 0.5 names", mix),
                                 ("embedding", embedding)):
            auc, same, different = story_pair_separation(similarity, rows, stories)
            print(f"same-topic story pairs ({same} one event, {different} two), {name}: ROC AUC {auc:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
