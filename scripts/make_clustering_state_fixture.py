"""Write tests/data/clustering/state_v3_ecbplus.json.gz: a writer state and the decisions that follow it.

    python scripts/make_clustering_state_fixture.py [--code-root DIR] [--out PATH]

Run against the code whose states must keep loading (``--code-root``: a checkout of it; the
fixture in the tree was made at commit 47422e0, the last one with ``transforms/clustering.py`` as
one module). It clusters the first ``PREFIX`` English articles of the ECB+ dev file in
cluster-eval order, repairs once, and stores the clusterer's checkpoint; then it goes on with the
next articles and a second repair, and stores their features (terms, weights, entities and
MinHash: no text), each decision, each repair and a hash of the final checkpoint. A test loads the
checkpoint with today's code and checks that it decides the same (tests/transforms/clustering/test_state.py).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from datetime import timedelta
from pathlib import Path

PREFIX = 300
CORPUS = Path("/work/shared/corpus/clustering/ecbplus-dev.jsonl")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code-root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent.parent / "tests/data/clustering/state_v3_ecbplus.json.gz")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.code_root))
    from tasks.cluster_eval import read_eval_articles
    from transforms.clustering import LanguageClusterer
    try:
        from transforms.clustering import repair_stories
    except ImportError:  # the code before transforms/clustering/ was a package
        from transforms.repair import repair_stories  # type: ignore[no-redef]

    articles = [f for f in read_eval_articles(args.corpus, embed=False) if f.language == "en"]
    head, tail = articles[:PREFIX], articles[PREFIX:]
    clusterer = LanguageClusterer("en")
    for features in head:
        clusterer.assign(features)
    repair_stories(clusterer, head[-1].first_seen_at + timedelta(minutes=10))
    state = json.loads(json.dumps(clusterer.to_state()))
    decisions = [[a.article_id, a.story_id, a.copy_of, a.is_new_story, a.score, a.is_new_version]
                 for a in (clusterer.assign(f) for f in tail)]
    repairs = [[r.kind, r.story_id, r.other_story_id, [list(m) for m in r.moved], r.score]
               for r in repair_stories(clusterer, tail[-1].first_seen_at + timedelta(minutes=10))]
    final = hashlib.sha256(json.dumps(clusterer.to_state(), sort_keys=True).encode()).hexdigest()
    features = [{"article_id": f.article_id, "first_seen_at": f.first_seen_at.isoformat(),
                 "publisher_id": f.publisher_id, "minhash": list(f.minhash), "terms": list(f.terms),
                 "term_weights": list(f.term_weights), "entities": list(f.entities),
                 "signature_version": f.signature_version} for f in tail]
    fixture = {"state": state, "articles": features, "decisions": decisions, "repairs": repairs,
               "final_state_sha256": final}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(gzip.compress(json.dumps(fixture).encode(), mtime=0))
    print(f"{args.out}: {len(head)} + {len(tail)} articles, {len(state['stories'])} stories, "  # noqa: T201
          f"{sum(1 for d in decisions if d[3])} new stories after, {len(repairs)} repairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
