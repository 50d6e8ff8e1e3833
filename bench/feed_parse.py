"""Parse time per 50-item feed: feedparser, our parse_feed (lxml reader or feedparser), fastfeedparser.

Usage:
    .venv/bin/python -m bench.feed_parse [--feeds 20] [--repeat 5]
    .venv/bin/python -m bench.feed_parse --corpus ../shared/corpus/feeds/real [--repeat 3]

``--corpus DIR``: every feed file under DIR (not .html/.opml pages), parsed by ``parse_feed`` with
the lxml reader (the default) and with ``parser="feedparser"`` (the reference, and the code before
issue 20), alternately in the same run, best of ``--repeat`` per file; prints the totals, how many
files the reader took and declined, whether every record agreed, and one JSON line.

The feeds are the replay site's own RSS 2.0 and Atom renderings of the dev corpus (50 items each,
en/ms/zh). Every parser runs in this process on the same bytes; the best of ``--repeat`` runs per
feed is kept, and the median and p90 over feeds are printed. The agreement columns compare each
parser's item count and titles with feedparser's (the correctness reference).
fastfeedparser is optional (``pip install fastfeedparser``); it is not a project dependency.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import feedparser

import transforms.feeds.rss_atom
from bench.harness import print_json_line
from replay.corpus import build_publishers, build_schedule, load_corpus, sample_corpus
from replay.render import FEED_SIZE, render_atom, render_rss
from transforms.errors import FeedRejectedError
from transforms.feeds import parse_feed
from transforms.feeds.xml_reader import Declined, read_feed_document

CORPORA = [Path("/work/shared/corpus/clustering") / n for n in ("ecbplus-dev.jsonl", "mmds-dev.jsonl")]
START = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def build_feeds(count: int) -> list[tuple[str, bytes]]:
    """Up to ``count`` (format, body) pairs of 50-item feeds, alternating RSS and Atom."""
    corpus = sample_corpus(load_corpus(CORPORA), seed=7, limit=None)
    publishers = build_publishers(7, 8000, {a.language for a in corpus})
    articles = build_schedule(corpus, publishers, seed=7, start=START, span_hours=6)
    feeds: list[tuple[str, bytes]] = []
    for p in publishers:
        items = [a for a in articles if a.publisher_id == p.publisher_id]
        for start in range(0, len(items) - FEED_SIZE + 1, 10):  # overlapping windows
            window = list(reversed(items[start : start + FEED_SIZE]))
            updated = window[0].published_at + timedelta(minutes=1)
            if len(feeds) % 2 == 0:
                feeds.append(("rss", render_rss(p, window, updated)))
            else:
                feeds.append(("atom", render_atom(p, window, updated)))
            if len(feeds) >= count:
                return feeds
    return feeds


def _feedparser(body: bytes) -> list[str]:
    return [e.get("title", "") for e in feedparser.parse(io.BytesIO(body)).entries]


def _ours(body: bytes) -> list[str]:
    return [i.title for i in parse_feed(body, "http://127.0.1.1/feeds/rss.xml").items]


def _ours_feedparser(body: bytes) -> list[str]:
    return [i.title for i in parse_feed(body, "http://127.0.1.1/feeds/rss.xml", parser="feedparser").items]


def _parsers() -> dict[str, Callable[[bytes], list[str]]]:
    parsers: dict[str, Callable[[bytes], list[str]]] = {
        "feedparser": _feedparser, "parse_feed (lxml)": _ours, "parse_feed (feedparser)": _ours_feedparser}
    try:
        import fastfeedparser
    except ImportError:
        print("fastfeedparser not installed: skipped")
    else:
        parsers["fastfeedparser"] = lambda body: [e.get("title", "") for e in fastfeedparser.parse(body).entries]
    return parsers


def _best(parse: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        parse()
        best = min(best, time.perf_counter() - started)
    return best


def _reader_verdict(body: bytes, url: str) -> object:
    """What parse_feed's call to the lxml reader returned for ``body`` (None: it was not called)."""
    seen: list[object] = []

    def spy(*args: object) -> object:
        seen.append(read_feed_document(*args))  # type: ignore[arg-type]
        return seen[-1]

    transforms.feeds.rss_atom.read_feed_document = spy  # type: ignore[assignment]
    try:
        parse_feed(body, url)
    finally:
        transforms.feeds.rss_atom.read_feed_document = read_feed_document
    return seen[0] if seen else None


def corpus_figures(directory: Path, repeat: int) -> dict[str, object]:
    """Both parse_feed paths over every feed file under ``directory``, in one run."""
    paths = sorted(p for p in directory.rglob("*")
                   if p.is_file() and p.name != "LICENSE" and p.suffix not in (".html", ".opml"))
    url = "https://news.example/feeds/main.xml"
    totals = {"lxml": 0.0, "feedparser": 0.0}
    taken_totals = {"lxml": 0.0, "feedparser": 0.0}
    taken = declined = refused = other = disagreements = 0
    for path in paths:
        body = path.read_bytes()
        try:
            ours = parse_feed(body, url)
        except FeedRejectedError:
            refused += 1
            continue
        reference = parse_feed(body, url, parser="feedparser")
        disagreements += ours != reference
        times = {"lxml": _best(lambda b=body: parse_feed(b, url), repeat),
                 "feedparser": _best(lambda b=body: parse_feed(b, url, parser="feedparser"), repeat)}
        for name, seconds in times.items():
            totals[name] += seconds
        document = _reader_verdict(body, url)
        if document is None:
            other += 1  # JSON Feed: neither reader is involved
        elif isinstance(document, Declined):
            declined += 1
        else:
            taken += 1
            for name, seconds in times.items():
                taken_totals[name] += seconds
    return {
        "files": len(paths), "taken": taken, "declined": declined, "json_or_other": other, "refused": refused,
        "records_differ": disagreements,
        "lxml_seconds": round(totals["lxml"], 3), "feedparser_seconds": round(totals["feedparser"], 3),
        "speedup": round(totals["feedparser"] / totals["lxml"], 2),
        "taken_lxml_seconds": round(taken_totals["lxml"], 3),
        "taken_feedparser_seconds": round(taken_totals["feedparser"], 3),
        "taken_speedup": round(taken_totals["feedparser"] / taken_totals["lxml"], 2) if taken else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feeds", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--corpus", type=Path, help="time both parse_feed paths over the feed files under this folder")
    args = parser.parse_args()
    if args.corpus:
        figures = corpus_figures(args.corpus, args.repeat)
        print(f"{figures['files']} files: the lxml reader took {figures['taken']}, declined {figures['declined']} "
              f"(feedparser read them), {figures['json_or_other']} JSON; records differ in {figures['records_differ']}")
        print(f"parse_feed, every file: lxml reader {figures['lxml_seconds']} s, feedparser {figures['feedparser_seconds']} s "
              f"({figures['speedup']}x); on the files taken: {figures['taken_lxml_seconds']} s vs "
              f"{figures['taken_feedparser_seconds']} s ({figures['taken_speedup']}x)")
        print_json_line(figures)
        return 0
    feeds = build_feeds(args.feeds)
    kinds = {k: sum(1 for f, _ in feeds if f == k) for k in ("rss", "atom")}
    print(f"feeds: {len(feeds)} of {FEED_SIZE} items ({kinds['rss']} RSS 2.0, {kinds['atom']} Atom), "
          f"mean {statistics.mean(len(b) for _, b in feeds) / 1024:.0f} KiB, best of {args.repeat} runs")
    reference = {i: _feedparser(body) for i, (_, body) in enumerate(feeds)}
    print(f"{'parser':<20} {'fmt':<5} {'median ms':>10} {'p90 ms':>8} {'items agree':>12} {'titles agree':>13}")
    for name, parse in _parsers().items():
        for fmt in ("rss", "atom"):
            times, same_count, same_titles = [], 0, 0
            for i, (kind, body) in enumerate(feeds):
                if kind != fmt:
                    continue
                best = float("inf")
                for _ in range(args.repeat):
                    started = time.perf_counter()
                    titles = parse(body)
                    best = min(best, time.perf_counter() - started)
                times.append(best * 1000)
                same_count += len(titles) == len(reference[i])
                same_titles += [t.strip() for t in titles] == [t.strip() for t in reference[i]]
            times.sort()
            p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
            print(f"{name:<20} {fmt:<5} {statistics.median(times):>10.2f} {p90:>8.2f} "
                  f"{same_count:>6}/{len(times):<5} {same_titles:>7}/{len(times):<5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
