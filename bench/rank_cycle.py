"""One rank cycle over synthetic aggregates, against a naive per-edition Python loop.

    POLARS_MAX_THREADS=2 taskset -c 0,1 .venv/bin/python -m bench.rank_cycle

The input is what ``warehouse/sql/story_scores.sql`` hands to the ranking (per story: coverage,
velocity and freshness at the last 5 cycles, coverage share per region, burst candidates) plus the
story sections. The cycle runs ``transforms.ranking.score_stories`` and ``rank_editions`` (smoothing,
Breaking test, regional scores, top-K per edition and section, the edition pool) and then
``stabilize_order`` + ``diversify`` for every page. Not included: the SQL itself, representative
choice and JSON (they need member articles, which synthetic aggregates do not have).

The naive baseline scores every story of an edition's language in a Python loop, per edition, and
sorts per section; it is measured on ``--naive-editions`` editions and extrapolated to all of them.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime, timedelta

from bench.harness import print_json_line

os.environ.setdefault("POLARS_MAX_THREADS", "2")

import numpy as np
import polars as pl

from transforms.diversity import DiversityRule, diversify, stabilize_order
from transforms.ranking import BreakingRule, ScoreWeights, rank_editions, score_stories

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
LANGUAGES = {"en": (35, 0.50), "es": (15, 0.20), "fr": (10, 0.15), "de": (10, 0.15)}  # editions, story share
SECTIONS = ["world", "politics", "business", "technology", "science", "health", "sports", "entertainment",
            "local", "climate", "culture"]  # + top = 12


def synthesize(stories: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    editions = [(f"{lang}-R{i:02d}", lang, f"{lang.upper()}{i:02d}") for lang, (n, _) in LANGUAGES.items()
                for i in range(n)]
    langs = rng.choice(list(LANGUAGES), size=stories, p=[s for _, s in LANGUAGES.values()])
    coverage = rng.gamma(2.0, 0.6, size=(stories, 5))
    freshness = np.clip(rng.beta(5, 2, size=(stories, 1)) - rng.uniform(0, 0.02, size=(stories, 5)), 0, 1)
    velocity = rng.exponential(0.1, size=(stories, 5))
    n_regions = rng.integers(1, 4, size=stories)
    regions, shares = [], []
    for lang, k in zip(langs, n_regions, strict=True):
        count = LANGUAGES[str(lang)][0]
        picks = sorted(rng.choice(count, size=k, replace=False))
        w = rng.dirichlet(np.ones(k))
        regions.append([f"{str(lang).upper()}{i:02d}" for i in picks])
        shares.append(w.tolist())
    burst_at: list[list[datetime]] = [[] for _ in range(stories)]
    burst_n: list[list[int]] = [[] for _ in range(stories)]
    for i in rng.choice(stories, size=20, replace=False):
        burst_at[i] = [NOW - timedelta(minutes=int(rng.integers(1, 100)))]
        burst_n[i] = [int(rng.integers(10, 30))]
    parts = pl.DataFrame({
        "story_id": [f"s{i:07d}" for i in range(stories)], "language": langs.tolist(),
        "first_seen_at": [NOW - timedelta(hours=6)] * stories,
        "coverage": coverage.tolist(), "velocity": velocity.tolist(), "freshness": freshness.tolist(),
        "regions": regions, "region_shares": shares, "burst_at": burst_at, "burst_originals": burst_n,
        "baseline_rate": rng.uniform(0.2, 1.0, size=stories),
    }, schema_overrides={"burst_at": pl.List(pl.Datetime("us", "UTC")), "burst_originals": pl.List(pl.Int64),
                         "first_seen_at": pl.Datetime("us", "UTC")})
    sec_a = rng.integers(0, len(SECTIONS), size=stories)
    sec_b = rng.integers(0, len(SECTIONS), size=stories)
    two = rng.random(stories) < 0.3
    sid = parts["story_id"].to_list()
    rows = [(s, SECTIONS[a]) for s, a in zip(sid, sec_a, strict=True)]
    rows += [(s, SECTIONS[b]) for s, b, t in zip(sid, sec_b, two, strict=True) if t]
    sections = pl.DataFrame(rows, schema={"story_id": pl.String, "section": pl.String}, orient="row").unique()
    return parts, sections, pl.DataFrame(editions, schema=["edition", "language", "region"], orient="row")


def fast_cycle(parts: pl.DataFrame, sections: pl.DataFrame, editions: pl.DataFrame,
               vectors: dict[str, np.ndarray]) -> tuple[int, float, float]:
    weights, rule = ScoreWeights(), BreakingRule()
    t0 = time.perf_counter()
    scored = score_stories(parts.lazy(), now=NOW, weights=weights, rule=rule).collect()
    ranked = rank_editions(scored.lazy(), sections.lazy(), editions.lazy(), weights=weights, rule=rule,
                           top_k={"top": 1000}, default_k=60).collect()
    t1 = time.perf_counter()
    pages = 0
    section_map: dict[str, list[str]] = {}
    for (_edition, section), group in ranked.partition_by(["edition", "section"], as_dict=True).items():
        ids = group["story_id"].to_list()[: 90 if section == "top" else 60]
        for s in ids:
            if s not in section_map:
                section_map[s] = []
        scores = dict(zip(ids, group["score"].to_list()[: len(ids)], strict=True))
        # The live page: last cycle's order, a few neighbours swapped (as smoothing leaves it).
        previous = [ids[i + 1 if i % 7 == 0 else i - 1 if i % 7 == 1 else i] for i in range(min(30, len(ids) - 1))]
        order = stabilize_order(ids, scores, previous, margin=0.1)

        # One matrix product per page instead of a dot product per pair.
        index = {s: i for i, s in enumerate(order)}
        matrix = np.stack([vectors[s] for s in order]) if order else np.zeros((0, 16))
        sims = (matrix @ matrix.T).tolist()

        def similarity(a: str, b: str, sims: list[list[float]] = sims, index: dict[str, int] = index) -> float:
            return sims[index[a]][index[b]]

        diversify(order, section_map, similarity, rule=DiversityRule(), fresh=ids[-3:],
                  limit=30 if section == "top" else 20, cap_sections=section == "top")
        pages += 1
    t2 = time.perf_counter()
    return pages, t1 - t0, t2 - t1


def naive_edition(parts_rows: list[dict[str, object]], story_sections: dict[str, list[str]], region: str,
                  language: str) -> dict[str, list[str]]:
    """The straightforward way: score every story of the language for this edition, sort per section."""
    by_section: dict[str, list[tuple[float, str]]] = {"top": []}
    for r in parts_rows:
        if r["language"] != language:
            continue
        base = sum((c + 0.5 * v) * f for c, v, f in zip(r["coverage"], r["velocity"], r["freshness"], strict=True)) / 5
        share = 0.0
        for reg, sh in zip(r["regions"], r["region_shares"], strict=True):
            if reg == region:
                share = sh
        score = base * (0.5 + 0.5 * share)
        by_section["top"].append((score, r["story_id"]))
        for s in story_sections.get(r["story_id"], ()):
            by_section.setdefault(s, []).append((score, r["story_id"]))
    return {s: [sid for _, sid in sorted(rows, key=lambda x: (-x[0], x[1]))[:30]] for s, rows in by_section.items()}


def sql_stage(stories: int, articles_per_story: int, seed: int) -> None:
    """Time ``story_scores.sql`` (the SQL stage the synthetic aggregates stand for) on DuckDB over
    synthetic article and story-change logs of ``stories`` active stories."""
    import tempfile
    from pathlib import Path

    import pyarrow as pa

    from warehouse import layout
    from warehouse.duck import connect, load_sql
    from warehouse.schemas import ARTICLES_SCHEMA, PUBLISHERS_SCHEMA, STORY_CHANGES_SCHEMA
    from warehouse.store import LocalStore
    from warehouse.tables import write_segment, write_table

    rng = np.random.default_rng(seed)
    n = stories * articles_per_story
    story = np.repeat(np.arange(stories), articles_per_story)
    publishers = 2000
    born = rng.uniform(0, 40 * 3600, size=stories)
    seen = born[story] + rng.exponential(3600, size=n)
    keep = seen < 48 * 3600
    story, seen = story[keep], seen[keep]
    n = len(story)
    at = np.datetime64(NOW.replace(tzinfo=None) - timedelta(hours=48), "us") + (seen * 1e6).astype("timedelta64[us]")
    ids = pa.array([f"a{i:09d}" for i in range(n)])
    pub = rng.integers(0, publishers, size=n)
    ts = pa.array(at, type=pa.timestamp("us", tz="UTC"))
    cols = {"article_id": ids, "version": pa.array(np.ones(n, dtype=np.int32)), "content_hash": ids,
            "publisher_id": pa.array([f"p{p:04d}" for p in pub]), "language": pa.array(["en"] * n),
            "first_seen_at": ts, "published_at": ts}
    articles = pa.table({f.name: cols.get(f.name, pa.nulls(n, f.type)) for f in ARTICLES_SCHEMA},
                        schema=ARTICLES_SCHEMA)
    order = np.argsort(seen, kind="stable")
    ccols = {"change_id": ids, "offset": pa.array(np.argsort(order).astype(np.int64)), "language": pa.array(["en"] * n),
             "kind": pa.array(["assign"] * n), "story_id": pa.array([f"s{s:07d}" for s in story]), "article_id": ids,
             "changed_at": ts}
    changes = pa.table({f.name: ccols.get(f.name, pa.nulls(n, f.type)) for f in STORY_CHANGES_SCHEMA},
                       schema=STORY_CHANGES_SCHEMA)
    pubs = pa.table({"publisher_id": [f"p{p:04d}" for p in range(publishers)], "name": ["x"] * publishers,
                     "domain": ["x"] * publishers, "region": [f"EN{p % 35:02d}" for p in range(publishers)],
                     "language": ["en"] * publishers, "tier": pa.array([1] * publishers, pa.int8()),
                     "authority": pa.array(rng.uniform(0.1, 1, publishers), pa.float32()),
                     "is_paywalled": [False] * publishers, "is_opted_out": [False] * publishers}, schema=PUBLISHERS_SCHEMA)
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(Path(tmp) / "store")
        write_table(store, layout.PUBLISHERS_KEY, pubs, PUBLISHERS_SCHEMA)
        for i, chunk in enumerate(np.array_split(np.arange(n), 8)):
            part = pa.array(chunk)
            write_segment(store, layout.article_segment_key(NOW, f"bench{i:02d}"), articles.take(part), ARTICLES_SCHEMA)
            write_segment(store, layout.story_changes_key("en", i * n), changes.take(part), STORY_CHANGES_SCHEMA)
        t = time.perf_counter()
        con = connect(store)
        con.execute("set threads = 2")
        read_s = time.perf_counter() - t
        params = {"now": NOW, "coverage_window_hours": 6.0, "half_life_hours": 4.0, "active_hours": 48.0,
                  "velocity_window_minutes": 30.0, "cycle_seconds": 60, "smoothing_cycles": 5,
                  "burst_window_minutes": 5.0, "burst_min_articles": 10, "burst_min_publishers": 5,
                  "burst_authority_floor": 0.3, "breaking_hours": 2.0, "breaking_new_story_minutes": 60.0}
        t = time.perf_counter()
        rows = con.sql(load_sql("story_scores"), params=params).to_arrow_table().num_rows
        sql_s = time.perf_counter() - t
        con.close()
    print(f"story_scores.sql on DuckDB (2 threads): {sql_s:.2f} s for {n:,} articles -> {rows:,} active stories "
          f"(+ {read_s:.2f} s reading the logs from a local store into DuckDB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stories", type=int, default=300_000)
    parser.add_argument("--naive-editions", type=int, default=7, help="editions the naive loop runs (extrapolated)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--sql-articles-per-story", type=int, default=0,
                        help="also time story_scores.sql over synthetic logs with this many articles per story")
    args = parser.parse_args()
    if args.sql_articles_per_story:
        sql_stage(args.stories, args.sql_articles_per_story, args.seed)
    t = time.perf_counter()
    parts, sections, editions = synthesize(args.stories, args.seed)
    rng = np.random.default_rng(args.seed)
    vecs = rng.normal(size=(args.stories, 16))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    vectors = dict(zip(parts["story_id"].to_list(), vecs, strict=True))
    print(f"synthetic aggregates: {args.stories:,} active stories, {editions.height} editions, "
          f"{len(SECTIONS) + 1} sections (top + {len(SECTIONS)}), {sections.height:,} story-section rows; "
          f"built in {time.perf_counter() - t:.1f} s; POLARS_MAX_THREADS={os.environ['POLARS_MAX_THREADS']}, "
          f"cpus={len(os.sched_getaffinity(0))}")
    fast_cycle(parts.head(1000), sections, editions, vectors)  # warm-up
    t = time.perf_counter()
    pages, polars_s, python_s = fast_cycle(parts, sections, editions, vectors)
    fast = time.perf_counter() - t
    print(f"rank cycle (polars score+top-K, then stabilize+diversify per page): {fast:.2f} s "
          f"[polars {polars_s:.2f} s, pages {python_s:.2f} s] for {pages} pages")
    rows = parts.to_dicts()
    story_sections: dict[str, list[str]] = {}
    for sid, sec in sections.iter_rows():
        story_sections.setdefault(sid, []).append(sec)
    sample = editions.head(args.naive_editions).rows()
    t = time.perf_counter()
    for _, language, region in sample:
        naive_edition(rows, story_sections, region, language)
    naive = time.perf_counter() - t
    # Editions of a language scan that language's stories: extrapolate by stories scanned.
    counts = parts.group_by("language").len()
    per_lang = dict(counts.rows())
    scanned_sample = sum(per_lang[lang] for _, lang, _ in sample)
    scanned_all = sum(per_lang[lang] for lang in editions["language"].to_list())
    estimate = naive / scanned_sample * scanned_all
    print(f"naive per-edition python loop: {naive:.2f} s for {len(sample)} editions "
          f"-> {estimate:.1f} s estimated for all {editions.height} editions")
    print(f"speed-up: {estimate / fast:.1f}x; goal <= 30 s: {'met' if fast <= 30 else 'missed'}")
    print_json_line({  # the figures, as one line (bench/headline.py reads it)
        "stories": args.stories, "editions": editions.height, "pages": pages, "cycle_s": round(fast, 3),
        "naive_estimate_s": round(estimate, 3), "naive_editions_run": len(sample), "ratio": round(estimate / fast, 2),
    })


if __name__ == "__main__":
    main()
