"""A synthetic language writer at scale, for the writer benches (issue 15): a state of N active
stories built straight into a writer's objects, and minutes of new articles as ingest writes them.

The stories and articles follow bench/cluster_speed.py's model (Zipf background words, 40 topic
words and 6 entities per story, 1-4 articles per story over the 47 hours before the start, an IDF
scaled to a writer that has run for weeks), with two shortcuts that make 300,000 stories take a
minute instead of an hour: a signature is 128 random 32-bit values (a copy keeps 70% of its
original's, an estimated Jaccard of 0.7, as the MinHash of a reprint), and the state is built as
the writer's objects directly, not by assigning every article.

A stream minute holds ``per_minute`` articles: 10% copies of a recent article, 55% follow-ups of
an active story, 35% new stories.
"""

from __future__ import annotations

import hashlib
import math
from array import array
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from transforms.clustering import ClusterParams, LanguageClusterer, make_story_id
from transforms.clustering.story import Member, Story, entity_words, story_years
from transforms.features import ArticleFeatures, features_to_row
from transforms.signatures import NUM_PERM, SIGNATURE_VERSION

VOCAB = 100_000
ENTITY_VOCAB = 30_000
ZIPF = 1.05
TOPIC_TERMS = 40
T_START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ms(when: datetime) -> int:
    return (when - EPOCH) // timedelta(milliseconds=1)


class World:
    """Seeded generator of a writer's window and of the minutes after it."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        p = np.arange(1, VOCAB + 1, dtype=np.float64) ** -ZIPF
        self.term_cdf = np.cumsum(p / p.sum())
        pe = np.arange(1, ENTITY_VOCAB + 1, dtype=np.float64) ** -ZIPF
        self.entity_cdf = np.cumsum(pe / pe.sum())
        self.terms = [f"w{i}" for i in range(VOCAB)]
        self.entities = [f"n{i}" for i in range(ENTITY_VOCAB)]
        self.counter = 0
        self.topics: list[tuple[str, np.ndarray, np.ndarray]] = []  # (story id, topic terms, topic entities)
        self.recent: list[ArticleFeatures] = []

    def _topic(self) -> tuple[np.ndarray, np.ndarray]:
        terms = np.exp(self.rng.uniform(math.log(100), math.log(VOCAB), TOPIC_TERMS)).astype(np.int64) - 1
        entities = np.minimum(np.searchsorted(self.entity_cdf, self.rng.random(6)), ENTITY_VOCAB - 1)
        return terms, entities

    def article(self, topic: tuple[np.ndarray, np.ndarray], when: datetime,
                copy_of: ArticleFeatures | None = None) -> ArticleFeatures:
        """One article's features: 24 of the topic's words (tf 1-4), 40 background words, the 64
        heaviest kept and L2-normalised; 3 of the topic's entities and 2 background ones."""
        self.counter += 1
        rng = self.rng
        topic_terms, topic_entities = topic
        tf: dict[int, float] = defaultdict(float)
        for t, c in zip(rng.choice(topic_terms, 24, replace=False).tolist(), rng.integers(1, 5, 24).tolist(),
                        strict=True):
            tf[t] += c
        for t in np.minimum(np.searchsorted(self.term_cdf, rng.random(40)), VOCAB - 1).tolist():
            tf[t] += 1.0
        ranked = sorted(((1.0 + math.log(c), t) for t, c in tf.items()), key=lambda x: (-x[0], x[1]))[:64]
        norm = math.sqrt(sum(w * w for w, _ in ranked))
        entities = [self.entities[e] for e in rng.choice(topic_entities, 3, replace=False).tolist()]
        entities += [self.entities[e] for e in np.minimum(np.searchsorted(self.entity_cdf, rng.random(2)),
                                                          ENTITY_VOCAB - 1).tolist()]
        if copy_of is not None:
            signature = np.asarray(copy_of.minhash, dtype=np.uint32).copy()
            swap = rng.random(NUM_PERM) < 0.3
            signature[swap] = rng.integers(0, 2**32 - 1, int(swap.sum()), dtype=np.uint32)
        else:
            signature = rng.integers(0, 2**32 - 1, NUM_PERM, dtype=np.uint32)
        return ArticleFeatures(
            article_id=f"a{self.counter:09d}", language="en", first_seen_at=when,
            publisher_id=f"p{int(rng.integers(0, 2000))}", title="", simhash=0, minhash=tuple(signature.tolist()),
            terms=tuple(self.terms[t] for _, t in ranked), term_weights=tuple(w / norm for w, _ in ranked),
            entities=tuple(dict.fromkeys(entities)), embedding=None, signature_version=SIGNATURE_VERSION)

    def window(self, stories: int, params: ClusterParams | None = None) -> LanguageClusterer:
        """A writer holding ``stories`` active stories of 1-4 articles over the 47 hours before
        ``T_START``, every article's signature recent, the IDF at a weeks-old writer's level."""
        params = params or ClusterParams()
        clusterer = LanguageClusterer("en", params)
        df: dict[str, float] = defaultdict(float)
        n_docs = 0
        span_ms = 47 * 3_600_000
        recent_rows: list[tuple[str, str, str, int]] = []
        signatures: list[tuple[int, ...]] = []
        intern: dict[str, str] = {}
        for i in range(stories):
            topic = self._topic()
            size = int(self.rng.integers(1, 5))
            start = T_START - timedelta(milliseconds=span_ms * (1 - i / stories))
            articles = [self.article(topic, min(start + timedelta(minutes=20 * k), T_START - timedelta(seconds=1)))
                        for k in range(size)]
            first = articles[0]
            sid = make_story_id(first.first_seen_at, first.article_id, "en")
            members = []
            summed: dict[str, float] = defaultdict(float)
            entity_counts: dict[str, float] = defaultdict(float)
            for a in articles:
                terms = tuple(intern.setdefault(t, t) for t in a.terms)
                n_docs += 1
                for t in terms:
                    df[t] += 1.0
                for e in entity_words(a.entities):
                    df["e:" + e] += 1.0
                    entity_counts[e] += 1.0
                for t, w in zip(terms, a.term_weights, strict=True):
                    summed[t] += w / size
                members.append(Member(a.article_id, _ms(a.first_seen_at), a.publisher_id, None,
                                      terms[:params.member_terms], array("d", a.term_weights[:params.member_terms]),
                                      tuple(entity_words(a.entities))))
                recent_rows.append((a.article_id, sid, a.article_id, _ms(a.first_seen_at)))
                signatures.append(a.minhash)
            centroid = dict(sorted(summed.items(), key=lambda kv: (-kv[1], kv[0]))[:params.centroid_terms])
            story = Story(sid, first.article_id, _ms(first.first_seen_at), _ms(articles[-1].first_seen_at), size,
                          centroid, dict(entity_counts), story_years(t for a in articles for t in a.terms), members)
            clusterer.stories[sid] = story
            for m in members:
                clusterer.story_of_member[m.article_id] = sid
            self.topics.append((sid, *topic))
            self.recent.extend(articles[-1:])
            del self.recent[:-20_000]
        steady = (n_docs / 47.0) * params.idf_half_life_hours / math.log(2)
        scale = max(1.0, steady / max(1, n_docs))
        clusterer.online_idf.df = {t: c * scale for t, c in df.items()}
        clusterer.online_idf.n_docs = n_docs * scale
        clusterer.clock_ms = clusterer.decayed_ms = _ms(T_START - timedelta(seconds=1))
        clusterer.term_index.add_all([(sid, s.centroid) for sid, s in clusterer.stories.items()])
        clusterer.copies.add_all(recent_rows, np.asarray(signatures, dtype=np.uint32))
        clusterer.warm_story_norms()
        return clusterer

    def minute(self, at: datetime, per_minute: int) -> list[ArticleFeatures]:
        """The articles first seen in the minute after ``at``."""
        out = []
        gap = 60_000 / per_minute
        for i in range(per_minute):
            when = at + timedelta(milliseconds=gap * i)
            r = self.rng.random()
            if r < 0.10 and self.recent:
                original = self.recent[int(self.rng.integers(max(0, len(self.recent) - 2000), len(self.recent)))]
                out.append(self.article(self.topics[-1][1:], when, copy_of=original))
                continue
            if r < 0.65:
                _, *topic = self.topics[int(self.rng.integers(max(0, len(self.topics) - 20_000), len(self.topics)))]
            else:
                topic = list(self._topic())
                self.topics.append((f"new-{self.counter}", *topic))
            features = self.article((topic[0], topic[1]), when)
            self.recent.append(features)
            out.append(features)
        del self.recent[:-20_000]
        return out


def article_row(features: ArticleFeatures) -> dict[str, Any]:
    """An article segment row, as ingest writes it."""
    return {**features_to_row(features), "version": 1,
            "content_hash": hashlib.sha1(features.article_id.encode()).hexdigest(),
            "url": f"https://example.com/{features.article_id}",
            "canonical_url": f"https://example.com/{features.article_id}", "feed_id": "feed", "region": "US",
            "snippet": "", "image_url": None, "author": None, "section": "world", "categories": [],
            "is_opinion": False, "published_at": features.first_seen_at}
