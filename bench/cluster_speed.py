"""Assignment throughput of one language writer with 50,000 active stories (issue 4).

    taskset -c 0,1 .venv/bin/python -m bench.cluster_speed [--stories 50000] [--articles 5000]

Measures :meth:`transforms.clustering.LanguageClusterer.assign` (copy check by MinHash LSH,
candidate stories from the inverted index, scoring, centroid update, hourly expiry) on
precomputed features: feature extraction and any embedding are excluded, as they run in the
ingest flow, not in the writer.

Synthetic but realistic features, seeded:

- a vocabulary of ``VOCAB`` terms with Zipf frequencies (exponent ``ZIPF``); a story has 40
  topic terms drawn log-uniformly from ranks 100..VOCAB (what it is about) and 6 entities; an
  article has 24 of its story's topic terms with tf 1-4, 40 background terms drawn by Zipf
  frequency with tf 1, the top 64 kept and L2-normalised (as ``features.term_vector`` does),
  3 of its story's entities and 2 background ones, and sometimes a year;
- MinHash of 300 random 64-bit shingle hashes (``signatures.minhash_from_hashes``); a copy
  keeps 80% of its original's shingles and adds 10% new ones (Jaccard about 0.7);
- a 512-d unit sentence embedding near its story's direction (cosine about 0.8), as the ingest
  flow stores one for every article (issue 14; ``--no-embeddings`` leaves them out), and a share
  ``--headline-share`` of articles known by their headline alone: 8 terms and no body to sign,
  so the writer scores them on their embedding and reads more postings to find their story.

The IDF's document counts are scaled to the steady state of a writer that has run for weeks.
The 50,000 stories (1-4 articles each, about 2 on average, spread over the 47 hours before the
stream starts) are built as a writer checkpoint and loaded with ``LanguageClusterer.from_state``,
the path a writer takes on every run. The measured stream then arrives at the steady-state
rate (articles over 48 hours): 10% copies of a recent article, 55% follow-ups of an existing
story, 35% new stories.

The writer's objects are frozen out of the garbage collector after loading (``gc.freeze``), as
a long-running writer should do. The brute-force baseline is the same clusterer scoring every active story in full (no
inverted index, no shortlist), loaded from the same checkpoint and fed the first
``--brute-articles`` articles of the same stream in the same run; its decisions are compared
with the indexed ones over those articles.
"""

from __future__ import annotations

import argparse
import base64
import gc
import math
import sys
import time
from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import numpy as np

from bench.harness import print_json_line
from tasks.progress import terminal_progress
from tasks.writer.state import paused_gc
from transforms.clustering import (
    STATE_VERSION,
    Assignment,
    ClusterParams,
    LanguageClusterer,
    make_story_id,
)
from transforms.clustering.idf import Idf
from transforms.clustering.state import encode_minhash
from transforms.clustering.story import embedding_code
from transforms.features import ArticleFeatures
from transforms.signatures import SIGNATURE_VERSION, minhash_from_hashes

VOCAB = 100_000
ENTITY_VOCAB = 30_000
ZIPF = 1.05
TOPIC_TERMS = 40
SHINGLES = 300
EMBEDDING_DIM = 512
EMBEDDING_NOISE = 0.75
HEADLINE_TERMS = 8
T_START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
_LAST_CPU_SECONDS = 0.0


Topic = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A story's topic terms, entities and embedding direction."""


def _member_row(m: ArticleFeatures, member_terms: int) -> list[object]:
    """A member row as the writer's checkpoint holds it (transforms.clustering.state.member_to_json)."""
    code = embedding_code(m.embedding)
    return [m.article_id, _ms(m.first_seen_at), m.publisher_id, None, list(m.terms[:member_terms]),
            list(m.term_weights[:member_terms]), list(m.entities), any(v != 2**32 - 1 for v in m.minhash),
            None if code is None else base64.b64encode(code).decode("ascii")]


class _Synth:
    """Seeded generator of stories and their articles' features."""

    def __init__(self, seed: int, embeddings: bool = True, headline_share: float = 0.0) -> None:
        self.rng = np.random.default_rng(seed)
        self.embeddings = embeddings
        self.headline_share = headline_share
        ranks = np.arange(1, VOCAB + 1, dtype=np.float64)
        p = ranks**-ZIPF
        self.term_cdf = np.cumsum(p / p.sum())
        eranks = np.arange(1, ENTITY_VOCAB + 1, dtype=np.float64)
        pe = eranks**-ZIPF
        self.entity_cdf = np.cumsum(pe / pe.sum())
        self.counter = 0

    def _zipf_terms(self, n: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.term_cdf, self.rng.random(n)), VOCAB - 1)

    def _zipf_entities(self, n: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.entity_cdf, self.rng.random(n)), ENTITY_VOCAB - 1)

    def new_topic(self) -> Topic:
        topic = np.exp(self.rng.uniform(math.log(100), math.log(VOCAB), TOPIC_TERMS)).astype(np.int64) - 1
        direction = self.rng.normal(size=EMBEDDING_DIM)
        return topic, self._zipf_entities(6), direction / np.linalg.norm(direction)

    def _embedding(self, direction: np.ndarray) -> tuple[float, ...] | None:
        if not self.embeddings:
            return None
        noise = self.rng.normal(size=EMBEDDING_DIM)
        vector = direction + EMBEDDING_NOISE * noise / np.linalg.norm(noise)
        return tuple(float(x) for x in (vector / np.linalg.norm(vector)).astype(np.float32))

    def article(self, topic: Topic, when: datetime,
                copy_of: ArticleFeatures | None = None, shingles: np.ndarray | None = None,
                ) -> tuple[ArticleFeatures, np.ndarray]:
        self.counter += 1
        aid = f"a{self.counter:08d}"
        terms_idx, story_entities, direction = topic
        headline_only = copy_of is None and self.rng.random() < self.headline_share
        tf: dict[int, float] = defaultdict(float)
        if headline_only:  # a title-only item: a few of its story's words and one common word
            for t in self.rng.choice(terms_idx, HEADLINE_TERMS - 1, replace=False):
                tf[int(t)] += 1.0
            tf[int(self._zipf_terms(1)[0])] += 1.0
        else:
            for t in self.rng.choice(terms_idx, 24, replace=False):
                tf[int(t)] += float(self.rng.integers(1, 5))
            for t in self._zipf_terms(40):
                tf[int(t)] += 1.0
        weights = {f"w{t}": 1.0 + math.log(c) for t, c in tf.items()}
        if self.rng.random() < 0.3:
            weights["2026"] = 1.5
        ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:64]
        norm = math.sqrt(sum(w * w for _, w in ranked))
        entities = [f"n{e}" for e in self.rng.choice(story_entities, 3, replace=False)]
        entities += [f"n{e}" for e in self._zipf_entities(2)]
        if copy_of is not None and shingles is not None:
            keep = shingles[self.rng.random(shingles.size) < 0.8]
            hashes = np.concatenate([keep, self.rng.integers(0, 2**63, SHINGLES // 10, dtype=np.uint64)])
        elif headline_only:
            hashes = np.array([], dtype=np.uint64)  # no body to sign: the empty signature
        else:
            hashes = self.rng.integers(0, 2**63, SHINGLES, dtype=np.uint64)
        features = ArticleFeatures(
            article_id=aid, language="en", first_seen_at=when, publisher_id=f"p{self.rng.integers(0, 2000)}",
            title="", simhash=0, minhash=tuple(int(v) for v in minhash_from_hashes(hashes)),
            terms=tuple(t for t, _ in ranked), term_weights=tuple(w / norm for _, w in ranked),
            entities=tuple(dict.fromkeys(entities)), embedding=self._embedding(direction),
            signature_version=SIGNATURE_VERSION,
        )
        return features, hashes


def _ms(when: datetime) -> int:
    return (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def build_state(synth: _Synth, stories: int, params: ClusterParams
                ) -> tuple[dict[str, object], list[tuple[str, Topic]], list[tuple[ArticleFeatures, np.ndarray]]]:
    """A writer checkpoint with ``stories`` active stories, as the writer's own code would leave it."""
    story_rows: list[list[object]] = []
    recent: list[list[object]] = []
    df: dict[str, float] = defaultdict(float)
    n_docs = 0
    topics: list[tuple[str, Topic]] = []
    articles: list[tuple[ArticleFeatures, np.ndarray]] = []
    span_ms = 47 * 3_600_000
    for i in range(stories):
        topic = synth.new_topic()
        size = int(synth.rng.integers(1, 5))
        start = T_START - timedelta(milliseconds=span_ms * (1 - i / stories))
        members = []
        for k in range(size):
            when = start + timedelta(minutes=20 * k)
            features, hashes = synth.article(topic, min(when, T_START - timedelta(seconds=1)))
            members.append(features)
            articles.append((features, hashes))
            n_docs += 1
            for t in features.terms:
                df[t] += 1.0
            for e in features.entities:
                df["e:" + e] += 1.0
        summed: dict[str, float] = defaultdict(float)
        for m in members:
            for t, w in zip(m.terms, m.term_weights, strict=True):
                summed[t] += w / size
        centroid = sorted(summed.items(), key=lambda kv: (-kv[1], kv[0]))[: params.centroid_terms]
        entity_counts: dict[str, float] = defaultdict(float)
        for m in members:
            for e in m.entities:
                entity_counts[e] += 1.0
        first = members[0]
        sid = make_story_id(first.first_seen_at, first.article_id)
        years = sorted({t for m in members for t in m.terms if t == "2026"})
        member_rows = [_member_row(m, params.member_terms) for m in members]
        story_rows.append([sid, first.article_id, _ms(first.first_seen_at), _ms(members[-1].first_seen_at), size,
                           [[t, w] for t, w in centroid], [[e, c] for e, c in entity_counts.items()], years,
                           member_rows, None])
        for m in members:
            recent.append([m.article_id, sid, m.article_id, _ms(m.first_seen_at), encode_minhash(np.asarray(m.minhash))])
        topics.append((sid, topic))
    # The online IDF of a writer that has run for weeks: document frequencies decayed with a
    # half-life of idf_half_life_hours hold rate × half-life / ln 2 documents, where arrivals
    # and decay balance. The 47 hours generated here are scaled up to that level.
    steady = (n_docs / 47.0) * params.idf_half_life_hours / math.log(2)
    scale = max(1.0, steady / n_docs)
    state = {
        "version": STATE_VERSION, "signature_version": SIGNATURE_VERSION, "language": "en",
        "params": {f: getattr(params, f) for f in params.__slots__},
        "clock_ms": _ms(T_START - timedelta(seconds=1)), "decayed_ms": _ms(T_START - timedelta(seconds=1)),
        "n_docs": n_docs * scale, "df": [[t, c * scale] for t, c in df.items()], "stories": story_rows, "recent": recent,
    }
    return state, topics, articles


def build_stream(synth: _Synth, n: int, topics: list[tuple[str, Topic]],
                 prebuilt: list[tuple[ArticleFeatures, np.ndarray]], per_hour: float
                 ) -> list[tuple[ArticleFeatures, str, str | None]]:
    """``(features, intended story key, intended original)``: 10% copies, 55% follow-ups, 35% new."""
    out: list[tuple[ArticleFeatures, str, str | None]] = []
    pool = list(topics)
    recent = [(f, h) for f, h in prebuilt[-20_000:] if h.size]  # copies are of articles with a body
    gap = 3_600_000 / per_hour
    for i in range(n):
        when = T_START + timedelta(milliseconds=gap * i)
        r = synth.rng.random()
        if r < 0.10:
            original, hashes = recent[int(synth.rng.integers(len(recent) - 2000, len(recent)))]
            topic = pool[-1][1]  # a copy is caught before its terms are scored
            features, _ = synth.article(topic, when, copy_of=original, shingles=hashes)
            out.append((features, "copy", original.article_id))
            continue
        if r < 0.65:
            key, topic = pool[int(synth.rng.integers(max(0, len(pool) - 20_000), len(pool)))]
        else:
            topic = synth.new_topic()
            key = f"new-{i}"
            pool.append((key, topic))
        features, hashes = synth.article(topic, when)
        if hashes.size:
            recent.append((features, hashes))
        out.append((features, key, None))
    return out


def warm_norms(clusterer: LanguageClusterer) -> None:
    """Fill the stories' cached norms, as a writer that has been running leaves them.

    A story's norms are computed when it is first scored after a change and saved with the
    checkpoint; the synthetic checkpoint has none, so without this the timed stream would pay
    a cold start (one norm per story it meets) that a running writer never pays.
    """
    clusterer.warm_story_norms()


class BruteForceClusterer(LanguageClusterer):
    """The baseline: every active story is a candidate and is scored in full."""

    def _candidate_dots(
        self, vector: Mapping[str, float], idf: Idf, has_body: bool, has_embedding: bool
    ) -> tuple[dict[str, float], list[tuple[str, float]]]:
        weighted = [(t, w * idf(t)) for t, w in vector.items()]
        out: dict[str, float] = {}
        for sid, story in self.stories.items():
            centroid = story.centroid
            out[sid] = sum(w * centroid.get(t, 0.0) for t, w in weighted)
        return out, []


def _run(clusterer: LanguageClusterer, stream: list[tuple[ArticleFeatures, str, str | None]]
         ) -> tuple[list[Assignment], float]:
    start, cpu = time.perf_counter(), time.process_time()
    out = [clusterer.assign(f) for f, _, _ in stream]
    global _LAST_CPU_SECONDS
    _LAST_CPU_SECONDS = time.process_time() - cpu
    return out, time.perf_counter() - start


def _quality(stream: list[tuple[ArticleFeatures, str, str | None]], out: list[Assignment],
             story_key: dict[str, str]) -> str:
    copies = [(a, o) for (_, k, o), a in zip(stream, out, strict=True) if k == "copy"]
    found = sum(1 for a, o in copies if a.copy_of is not None)
    follow = [(a, k) for (_, k, _), a in zip(stream, out, strict=True) if k != "copy" and not k.startswith("new-")]
    joined = sum(1 for a, k in follow if a.story_id == story_key.get(k, k))
    fresh = [a for (_, k, _), a in zip(stream, out, strict=True) if k.startswith("new-")]
    started = sum(1 for a in fresh if a.is_new_story)
    return (f"copies found {found}/{len(copies)}, follow-ups joined their story {joined}/{len(follow)}, "
            f"new topics started a story {started}/{len(fresh)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=50_000)
    parser.add_argument("--articles", type=int, default=5_000)
    parser.add_argument("--brute-articles", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-embeddings", action="store_true", help="articles without sentence embeddings")
    parser.add_argument("--headline-share", type=float, default=0.1,
                        help="share of articles known by their headline alone (no body to sign)")
    args = parser.parse_args(argv)
    params = ClusterParams()
    synth = _Synth(args.seed, embeddings=not args.no_embeddings, headline_share=args.headline_share)
    t0 = time.perf_counter()
    with terminal_progress() as progress:  # stages only: nothing draws inside a timed run
        progress.stage(f"synthesising {args.stories} stories")
        state, topics, prebuilt = build_state(synth, args.stories, params)
        per_hour = len(prebuilt) / 48.0
        progress.stage(f"synthesising {args.articles} articles")
        stream = build_stream(synth, args.articles, topics, prebuilt, per_hour)
    t1 = time.perf_counter()
    with paused_gc():  # as tasks.writer.session.load_writer_state rebuilds it
        indexed = LanguageClusterer.from_state(state)
    warm_norms(indexed)
    # A writer holds ~10^7 long-lived objects after loading its state; without freezing them
    # every full garbage collection walks them all (halving throughput); tasks/writer/run.py
    # does the same after load_writer_state.
    gc.collect()
    gc.freeze()
    t2 = time.perf_counter()
    print(f"synthetic: {'no embeddings' if args.no_embeddings else 'embeddings'}, "
          f"{args.headline_share:.0%} of articles headline-only; "
          f"{args.stories} stories from {len(prebuilt)} articles over 47 h "
          f"(generated in {t1 - t0:.1f} s); from_state {t2 - t1:.1f} s; "
          f"active stories {indexed.active_story_count}")
    out, elapsed = _run(indexed, stream)
    story_key = {sid: sid for sid, _ in topics}
    first_of_new: dict[str, str] = {}
    for (_, k, _), a in zip(stream, out, strict=True):
        if k.startswith("new-") and k not in first_of_new:
            first_of_new[k] = a.story_id
    story_key.update(first_of_new)
    print(f"indexed     {len(stream):6d} articles in {elapsed:7.2f} s = {len(stream) / elapsed:8.1f} articles/s "
          f"(active stories at end {indexed.active_story_count})")
    print(f"            CPU time {_LAST_CPU_SECONDS:7.2f} s = {len(stream) / _LAST_CPU_SECONDS:8.1f} articles/s of CPU "
          "(what a shared machine's load does not change)")
    print(f"            {_quality(stream, out, story_key)}")
    indexed_cpu = _LAST_CPU_SECONDS
    # Every story is a candidate and is scored in full (with the same norm cache).
    exhaustive = {**state["params"], "max_candidates": 10**9}  # type: ignore[dict-item]
    with paused_gc():
        brute = BruteForceClusterer.from_state({**state, "params": exhaustive})
    warm_norms(brute)
    gc.collect()
    gc.freeze()
    head = stream[: args.brute_articles]
    brute_out, brute_elapsed = _run(brute, head)
    same = sum(1 for a, b in zip(out, brute_out, strict=False) if (a.story_id, a.copy_of) == (b.story_id, b.copy_of))
    print(f"brute force {len(head):6d} articles in {brute_elapsed:7.2f} s = {len(head) / brute_elapsed:8.1f} articles/s")
    print(f"            same decision as indexed on {same}/{len(head)} articles; "
          f"speed-up {(len(stream) / elapsed) / (len(head) / brute_elapsed):.0f}x")
    print_json_line({  # the figures, as one line (bench/headline.py reads it)
        "stories": args.stories, "articles": len(stream), "brute_articles": len(head),
        "indexed_articles_per_s": round(len(stream) / elapsed, 1),
        "indexed_cpu_articles_per_s": round(len(stream) / indexed_cpu, 1),
        "brute_articles_per_s": round(len(head) / brute_elapsed, 1),
        "brute_cpu_articles_per_s": round(len(head) / _LAST_CPU_SECONDS, 1),
        "ratio": round((len(stream) / elapsed) / (len(head) / brute_elapsed), 1),
        "cpu_ratio": round((len(stream) / indexed_cpu) / (len(head) / _LAST_CPU_SECONDS), 1),
        "same_decisions": same,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
