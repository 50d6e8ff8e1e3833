"""Syndicated-copy detection: recall over edited reprints, false copies among same-event pairs.

Usage::

    .venv/bin/python -m bench.copy_detection [--corpus-dir /work/shared/corpus/clustering]

Recall: each ECB+ and MMDS article of at least 300 characters is reprinted five ways (a
dateline prefixed, the headline replaced, a footer appended, the last 20% cut, the paragraphs
reordered) and all five at once; each reprint is checked against a
:class:`transforms.clustering.LanguageClusterer` that has assigned every article of the file
(``LanguageClusterer.copy_decision``: the decision ``assign`` would take, without changing the
clusterer, so one clusterer serves every reprint), and counts as found when the clusterer names
the original as ``copy_of`` (or the original's own original, when the two are near-duplicates).
False copies: every pair of distinct ECB+ articles of one event (not listed as near-duplicates
by 4-shingle Jaccard >= 0.5 or containment >= 0.8, the corpus README's definition of wire
copies), fed as original then second article to a fresh clusterer; a false copy is the second
named as a copy of the first. Every pair is run (no sampling); each article's features and
shingle set are computed once.

Short texts under every edit (issue 33): the leading paragraphs of each corpus text, cut to 600,
900, 1,200 and 1,500 characters, reprinted with a dateline, reordered paragraphs, a 15-25% cut
and a footer at once, six ways each, checked against a clusterer holding the short originals: found
when named a copy of an article of the same event (its own, or a wire copy of it), by LSH alone
and by the writer's decision (``LanguageClusterer.copy_decision``: LSH, then the members of the
story the article would join); and how often an article of another event is named instead.

The last line is the recall and false-copy figures as one JSON object (bench/headline.py reads it).

Boilerplate bodies: every ECB+ article, with its own title, whose body is replaced by one
notice that unrelated pages share (a paywall notice, a video caption, a cookie banner), fed in
file order to one clusterer per notice; a false copy is an article named a copy. A notice
shorter than ``MIN_COPY_SHINGLES`` shingles has no copy signature; the long paywall notice (24
shingles) is above the bar and shows what the bar does not catch.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.harness import print_json_line
from transforms.clustering import LanguageClusterer
from transforms.features import ArticleFeatures, features_from_text
from transforms.signatures import MIN_COPY_SHINGLES, shingle_tokens, tokenize

DEFAULT_CORPUS = Path("/work/shared/corpus/clustering")
T0 = datetime(2024, 1, 1, tzinfo=UTC)
NOTICES = {
    "paywall": "Subscribe now to continue reading. Already a subscriber? Log in to read the full article.",
    "video": "Watch the video.",
    "cookies": "We use cookies to improve your experience. By continuing to browse you agree to our use of cookies.",
    "paywall-long": ("This article is only available to subscribers. Subscribe now for unlimited access to all our "
                     "journalism from just $1 a week. Already a subscriber? Log in here."),
}


def _edits(title: str, text: str) -> dict[str, tuple[str, str]]:
    paragraphs = [p for p in text.split("\n") if p.strip()]
    if len(paragraphs) < 2:
        paragraphs = [s + "." for s in text.split(". ") if s]
    reordered = "\n".join(paragraphs[1:] + paragraphs[:1])
    cut = text[: int(len(text) * 0.8)]
    dateline = "LONDON, March 3 (Wire) - " + text
    footer = text + "\nCopyright 2024 Wire Service. All rights reserved. Reporting by staff; editing by desk."
    everything = "SINGAPORE (Wire) - " + "\n".join(paragraphs[1:] + paragraphs[:1])[: int(len(text) * 0.8)] + (
        "\nCopyright 2024 Wire Service. All rights reserved.")
    return {"dateline": (title, dateline), "headline": ("Reprinted: " + title[::-1][:40], text),
            "footer": (title, footer), "truncate20": (title, cut), "reorder": (title, reordered),
            "all": ("Other headline", everything)}


def _shingle_set(text: str, language: str) -> frozenset[str]:
    return frozenset(shingle_tokens(tokenize(text, language)))


def _near_duplicate(a: str, b: str, language: str) -> bool:
    return _near_duplicate_sets(_shingle_set(a, language), _shingle_set(b, language))


def _near_duplicate_sets(sa: frozenset[str], sb: frozenset[str]) -> bool:
    if not sa or not sb:
        return False
    inter = len(sa & sb)
    return inter / len(sa | sb) >= 0.5 or inter / min(len(sa), len(sb)) >= 0.8


def _features(row: dict[str, object], aid: str, title: str, text: str, minute: int) -> ArticleFeatures:
    return features_from_text(aid, title, text, str(row["language"]), T0 + timedelta(minutes=minute))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-dir", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--quick", action="store_true",
                        help="reprints of MMDS only, false copies in the first 6 ECB+ events, no boilerplate bodies")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    found: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for name in ("mmds-dev.jsonl",) if args.quick else ("ecbplus-dev.jsonl", "mmds-dev.jsonl"):
        rows = [json.loads(line) for line in (args.corpus_dir / name).open(encoding="utf-8") if line.strip()]
        by_language: dict[str, list[dict[str, object]]] = defaultdict(list)
        for row in rows:
            by_language[str(row["language"])].append(row)
        for language, group in by_language.items():
            base = LanguageClusterer(language)
            originals = [_features(r, str(r["id"]), str(r["title"]), str(r["text"]), i) for i, r in enumerate(group)]
            for f in originals:
                base.assign(f)
            for row in group:
                if len(str(row["text"])) < 300:
                    continue
                for kind, (title, text) in _edits(str(row["title"]), str(row["text"])).items():
                    match = base.copy_decision(_features(row, f"reprint-{row['id']}", title, text, len(group) + 1))
                    copy_of = None if match is None else match[0]
                    found[kind][0] += copy_of == row["id"] or (copy_of is not None and _same(copy_of, row, group))
                    found[kind][1] += 1
    short = {} if args.quick else _short_reprints(args.corpus_dir)
    total_found = sum(v[0] for v in found.values())
    total = sum(v[1] for v in found.values())
    print(f"{'edit':12} {'found':>7} {'of':>7} {'recall':>8}")
    for kind, (hit, n) in found.items():
        print(f"{kind:12} {hit:7d} {n:7d} {hit / n:8.4f}")
    print(f"{'all edits':12} {total_found:7d} {total:7d} {total_found / total:8.4f}")
    for how, (hit, n, across) in short.items():
        print(f"short texts under every edit, {how}: found {hit} of {n} (missed {n - hit}, "
              f"{(n - hit) / n:.3%}); named a copy of another event's article: {across}")

    rows = [json.loads(line) for line in (args.corpus_dir / "ecbplus-dev.jsonl").open(encoding="utf-8")]
    by_event: dict[str, list[dict[str, object]]] = defaultdict(list)
    for row in rows:
        by_event[str(row["event"])].append(row)
    if args.quick:
        kept = set(sorted(by_event)[:6])
        by_event = defaultdict(list, {e: g for e, g in by_event.items() if e in kept})
        rows = [r for r in rows if str(r["event"]) in kept]
    pairs = false = skipped = 0
    first = {str(r["id"]): _features(r, str(r["id"]), str(r["title"]), str(r["text"]), 0) for r in rows}
    second = {str(r["id"]): _features(r, str(r["id"]), str(r["title"]), str(r["text"]), 1) for r in rows}
    shingles = {str(r["id"]): _shingle_set(str(r["text"]), "en") for r in rows}
    for group in by_event.values():
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                if _near_duplicate_sets(shingles[str(a["id"])], shingles[str(b["id"])]):
                    skipped += 1
                    continue
                clusterer = LanguageClusterer("en")
                clusterer.assign(first[str(a["id"])])
                decision = clusterer.assign(second[str(b["id"])])
                pairs += 1
                false += decision.copy_of is not None
    print(f"same-event ECB+ pairs: {pairs} (near-duplicate pairs left out: {skipped}); "
          f"false copies: {false} ({false / pairs:.4%})")
    unsigned = sum(len(s) < MIN_COPY_SHINGLES for s in shingles.values())
    print(f"ECB+ texts under MIN_COPY_SHINGLES={MIN_COPY_SHINGLES} (no copy signature): {unsigned} of {len(rows)}")
    for kind, notice in {} if args.quick else NOTICES.items():
        clusterer = LanguageClusterer("en")
        copies = sum(clusterer.assign(_features(r, str(r["id"]), str(r["title"]), notice, i)).copy_of is not None
                     for i, r in enumerate(rows))
        print(f"boilerplate body {kind!r} ({len(_shingle_set(notice, 'en'))} shingles): "
              f"false copies {copies} of {len(rows)}")
    print(f"elapsed {time.perf_counter() - start:.1f} s")
    print_json_line({  # the figures, as one line (bench/headline.py reads it)
        "reprint_recall": round(total_found / total, 4), "reprints": total,
        "recall_by_edit": {kind: round(hit / n, 4) for kind, (hit, n) in found.items()},
        "same_event_pairs": pairs, "false_copies": false, "false_copy_rate": round(false / pairs, 6),
        "short_reprints": {how: {"found": hit, "of": n, "other_event": across} for how, (hit, n, across) in short.items()},
    })
    return 0


SHORT_SIZES = (600, 900, 1200, 1500)
"""Characters of the short originals: the leading paragraphs of a corpus text up to this length."""
DATELINES = ("SINGAPORE (Wire) - ", "WASHINGTON, March 3 (Reuters) - ", "KUALA LUMPUR: ")
FOOTERS = ("\nCopyright 2024 Wire Service. All rights reserved.",
           "\nThis article originally appeared in The Harbor Ledger. Additional reporting by staff.")


def _leading(text: str, size: int) -> str:
    """The leading paragraphs of ``text``, up to about ``size`` characters."""
    out: list[str] = []
    total = 0
    for paragraph in text.split("\n"):
        if total + len(paragraph) > size and out:
            break
        out.append(paragraph)
        total += len(paragraph) + 1
    return "\n".join(out)


def _every_edit(text: str, variant: int) -> str:
    """A reprint with every edit at once: a dateline, paragraphs reordered, 15-25% cut, a footer."""
    paragraphs = [p for p in text.split("\n") if p.strip()]
    if len(paragraphs) < 2:
        paragraphs = [s + "." for s in text.split(". ") if s]
    moved = paragraphs[1:] + paragraphs[:1] if variant % 2 == 0 else paragraphs[-1:] + paragraphs[:-1]
    body = "\n".join(moved)
    cut = body[: int(len(body) * (0.85 - 0.05 * (variant % 3)))]
    return DATELINES[variant % len(DATELINES)] + cut + FOOTERS[variant % len(FOOTERS)]


def _short_reprints(corpus_dir: Path, variants: int = 6) -> dict[str, tuple[int, int, int]]:
    """Short originals (SHORT_SIZES) reprinted with every edit at once, ``variants`` ways each:
    how many are found by LSH alone (``find_copy``, the rule before issue 33) and by the writer's
    decision (``copy_decision``), and how many are named a copy of another event's article."""
    out = {f"{how}, {size} chars": [0, 0, 0] for how in ("LSH alone", "the writer's decision") for size in SHORT_SIZES}
    for name in ("ecbplus-dev.jsonl", "mmds-dev.jsonl"):
        rows = [json.loads(line) for line in (corpus_dir / name).open(encoding="utf-8") if line.strip()]
        for size in SHORT_SIZES:
            by_language: dict[str, list[tuple[dict[str, object], str]]] = defaultdict(list)
            for row in rows:
                text = _leading(str(row["text"]), size)
                if len(text) >= 0.7 * size:
                    by_language[str(row["language"])].append((row, text))
            for language, group in by_language.items():
                base = LanguageClusterer(language)
                for i, (row, text) in enumerate(group):
                    base.assign(_features(row, str(row["id"]), str(row["title"]), text, i))
                event_of = {str(row["id"]): str(row["event"]) for row, _ in group}
                for row, text in group:
                    for variant in range(variants):
                        reprint = _features(row, f"reprint-{row['id']}-{variant}", "Other headline",
                                            _every_edit(text, variant), len(group) + 1)
                        for how, match in (("LSH alone", base.find_copy(reprint)),
                                           ("the writer's decision", base.copy_decision(reprint))):
                            tally = out[f"{how}, {size} chars"]
                            tally[1] += 1
                            if match is None:
                                continue
                            if event_of.get(match[0]) == str(row["event"]):
                                tally[0] += 1
                            else:
                                tally[2] += 1
    return {how: (hit, n, across) for how, (hit, n, across) in out.items()}


def _same(copy_of: str, row: dict[str, object], group: list[dict[str, object]]) -> bool:
    """A reprint of an article that is itself a wire copy may name that article's original."""
    other = next((r for r in group if str(r["id"]) == copy_of), None)
    return other is not None and _near_duplicate(str(other["text"]), str(row["text"]), str(row["language"]))


if __name__ == "__main__":
    sys.exit(main())
