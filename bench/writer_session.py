"""A language writer run with 50,000 active stories: loading its state each minute, or keeping it.

Usage::

    taskset -c 0,1 .venv/bin/python -m bench.writer_session [--stories 50000] [--runs 4] [--per-run 60]

Builds the synthetic 50,000-story state of bench/cluster_speed.py, commits it to a local store
twice (two identical stores), writes the same new articles before each run (``--per-run`` per
minute, about this state's own arrival rate), and times ``tasks.writer.run.cluster_language``, the
cluster flow's task, on each store: the baseline as the per-minute deployment runs it (each run
loads the state from the store), the other as the hourly writer session runs it
(``keep_states_in_memory``: each run reuses the state the previous run committed). Both save
the state after every run, and both must write the same changes.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from bench.cluster_speed import T_START, _Synth, build_state, build_stream
from tasks.progress import terminal_progress
from tasks.writer.kept import keep_states_in_memory
from tasks.writer.run import cluster_language
from tasks.writer.session import WriterSession, commit
from transforms.clustering import ClusterParams, LanguageClusterer
from transforms.features import ArticleFeatures, features_to_row
from warehouse import layout
from warehouse.schemas import ARTICLES_SCHEMA, STORY_CHANGES_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import list_segments, read_segments, rows_to_table, write_segment


def _article_row(features: ArticleFeatures) -> dict[str, object]:
    return {**features_to_row(features), "version": 1,
            "content_hash": hashlib.sha1(features.article_id.encode()).hexdigest(),
            "url": f"https://example.com/{features.article_id}", "canonical_url": f"https://example.com/{features.article_id}",
            "feed_id": "feed", "region": "US", "snippet": features.title[:120], "image_url": None, "author": None,
            "section": "world", "categories": [], "is_opinion": False, "published_at": features.first_seen_at}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--per-run", type=int, default=60)
    args = parser.parse_args(argv)
    synth = _Synth(7)
    state, topics, prebuilt = build_state(synth, args.stories, ClusterParams())
    stream = [f for f, _, _ in build_stream(synth, args.runs * args.per_run, topics, prebuilt, per_hour=args.per_run * 60)]
    with tempfile.TemporaryDirectory() as tmp:
        stores = {mode: LocalStore(Path(tmp) / mode) for mode in ("load every run", "kept in memory")}
        for store in stores.values():
            commit(WriterSession.fresh(store, "en", LanguageClusterer.from_state(state)), [], T_START)
        del state
        times: dict[str, list[float]] = {mode: [] for mode in stores}
        with keep_states_in_memory() as kept, terminal_progress() as progress:
            advance = progress.stage("writer runs (both modes)", args.runs)
            for run in range(args.runs):
                batch = stream[run * args.per_run:(run + 1) * args.per_run]
                now = T_START + timedelta(minutes=run + 1)
                for mode, store in stores.items():
                    write_segment(store, layout.article_segment_key(now, f"run{run}"),
                                  rows_to_table([_article_row(f) for f in batch], ARTICLES_SCHEMA), ARTICLES_SCHEMA)
                    start = time.perf_counter()
                    # Loading every run: as a fresh flow-run process, nothing in memory.
                    summary = cluster_language(store, "en", now, kept=None if mode == "load every run" else kept)
                    times[mode].append(time.perf_counter() - start)
                    assert summary["articles"] == len(batch), summary
                advance(1)
            assert kept.hits == args.runs - 1
        changes = {mode: read_segments(store, list_segments(store, layout.STORY_CHANGES_PREFIX), STORY_CHANGES_SCHEMA)
                   .to_pylist() for mode, store in stores.items()}
        assert changes["load every run"] == changes["kept in memory"], "the two writers decided differently"
    for mode, values in times.items():
        print(f"{mode:16} runs: {' '.join(f'{v:5.1f}' for v in values)} s; after the first: "
              f"mean {sum(values[1:]) / max(1, len(values) - 1):5.1f} s")
    base, kept = times["load every run"][1:], times["kept in memory"][1:]
    print(f"{args.per_run} articles per run, {args.stories} stories: a run after the first is "
          f"{(sum(base) / len(base)) / (sum(kept) / len(kept)):.1f}x faster with the state kept; same changes written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
