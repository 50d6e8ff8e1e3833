"""A synthetic news world written straight into a store with the warehouse code, for rank tests.

Publishers go into the registry, articles into ``log/articles`` segments and their story
assignments into ``log/story_changes`` segments, exactly as ingest and the cluster writer write
them; the rank code then reads them through DuckDB like in production.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from warehouse import layout
from warehouse.schemas import ARTICLES_SCHEMA, PUBLISHERS_SCHEMA, STORY_CHANGES_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import content_segment_id, rows_to_table, write_segment, write_table

START = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
TOPICS = {
    "business": "stocks market profit bank inflation earnings investors",
    "sports": "match league coach goal championship tournament team",
    "technology": "software smartphone chip startup internet data robot",
    "politics": "election parliament senate campaign vote lawmakers ballot",
    "world": "ceasefire border embassy refugees diplomat summit sanctions",
    "health": "hospital vaccine virus patients doctors outbreak clinic",
}
REGIONS = ("US", "US", "US", "GB", "SG")


def _id(*parts: object) -> str:
    return hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).hexdigest()


@dataclass
class World:
    store: ObjectStore
    publishers: int = 24
    seed: int = 5
    offset: int = 0
    stories: dict[str, str] = field(default_factory=dict)  # story_id -> topic
    articles: dict[str, int] = field(default_factory=dict)  # story_id -> articles so far

    def __post_init__(self) -> None:
        rows = []
        for i in range(self.publishers):
            rows.append({
                "publisher_id": f"pub{i:02d}", "name": f"Publisher {i}", "domain": f"pub{i}.example",
                "region": REGIONS[i % len(REGIONS)], "language": "en", "tier": 1 + i % 3,
                "authority": round(0.35 + 0.6 * ((i * 7) % self.publishers) / self.publishers, 3),
                "is_paywalled": i % 4 == 0, "is_opted_out": False,
            })
        write_table(self.store, layout.PUBLISHERS_KEY, rows_to_table(rows, PUBLISHERS_SCHEMA), PUBLISHERS_SCHEMA)
        self.rng = random.Random(self.seed)

    def publisher_ids(self) -> list[str]:
        return [f"pub{i:02d}" for i in range(self.publishers)]

    def add(self, items: Sequence[tuple[str, str, datetime] | tuple[str, str, datetime, str]], *,
            topic: str | None = None) -> None:
        """Write articles ``(story_id, publisher_id, first_seen_at[, title])`` as one segment, plus
        their changes; without a title, one is made from the story's topic."""
        articles, changes = [], []
        for item in sorted(items, key=lambda x: (x[2], x[0], x[1])):
            story_id, publisher_id, seen = item[:3]
            self.stories.setdefault(story_id, topic or sorted(TOPICS)[len(self.stories) % len(TOPICS)])
            n = self.articles.get(story_id, 0)
            self.articles[story_id] = n + 1
            words = TOPICS[self.stories[story_id]].split()
            article_id = _id(story_id, publisher_id, seen.isoformat(), n)
            title = item[3] if len(item) > 3 else \
                f"{story_id} {words[n % len(words)]} {words[(n + 3) % len(words)]} report number {n}"
            terms = [f"{story_id}-k{j}" for j in range(6)] + [words[n % len(words)]]
            articles.append({
                "article_id": article_id, "version": 1, "content_hash": article_id, "url": f"https://{publisher_id}.example/{article_id}",
                "canonical_url": f"https://{publisher_id}.example/{article_id}", "feed_id": f"feed-{publisher_id}",
                "publisher_id": publisher_id, "language": "en", "region": None, "title": title,
                "snippet": f"{title}.", "image_url": None, "author": None, "section": None, "categories": [],
                "is_opinion": False, "published_at": seen, "first_seen_at": seen, "simhash": 0, "minhash": [],
                "terms": terms, "term_weights": [1.0] * len(terms), "entities": [], "embedding": [],
                "signature_version": "test", "section_guess": self.stories[story_id],
            })
            self.offset += 1
            changes.append({
                "change_id": _id("change", article_id), "offset": self.offset, "language": "en",
                "kind": "new_story" if n == 0 else "assign", "story_id": story_id, "article_id": article_id,
                "copy_of": None, "other_story_id": None, "score": 1.0, "changed_at": seen,
            })
        if not articles:
            return
        table = rows_to_table(articles, ARTICLES_SCHEMA)
        write_segment(self.store, layout.article_segment_key(articles[0]["first_seen_at"], content_segment_id(table)),
                      table, ARTICLES_SCHEMA)
        first = changes[0]["offset"]
        write_segment(self.store, layout.story_changes_key("en", first), rows_to_table(changes, STORY_CHANGES_SCHEMA),
                      STORY_CHANGES_SCHEMA)

    def quiet_minute(self, at: datetime, stories: list[str], per_minute: float) -> list[tuple[str, str, datetime]]:
        """Articles for one quiet minute: each story gets one with probability ``per_minute``."""
        items = []
        for sid in stories:
            if self.rng.random() < per_minute:
                items.append((sid, self.rng.choice(self.publisher_ids()), at - timedelta(seconds=self.rng.randint(1, 59))))
        return items


def quiet_world(store: ObjectStore, *, stories: int = 30, history_minutes: int = 240, per_minute: float = 0.08,
                seed: int = 5) -> tuple[World, list[str], datetime]:
    """A world with ``stories`` steady stories and ``history_minutes`` of past articles; returns the
    world, the story ids and the instant the history ends at."""
    world = World(store, seed=seed)
    ids = [f"story{i:03d}" for i in range(stories)]
    now = START + timedelta(minutes=history_minutes)
    items = []
    for i, sid in enumerate(ids):
        born = START + timedelta(minutes=(i * 37) % (history_minutes - 60))
        pubs = world.rng.sample(world.publisher_ids(), 3 + i % 6)
        for j, p in enumerate(pubs):
            items.append((sid, p, born + timedelta(minutes=7 * j)))
    for minute in range(history_minutes):
        at = START + timedelta(minutes=minute + 1)
        items += [x for x in world.quiet_minute(at, ids, per_minute)
                  if x[2] > next(t for s, _, t in items if s == x[0])]
    world.add(items)
    return world, ids, now


def day_world(store: ObjectStore, *, stories: int = 160, hours: int = 24, seed: int = 9) -> tuple[World, datetime]:
    """A replay day written up front: stories appear all day, each covered by 2-14 publishers over
    the following hours (rank only sees what was first seen before its ``now``). Returns the world
    and the day's start (midnight UTC)."""
    world = World(store, seed=seed)
    day = START.replace(hour=0)
    items = []
    for i in range(stories):
        sid = f"day{i:03d}"
        born = day + timedelta(minutes=world.rng.randint(0, hours * 60 - 30))
        pubs = world.rng.sample(world.publisher_ids(), world.rng.randint(2, 14))
        for j, p in enumerate(pubs):
            items.append((sid, p, born + timedelta(minutes=world.rng.randint(0, 20) + 25 * j)))
    world.add(items)
    return world, day
