"""The section recipe on Google News stories it never saw, over many splits by story (issue 33).

Usage::

    .venv/bin/python -m bench.section_splits [--written training/sections/headlines-en.jsonl] \
        [--compare-written OLD.jsonl] [--salts 8]

``newsroom classify-sections`` is the shipped model alone (nothing taught), and Google News 2014
has 42 dev stories, so a single cut of them in two halves says little: one large story filed under
a section a reader might dispute moves a half's accuracy by ten points. Here the dev stories are
cut in two halves by a hash of their id, ``--salts`` times with different salts; for each half the
shipped recipe (``scripts/train_section_model.py``: the written English headlines and the other
half's stories, the same weights and C) is fitted without it and scored on it, four-way (science
counts as technology, as Google News' ``t`` holds both). Printed per training set: the mean,
lowest and spread of the halves' accuracy at the shipped threshold (with its coverage) and at a
coverage of exactly 0.80 (the threshold that answers the 80% most confident headlines of the half).

``--compare-written`` fits the same splits with another written-headline file in the same run
(for instance the file as a commit before had it: ``git show REV:training/sections/headlines-en.jsonl``).
The embeddings are computed once and shared by both. The last line is every figure as one JSON object.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

import scripts.train_section_model as recipe
from bench.harness import CORPUS_DIR, machine_line, print_json_line
from tasks.sections import load_section_model
from transforms.embedding import embed_texts, embedding_text

COVERAGE = 0.80


def _unit(salt: int, key: str) -> float:
    return int.from_bytes(hashlib.blake2b(f"sections-splits-{salt}:{key}".encode(), digest_size=4).digest(),
                          "big") / 2**32


def story_halves(events: list[str], salt: int) -> tuple[np.ndarray, np.ndarray]:
    """Two boolean masks over ``events``: the stories of half 0 and of half 1 (a story whole in one)."""
    first = np.array([_unit(salt, e) < 0.5 for e in events])
    return first, ~first


def score_half(x_train: np.ndarray, y_train: list[str], groups: list[str], x_test: np.ndarray,
                y_test: list[str], threshold: float) -> tuple[float, float, float]:
    """Coverage and accuracy at ``threshold``, and accuracy at a coverage of exactly ``COVERAGE``."""
    model = recipe._fit(x_train, np.array(y_train), recipe.sample_weights(y_train, groups))
    prob = model.predict_proba(x_test)
    confidence = prob.max(axis=1)
    right = np.array([recipe._four_way(str(model.classes_[b])) == recipe._four_way(t) for b, t in zip(prob.argmax(axis=1), y_test,
                                                                              strict=True)])
    answered = confidence >= threshold
    at = np.sort(confidence)[::-1][int(np.ceil(COVERAGE * len(confidence))) - 1]
    return float(answered.mean()), float(right[answered].mean()), float(right[confidence >= at].mean())


def splits(gnews: list[dict[str, object]], gnews_x: np.ndarray, story_section: dict[str, str],
           written: list[dict[str, object]], written_x: np.ndarray, salts: int, threshold: float
           ) -> dict[str, object]:
    events = [str(r["event"]) for r in gnews]
    halves = []
    for salt in range(salts):
        for test in story_halves(events, salt):
            train_y = [story_section[e] for e, t in zip(events, test, strict=True) if not t]
            train_y += [str(r["section"]) for r in written]
            groups = [f"gnews:{e}" for e, t in zip(events, test, strict=True) if not t]
            groups += [f"written:{r['id']}" for r in written]
            x_train = np.vstack([gnews_x[~test], written_x])
            test_y = [story_section[e] for e, t in zip(events, test, strict=True) if t]
            halves.append(score_half(x_train, train_y, groups, gnews_x[test], test_y, threshold))
    h = np.array(halves)
    return {"halves": len(halves), "written_headlines": len(written),
            "at_threshold": {"coverage": round(float(h[:, 0].mean()), 3), "accuracy": round(float(h[:, 1].mean()), 3),
                             "accuracy_lowest": round(float(h[:, 1].min()), 3)},
            "at_coverage_0_80": {"accuracy": round(float(h[:, 2].mean()), 3),
                                 "accuracy_lowest": round(float(h[:, 2].min()), 3),
                                 "accuracy_sd": round(float(h[:, 2].std()), 3)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-dir", type=Path, default=CORPUS_DIR)
    parser.add_argument("--written", type=Path, default=recipe.TRAINING / "headlines-en.jsonl")
    parser.add_argument("--compare-written", type=Path, default=None)
    parser.add_argument("--salts", type=int, default=8)
    args = parser.parse_args(argv)
    story_section = {}
    for line in (recipe.TRAINING / "gnews2014-dev-sections.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        event, _category, section = line.split("\t")
        story_section[event] = section
    gnews = recipe._read_jsonl(args.corpus_dir / "clustering" / "gnews2014-dev.jsonl")
    sets = {"written": recipe._read_jsonl(args.written)}
    if args.compare_written:
        sets["compare_written"] = recipe._read_jsonl(args.compare_written)

    def embed(rows: list[dict[str, object]]) -> np.ndarray:
        return embed_texts([embedding_text(str(r.get("title") or ""), str(r.get("text") or ""),
                                           str(r.get("language") or "en")) for r in rows]).astype(np.float64)

    gnews_x = embed(gnews)
    threshold = load_section_model().min_probability
    print(machine_line())
    print(f"google news dev: {len(story_section)} stories, {len(gnews)} headlines; {args.salts} salts x 2 halves; "
          f"shipped threshold {threshold}")
    figures: dict[str, object] = {"salts": args.salts, "threshold": threshold}
    for name, written in sets.items():
        result = splits(gnews, gnews_x, story_section, written, embed(written), args.salts, threshold)
        print(f"{name} ({result['written_headlines']} written headlines): at the threshold "
              f"{json.dumps(result['at_threshold'])}; at coverage 0.80 {json.dumps(result['at_coverage_0_80'])}")
        figures[name] = result
    print_json_line(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
