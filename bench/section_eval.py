"""Score ``newsroom classify-sections`` against labelled articles (issue 21).

Usage::

    .venv/bin/python -m bench.section_eval --input A.jsonl [--labels L.tsv] [--predictions P.jsonl]

Without ``--predictions`` it runs the command itself (``newsroom classify-sections --input A.jsonl
--output <tmp>``), exactly as the held-out half is scored. Gold labels come from, in this order:

- ``--labels L.tsv``: columns ``id`` and ``sections`` (the sections a reader would accept, ``|``
  between them; empty when none of the canonical sections fits, e.g. a court report), as in
  ``training/sections/mmds-dev-sections.tsv``;
- an input line's ``category``: Google News' ``b`` business, ``t`` technology or science,
  ``e`` entertainment, ``m`` health (UCI News Aggregator, ``gnews2014-*.jsonl``);
- an input line's ``section``.

Printed: coverage (the share of labelled lines answered), accuracy on the answered lines, both per
language and per gold label, the most common confusions, and how often the classifier answered on
lines no section fits. The last line is the overall coverage and accuracy as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import print_json_line

NEWSROOM = Path(sys.executable).parent / "newsroom"
CATEGORY_SECTIONS = {"b": ("business",), "t": ("technology", "science"), "e": ("entertainment",), "m": ("health",)}
CATEGORY_NAMES = {"b": "business", "t": "technology", "e": "entertainment", "m": "health"}


@dataclass(frozen=True, slots=True)
class Gold:
    accepted: frozenset[str]
    name: str  # the label as reported in confusions
    language: str


@dataclass(slots=True)
class SectionScore:
    labelled: int = 0
    answered: int = 0
    right: int = 0
    unlabelled: int = 0
    unlabelled_answered: int = 0
    confusions: Counter[tuple[str, str]] = field(default_factory=Counter)

    @property
    def coverage(self) -> float:
        return self.answered / self.labelled if self.labelled else 0.0

    @property
    def accuracy(self) -> float:
        return self.right / self.answered if self.answered else 0.0


def gold_from_rows(rows: list[dict[str, object]], labels: Mapping[str, str] | None = None) -> dict[str, Gold]:
    """Each line's accepted sections, from the labels file, ``category`` or ``section``."""
    out: dict[str, Gold] = {}
    for r in rows:
        key = str(r["id"])
        language = str(r.get("language") or "und")
        if labels is not None:
            if key not in labels:
                continue
            accepted = frozenset(s for s in labels[key].split("|") if s)
            out[key] = Gold(accepted, labels[key].split("|")[0] or "(none)", language)
        elif r.get("category") in CATEGORY_SECTIONS:
            category = str(r["category"])
            out[key] = Gold(frozenset(CATEGORY_SECTIONS[category]), CATEGORY_NAMES[category], language)
        elif r.get("section"):
            out[key] = Gold(frozenset({str(r["section"])}), str(r["section"]), language)
    return out


def score_sections(gold: Mapping[str, Gold], predicted: Mapping[str, str | None],
                   by: str | None = None) -> dict[str, SectionScore]:
    """Scores overall (key ``all``) and, with ``by`` = ``language`` or ``label``, per group.

    A line with no accepted section counts only towards ``unlabelled``; a missing prediction is an
    abstention.

    >>> g = {"1": Gold(frozenset({"business"}), "business", "en"), "2": Gold(frozenset({"health"}), "health", "en"),
    ...      "3": Gold(frozenset(), "(none)", "en")}
    >>> s = score_sections(g, {"1": "business", "2": "sports", "3": "world"})["all"]
    >>> (s.labelled, s.answered, s.right, s.unlabelled_answered, s.confusions.most_common())
    (2, 2, 1, 1, [(('health', 'sports'), 1)])
    """
    scores: dict[str, SectionScore] = {"all": SectionScore()}
    for key, g in gold.items():
        guess = predicted.get(key)
        groups = ["all"] + ([g.language if by == "language" else g.name] if by else [])
        for name in groups:
            s = scores.setdefault(name, SectionScore())
            if not g.accepted:
                s.unlabelled += 1
                s.unlabelled_answered += guess is not None
                continue
            s.labelled += 1
            if guess is None:
                continue
            s.answered += 1
            if guess in g.accepted:
                s.right += 1
            else:
                s.confusions[(g.name, guess)] += 1
    return scores


def _read_jsonl(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _read_labels(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    at_id, at_sections = header.index("id"), header.index("sections")
    return {cols[at_id]: cols[at_sections] for cols in (line.split("\t") for line in lines[1:]) if cols}


def run_command(input_path: Path, output_path: Path) -> None:
    subprocess.run([str(NEWSROOM), "classify-sections", "--input", str(input_path), "--output", str(output_path)],
                   check=True)


def _line(name: str, s: SectionScore) -> str:
    extra = f"  none-fits {s.unlabelled_answered}/{s.unlabelled} answered" if s.unlabelled else ""
    return (f"{name:14} labelled {s.labelled:5d}  coverage {s.coverage:.3f}  accuracy on answered "
            f"{s.accuracy:.3f} ({s.right}/{s.answered}){extra}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--labels", type=Path, default=None)
    parser.add_argument("--predictions", type=Path, default=None, help="score this file instead of running the command")
    parser.add_argument("--confusions", type=int, default=8)
    args = parser.parse_args(argv)
    rows = _read_jsonl(args.input)
    gold = gold_from_rows(rows, _read_labels(args.labels) if args.labels else None)
    with tempfile.TemporaryDirectory() as tmp:
        predictions = args.predictions
        if predictions is None:
            predictions = Path(tmp) / "predictions.jsonl"
            run_command(args.input, predictions)
        predicted = {str(p["id"]): (None if p["section"] is None else str(p["section"]))
                     for p in _read_jsonl(predictions)}
    overall = score_sections(gold, predicted)["all"]
    print(_line("all", overall))
    for by in ("language", "label"):
        groups = score_sections(gold, predicted, by=by)
        if len(groups) > 2:
            for name in sorted(k for k in groups if k != "all"):
                print(_line(f"  {by} {name}", groups[name]))
    if overall.confusions:
        print("confusions (gold -> answered): " + ", ".join(
            f"{g} -> {p} {n}" for (g, p), n in overall.confusions.most_common(args.confusions)))
    print_json_line({"labelled": overall.labelled, "answered": overall.answered,  # one line: bench/headline.py
                     "coverage": round(overall.coverage, 4), "accuracy": round(overall.accuracy, 4)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
