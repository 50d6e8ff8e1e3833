"""Score body extraction against the pages corpus: trafilatura's defaults vs ``extract_page``.

Usage:
    .venv/bin/python -m bench.extract_eval --pages /work/shared/corpus/pages

Both extractors run in the same process on the same decoded pages, so timings are
comparable. The metric is the upstream benchmark's (see ``bench/shingle_metric.py``). For our
extractor it also reports how often the metadata fields were found on the pages that state
them; whether a page "states" a field is decided by a crude regex over the raw HTML that
is independent of the extractor. The last line is the figures as one JSON object (bench/headline.py
reads it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import trafilatura

from bench.harness import print_json_line
from bench.shingle_metric import CorpusScore, score_corpus
from tasks.progress import terminal_progress
from transforms.canonical_url import canonicalize_url
from transforms.extraction import ExtractedPage, extract_page

_STATES: dict[str, re.Pattern[str]] = {
    "canonical_url": re.compile(r"""rel=["']?canonical|property=["']og:url""", re.I),
    "title": re.compile(r"<title[^>]*>\s*\S|property=[\"']og:title", re.I),
    "published_at": re.compile(
        r"datePublished|article:published_time|<time[^>]+datetime=|pubdate|publish_?date|dc\.date",
        re.I,
    ),
    "language": re.compile(r"<html[^>]+\blang=[\"']?[a-z]|og:locale|inLanguage|content-language", re.I),
}


@dataclass(frozen=True, slots=True)
class Run:
    name: str
    score: CorpusScore
    ms_per_page: float


def load_pages(pages_dir: Path) -> tuple[dict[str, bytes], dict[str, dict[str, str]]]:
    truth: dict[str, dict[str, str]] = json.loads((pages_dir / "ground-truth.json").read_text("utf-8"))
    raw = {
        path.name.split(".")[0]: gzip.decompress(path.read_bytes())
        for path in sorted((pages_dir / "html").glob("*.html.gz"))
    }
    missing = set(raw) ^ set(truth)
    if missing:
        raise SystemExit(f"pages and ground truth disagree on {len(missing)} ids")
    return raw, truth


def time_run(name: str, ids: list[str], fn: Callable[[str], str], truth: dict[str, dict[str, str]]) -> Run:
    start = time.perf_counter()
    preds = {page_id: fn(page_id) for page_id in ids}
    elapsed = time.perf_counter() - start
    score = score_corpus([(truth[i]["articleBody"], preds[i]) for i in ids])
    return Run(name=name, score=score, ms_per_page=1000 * elapsed / len(ids))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=Path, required=True, help="folder with html/ and ground-truth.json")
    parser.add_argument("--limit", type=int, default=None, help="score only the first N pages (a quick run)")
    args = parser.parse_args()
    raw, truth = load_pages(args.pages)
    ids = sorted(raw)[: args.limit]
    # Upstream pages are UTF-8; both extractors get the same decoded text.
    texts = {i: raw[i].decode("utf-8") for i in ids}

    # Warm up imports and caches of both so neither pays one-off costs in its timing.
    trafilatura.extract(texts[ids[0]])
    extract_page(raw[ids[0]], truth[ids[0]]["url"])

    ours: dict[str, ExtractedPage] = {}

    def run_ours(page_id: str) -> str:
        page = extract_page(raw[page_id], truth[page_id]["url"])
        ours[page_id] = page
        return page.text

    with terminal_progress() as progress:  # one stage per extractor: nothing draws inside a timed run
        progress.stage("trafilatura default")
        runs = [time_run("trafilatura default", ids, lambda i: trafilatura.extract(texts[i]) or "", truth)]
        progress.stage("newsroom extract_page")
        runs.append(time_run("newsroom extract_page", ids, run_ours, truth))

    print(f"pages: {len(ids)}  ({args.pages})")
    print()
    print(f"{'extractor':<24} {'precision':>9} {'recall':>7} {'F1':>7} {'ms/page':>8}")
    for run in runs:
        s = run.score
        print(f"{run.name:<24} {s.precision:>9.4f} {s.recall:>7.4f} {s.f1:>7.4f} {run.ms_per_page:>8.1f}")
    print()
    print("newsroom extract_page metadata (found / pages that state it):")
    for field, pattern in _STATES.items():
        stating = [i for i in ids if pattern.search(texts[i])]
        found = [i for i in stating if getattr(ours[i], field) is not None]
        share = len(found) / len(stating) if stating else 0.0
        print(f"  {field:<14} {len(found):>3} / {len(stating):<3} {share:6.1%}")
    matches = sum(1 for i in ids if ours[i].canonical_url == canonicalize_url(truth[i]["url"]))
    print(f"  canonical_url equal to canonicalized ground-truth url: {matches} / {len(ids)}")
    opinion = sum(1 for i in ids if ours[i].is_opinion)
    print(f"  is_opinion true: {opinion} / {len(ids)}")
    baseline, newsroom = runs
    print_json_line({  # the figures, as one line (bench/headline.py reads it)
        "pages": len(ids), "f1": round(newsroom.score.f1, 4), "baseline_f1": round(baseline.score.f1, 4),
        "ratio": round(newsroom.score.f1 / baseline.score.f1, 3),
        "precision": round(newsroom.score.precision, 4), "recall": round(newsroom.score.recall, 4),
        "ms_per_page": round(newsroom.ms_per_page, 1), "baseline_ms_per_page": round(baseline.ms_per_page, 1),
    })


if __name__ == "__main__":
    main()
