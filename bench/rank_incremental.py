"""One rank cycle's read + score with a minute's changes: story aggregates folded incrementally
against today's full recompute from the logs (``story_scores.sql``), in the same run (issue 15).

    taskset -c 0,1 .venv/bin/python -m bench.rank_incremental --stories 50000 300000 [--pages]
    taskset -c 0,1 .venv/bin/python -m bench.rank_incremental --quick

A synthetic window of ``--stories`` active stories (about 8 articles each over 40 hours, 2,000
publishers in 35 regions) is written as article and story-change segments into a local store; the
aggregates are built once from it; then each round writes one more minute (``--minute-articles``
new articles: joins to recent stories, new stories, syndicated copies) and times, on that store:

- incremental: ``tasks.aggregates.cycle.update_aggregates`` (read the aggregates and the new segments,
  fold, write one delta, commit) + ``transforms.story_scores.story_parts`` + ``score_stories``;
- full: ``warehouse.duck.connect`` (read every log segment) + ``story_scores.sql`` +
  ``score_stories``, what a cycle did before.

Reported per cycle: CPU seconds of the process (``time.process_time``, every thread) and wall
seconds, their ratio full / incremental, and the bytes each read from the store. The machine is
shared: compare the ratios, and read the load average printed with them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.harness import load_average, machine_line

os.environ.setdefault("POLARS_MAX_THREADS", "2")

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tasks.aggregates.cycle import record_member_cache, update_aggregates
from tasks.aggregates.members import AggregateView
from tasks.rank.compute import compute_pages
from tasks.rank.params import breaking_rule, parts_params, score_params, score_weights
from tasks.settings import RankSettings
from transforms.ranking import score_stories
from transforms.story_scores import story_parts
from transforms.story_scores import story_sections as sections_frame
from warehouse import layout
from warehouse.duck import connect, load_sql
from warehouse.schemas import ARTICLES_SCHEMA, PUBLISHERS_SCHEMA, STORY_CHANGES_SCHEMA
from warehouse.store import LocalStore
from warehouse.tables import list_segments, write_segment, write_table

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
PUBLISHERS = 2000
REGIONS = 35
SECTIONS = np.array(["world", "politics", "business", "technology", "science", "health", "sports", "entertainment"])
SETTINGS = RankSettings()
SNIPPET_TAIL = (" — the first lines of the article as the feed gave them, cut at two hundred characters by "
                "ingest, which never stores the body itself, only this and its signatures.")


class Synth:
    """The synthetic window and its minutes; story ids are ``s<index>``, articles ``a<index>``."""

    def __init__(self, stories: int, seed: int, terms: int = 16, dims: int = 64) -> None:
        self.rng = np.random.default_rng(seed)
        self.terms, self.dims = terms, dims
        self.vocab = pa.array([f"term{i}" for i in range(20_000)])
        self.stories = stories
        self.born = self.rng.uniform(0, 40 * 3600, size=stories)  # seconds after the window's start
        self.first_article = np.full(stories, -1, dtype=np.int64)
        self.articles = 0
        self.offset = 0
        self.start = NOW - timedelta(hours=48)
        self.authority = self.rng.uniform(0.1, 1.0, PUBLISHERS).astype(np.float32)

    def registry(self) -> pa.Table:
        ids = [f"p{p:04d}" for p in range(PUBLISHERS)]
        return pa.table({"publisher_id": ids, "name": ids, "domain": [f"{p}.example" for p in ids],
                         "region": [f"R{p % REGIONS:02d}" for p in range(PUBLISHERS)], "language": ["en"] * PUBLISHERS,
                         "tier": pa.array([1] * PUBLISHERS, pa.int8()), "authority": pa.array(self.authority),
                         "is_paywalled": [False] * PUBLISHERS, "is_opted_out": [False] * PUBLISHERS},
                        schema=PUBLISHERS_SCHEMA)

    def tables(self, story: np.ndarray, seen_s: np.ndarray, copy: np.ndarray) -> tuple[pa.Table, pa.Table]:
        """Article rows and their changes (new_story / assign / copy), in first-seen order. Rows are
        as wide as ingest writes them, but for the embedding (``--embedding-dims``, 512 in
        production) and the signatures (left out)."""
        order = np.argsort(seen_s, kind="stable")
        story, seen_s, copy = story[order], seen_s[order], copy[order]
        n = len(story)
        index = np.arange(self.articles, self.articles + n)
        self.articles += n
        opened = self.first_article[story] < 0
        firsts, at_row = np.unique(story[opened], return_index=True)  # each new story's first row opens it
        new = np.zeros(n, dtype=bool)
        new[np.flatnonzero(opened)[at_row]] = True
        self.first_article[firsts] = index[np.flatnonzero(opened)[at_row]]
        copy &= ~new
        ids = pc.binary_join_element_wise("a", pa.array(index).cast(pa.string()), "")
        sids = self.story_ids(story)
        copy_of = pc.if_else(pa.array(copy), pc.binary_join_element_wise(
            "a", pa.array(self.first_article[story]).cast(pa.string()), ""), pa.scalar(None, pa.string()))
        publisher = pc.binary_join_element_wise("p", pc.utf8_lpad(pa.array(self.rng.integers(0, PUBLISHERS, n))
                                                                  .cast(pa.string()), 4, "0"), "")
        at = pa.array(np.datetime64(self.start.replace(tzinfo=None), "us") + (seen_s * 1e6).astype("timedelta64[us]"),
                      type=pa.timestamp("us", tz="UTC"))
        title = pc.binary_join_element_wise("Story ", sids, " report ", ids, " and more words of a headline", "")
        sections = pa.array(SECTIONS)
        cols = {
            "article_id": ids, "version": pa.array(np.ones(n, dtype=np.int32)), "content_hash": ids,
            "url": pc.binary_join_element_wise("https://www.example.com/news/2026/12/", ids, ""),
            "canonical_url": pc.binary_join_element_wise("https://www.example.com/news/2026/12/", ids, ""),
            "feed_id": pc.binary_join_element_wise("feed-", publisher, ""), "publisher_id": publisher,
            "language": pa.array(["en"] * n), "title": title,
            "snippet": pc.binary_join_element_wise(title, SNIPPET_TAIL, ""),
            "image_url": pc.binary_join_element_wise("https://img.example.com/", ids, ".jpg", ""),
            "section": sections.take(pa.array(self.rng.integers(0, len(SECTIONS), n))),
            "section_guess": sections.take(pa.array(self.rng.integers(0, len(SECTIONS), n))),
            "is_opinion": pa.array(np.zeros(n, dtype=bool)), "first_seen_at": at, "published_at": at,
            "terms": self._lists(n, self.terms, lambda k: self.vocab.take(pa.array(
                (np.repeat(story, self.terms) * 7 + self.rng.integers(0, 40, k)) % len(self.vocab)))),
            "term_weights": self._lists(n, self.terms, lambda k: pa.array(self.rng.random(k, dtype=np.float32))),
            "entities": self._lists(n, 2, lambda k: self.vocab.take(pa.array(np.repeat(story, 2) % len(self.vocab)))),
            "embedding": self._lists(n, self.dims, lambda k: pa.array(
                self.rng.standard_normal(k, dtype=np.float32))) if self.dims else None,
            "signature_version": pa.array(["bench"] * n),
        }
        articles = pa.table({f.name: cols[f.name] if cols.get(f.name) is not None else pa.nulls(n, f.type)
                             for f in ARTICLES_SCHEMA}, schema=ARTICLES_SCHEMA)
        kind = pa.array(np.where(new, "new_story", np.where(copy, "copy", "assign")))
        offsets = np.arange(self.offset, self.offset + n)
        self.offset += n
        ccols = {"change_id": pc.binary_join_element_wise("en:", pa.array(offsets).cast(pa.string()), ""),
                 "offset": pa.array(offsets), "language": pa.array(["en"] * n), "kind": kind,
                 "story_id": sids, "article_id": ids, "copy_of": copy_of,
                 "score": pa.array(np.ones(n, dtype=np.float32)), "changed_at": at}
        changes = pa.table({f.name: ccols.get(f.name, pa.nulls(n, f.type)) for f in STORY_CHANGES_SCHEMA},
                           schema=STORY_CHANGES_SCHEMA)
        return articles, changes

    def story_ids(self, story: np.ndarray) -> pa.Array:
        """Production-shaped ids: 16 hex digits, the first-seen second on top, so ids sort by creation
        (``transforms.clustering.ids.make_story_id``) and new stories land past the stored ones."""
        epoch = int(self.start.timestamp())
        values = ((epoch + self.born[story].astype(np.int64)) << 32) | (story.astype(np.int64) & 0xFFFFFFFF)
        return pa.array([f"{v:016x}" for v in values.tolist()])

    @staticmethod
    def _lists(n: int, width: int, values: object) -> pa.Array:
        offsets = pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32))
        return pa.ListArray.from_arrays(offsets, values(n * width))  # type: ignore[operator]

    def history(self, per_story: int, until_s: float) -> tuple[pa.Table, pa.Table]:
        n = self.stories * per_story
        story = np.repeat(np.arange(self.stories), per_story)
        seen = self.born[story] + self.rng.exponential(3600, size=n)
        seen[::per_story] = self.born  # each story's first article at its birth
        keep = seen < until_s
        return self.tables(story[keep], seen[keep], self.rng.random(int(keep.sum())) < 0.1)

    def minute(self, end_s: float, count: int) -> tuple[pa.Table, pa.Table]:
        """``count`` articles in the minute before ``end_s``: a fifth open new stories, the rest join
        stories weighted to the young ones; a tenth are copies."""
        young = np.argsort(-self.born)[: max(1, self.stories // 5)]
        fresh = max(1, count // 5)
        new_ids = np.arange(self.stories, self.stories + fresh)
        self.born = np.concatenate([self.born, np.full(fresh, end_s - 60.0)])
        self.first_article = np.concatenate([self.first_article, np.full(fresh, -1, dtype=np.int64)])
        self.stories += fresh
        joins = self.rng.choice(young, size=count - fresh)
        story = np.concatenate([new_ids, joins])
        seen = end_s - self.rng.uniform(0.5, 59.5, size=count)
        seen[:fresh] = end_s - 59.9
        return self.tables(story, seen, self.rng.random(count) < 0.1)


def write(store: LocalStore, day: datetime, articles: pa.Table, changes: pa.Table, name: str) -> None:
    write_segment(store, layout.article_segment_key(day, name), articles, ARTICLES_SCHEMA)
    first = int(changes.column("offset")[0].as_py())
    write_segment(store, layout.story_changes_key("en", first), changes, STORY_CHANGES_SCHEMA)


def log_bytes(store: LocalStore) -> int:
    keys = [*list_segments(store, layout.ARTICLES_PREFIX), *list_segments(store, layout.STORY_CHANGES_PREFIX)]
    return sum((store.root / k).stat().st_size for k in keys)


def full_cycle(store: LocalStore, now: datetime) -> tuple[float, float, int]:
    """Today's read + score: every log segment into DuckDB, story_scores.sql, score_stories."""
    t, c = time.perf_counter(), time.process_time()
    con = connect(store)
    con.execute("set threads = 2")
    parts = pl.from_arrow(con.sql(load_sql("story_scores"), params=score_params(now, SETTINGS)).to_arrow_table())
    con.close()
    assert isinstance(parts, pl.DataFrame)
    scored = score_stories(parts.lazy(), now=now, weights=score_weights(SETTINGS), rule=breaking_rule(SETTINGS)).collect()
    return time.process_time() - c, time.perf_counter() - t, scored.height


def pages_incremental(store: LocalStore, view: AggregateView, now: datetime) -> tuple[float, int, int]:
    """The rest of the cycle on the aggregates: rank editions, read the members of the stories pages
    list, assemble every page, pool and the story snapshot (CPU s, member bytes read, pages)."""
    before = view.counter.bytes.get("members", 0)
    c = time.process_time()
    output = compute_pages(store, now, SETTINGS, view=view)
    record_member_cache(store, view)  # as publish_all does: the next cycle reads these from the cache
    return time.process_time() - c, view.counter.bytes.get("members", 0) - before, len(output.pages)


def members_full(store: LocalStore, now: datetime) -> tuple[float, int]:
    """What page assembly read before: every member of every story (story_members.sql) into Python."""
    c = time.process_time()
    con = connect(store)
    rows = con.sql(load_sql("story_members"), params={"now": now}).to_arrow_table().to_pylist()
    con.close()
    return time.process_time() - c, len(rows)


def incremental_cycle(store: LocalStore, now: datetime) -> tuple[float, float, int, int, AggregateView]:
    """Read the aggregates and the new segments, fold, commit; then story_parts and score_stories."""
    t, c = time.perf_counter(), time.process_time()
    view = update_aggregates(store, now, SETTINGS)
    parts = story_parts(view.stories, view.registry.publishers.select("publisher_id", "authority", "region"),
                        now=now, params=parts_params(SETTINGS))
    active = view.stories.filter(pl.col("story_id").is_in(parts["story_id"].implode()))
    scored = score_stories(parts.lazy(), now=now, weights=score_weights(SETTINGS), rule=breaking_rule(SETTINGS),
                           story_sections=sections_frame(active).lazy()).collect()
    assert view.summary["mode"] == "folded", view.summary
    return time.process_time() - c, time.perf_counter() - t, scored.height, view.counter.total, view


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stories", type=int, nargs="+", default=[50_000, 300_000])
    parser.add_argument("--per-story", type=int, default=8, help="articles per story in the window")
    parser.add_argument("--minute-articles", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=3, help="minutes timed per size (the median is reported)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--terms", type=int, default=16, help="terms per article (ingest keeps up to 64)")
    parser.add_argument("--embedding-dims", type=int, default=64, help="embedding size (512 in production)")
    parser.add_argument("--quick", action="store_true", help="20,000 stories, 1,000 articles a minute, 2 rounds")
    parser.add_argument("--pages", action="store_true", help="also time page assembly on the aggregates")
    parser.add_argument("--pages-baseline", action="store_true",
                        help="and the member read it replaced (story_members.sql into Python: heavy at 300,000)")
    parser.add_argument("--dir", type=Path, default=None, help="where to build the stores (default: a temp dir)")
    args = parser.parse_args()
    if args.quick:
        args.stories, args.minute_articles, args.rounds, args.pages_baseline = [20_000], 1000, 2, True
    print(f"{machine_line()} at the start; POLARS_MAX_THREADS={os.environ['POLARS_MAX_THREADS']}")
    for stories in args.stories:
        root = Path(tempfile.mkdtemp(prefix="rank-incremental-", dir=args.dir))
        try:
            run_size(root, stories, args)
        finally:
            shutil.rmtree(root, ignore_errors=True)


def run_size(root: Path, stories: int, args: argparse.Namespace) -> None:
    store = LocalStore(root / "store")
    synth = Synth(stories, args.seed, args.terms, args.embedding_dims)
    write_table(store, layout.PUBLISHERS_KEY, synth.registry(), PUBLISHERS_SCHEMA)
    window_end = (NOW - synth.start).total_seconds()
    t = time.perf_counter()
    articles, changes = synth.history(args.per_story, window_end)
    for i, chunk in enumerate(np.array_split(np.arange(articles.num_rows), 40)):  # ~one segment an hour
        part = pa.array(chunk)
        write(store, NOW, articles.take(part), changes.take(part), f"history{i:02d}")
    print(f"\n== {stories:,} stories: {articles.num_rows:,} articles in the window, written in "
          f"{time.perf_counter() - t:.1f} s; logs {log_bytes(store) / 1e6:.0f} MB")
    t, c = time.perf_counter(), time.process_time()
    view = update_aggregates(store, NOW, SETTINGS)
    print(f"aggregates built from the logs: {time.process_time() - c:.1f} CPU s, {time.perf_counter() - t:.1f} s wall, "
          f"{view.stories.height:,} story rows; read {view.counter.total / 1e6:.0f} MB")
    full, inc = [], []
    for r in range(args.rounds):
        now = NOW + timedelta(minutes=r + 1)
        articles, changes = synth.minute((now - synth.start).total_seconds(), args.minute_articles)
        write(store, now, articles, changes, f"minute{r:03d}")
        load = load_average()[0]
        i_cpu, i_wall, i_rows, i_bytes, view = incremental_cycle(store, now)
        f_bytes = log_bytes(store)
        f_cpu, f_wall, f_rows = full_cycle(store, now)
        assert i_rows == f_rows, (i_rows, f_rows)
        if args.pages or args.pages_baseline:
            p_cpu, p_bytes, pages = pages_incremental(store, view, now)
            line = (f"  pages on the aggregates: {p_cpu:.2f} CPU s for {pages} pages and pools, members read "
                    f"{p_bytes / 1e6:.1f} MB")
            if args.pages_baseline:
                m_cpu, m_rows = members_full(store, now)
                line += (f" | before: every member into Python (story_members.sql) {m_cpu:.2f} CPU s for "
                         f"{m_rows:,} rows, before assembly")
            print(line)
        inc.append((i_cpu, i_wall, i_bytes))
        full.append((f_cpu, f_wall, f_bytes))
        print(f"minute {r + 1}: incremental {i_cpu:.2f} CPU s ({i_wall:.2f} s wall, {i_bytes / 1e6:.1f} MB read) | "
              f"full {f_cpu:.2f} CPU s ({f_wall:.2f} s wall, {f_bytes / 1e6:.0f} MB read) | "
              f"{i_rows:,} stories scored | load {load:.2f}")
    med = [statistics.median(x) for x in zip(*inc, strict=True)]
    fmed = [statistics.median(x) for x in zip(*full, strict=True)]
    print(f"median per cycle at {stories:,} stories, {args.minute_articles:,} new articles a minute: "
          f"incremental {med[0]:.2f} CPU s / {med[1]:.2f} s wall / {med[2] / 1e6:.1f} MB read; "
          f"full {fmed[0]:.2f} CPU s / {fmed[1]:.2f} s wall / {fmed[2] / 1e6:.0f} MB read; "
          f"full/incremental: {fmed[0] / med[0]:.1f}x CPU, {fmed[1] / med[1]:.1f}x wall, {fmed[2] / med[2]:.0f}x bytes")


if __name__ == "__main__":
    main()
