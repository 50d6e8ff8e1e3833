"""A stream of articles and story changes written into a store minute by minute, as ingest and the
cluster and repair writers write them, with every kind of change the story aggregates must follow
(issue 15): new stories, joins, copies, new versions (acknowledged at once, a minute late, and before
their row), rows whose change comes a minute later, merges, splits, an opted-out publisher, stories
that expire, and an article segment written ahead of the clock.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tasks.settings import RankSettings
from warehouse import layout
from warehouse.schemas import ARTICLES_SCHEMA, PUBLISHERS_SCHEMA, STORY_CHANGES_SCHEMA
from warehouse.store import ObjectStore
from warehouse.tables import content_segment_id, rows_to_table, write_segment, write_table

START = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
SETTINGS = RankSettings(active_hours=1.0, coverage_window_hours=0.5, velocity_window_minutes=10.0,
                        smoothing_cycles=3, burst_min_articles=3, burst_min_publishers=2, burst_window_minutes=5.0,
                        min_section_stories=1, top_stories=10, section_stories=5, pool_stories=50)
"""Short windows, so an hour and a half of stream sees stories expire and bursts go by."""
PUBLISHERS = [(f"p{i}", "US" if i % 3 else "GB", round(0.2 + 0.1 * i, 2), i == 7) for i in range(8)]
SECTIONS = ["world", "sports", "business", None]


def _id(*parts: object) -> str:
    return hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).hexdigest()


@dataclass
class Stream:
    store: ObjectStore
    seed: int = 3
    offset: int = 0
    members: dict[str, list[str]] = field(default_factory=dict)  # story -> article ids (the writer's view)
    publisher_of: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    held_rows: list[dict[str, Any]] = field(default_factory=list)  # rows whose segment comes later
    held_changes: list[dict[str, Any]] = field(default_factory=list)  # changes a writer commits later
    last_seen: dict[str, datetime] = field(default_factory=dict)  # story -> its newest article
    expired: int = 0  # stories the writer dropped
    splits: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        rows = [{"publisher_id": p, "name": f"Publisher {p}", "domain": f"{p}.example", "region": region,
                 "language": "en", "tier": 1, "authority": authority, "is_paywalled": p == "p2",
                 "is_opted_out": opted_out} for p, region, authority, opted_out in PUBLISHERS]
        write_table(self.store, layout.PUBLISHERS_KEY, rows_to_table(rows, PUBLISHERS_SCHEMA), PUBLISHERS_SCHEMA)

    def _row(self, article_id: str, story: str, publisher: str, seen: datetime, version: int = 1) -> dict[str, Any]:
        title = "" if self.rng.random() < 0.05 else f"{story} headline {article_id[:4]} v{version}"
        return {
            "article_id": article_id, "version": version, "content_hash": _id(article_id, version),
            "url": f"https://{publisher}.example/{article_id}", "canonical_url": f"https://{publisher}.example/{article_id}",
            "feed_id": f"f-{publisher}", "publisher_id": publisher, "language": "en", "region": None,
            "title": title, "snippet": f"{title}.", "image_url": None, "author": None,
            "section": self.rng.choice(SECTIONS), "categories": [], "is_opinion": False, "published_at": seen,
            "first_seen_at": seen, "simhash": 0, "minhash": [],
            "terms": [f"{story}-t{j}" for j in range(4)] + [f"w{self.rng.randint(0, 9)}"],
            "term_weights": [0.5, 0.5, 0.4, 0.4, 0.2], "entities": [f"name {story}"],
            "embedding": [self.rng.uniform(-1, 1) for _ in range(8)], "signature_version": "test",
            "section_guess": self.rng.choice(SECTIONS),
        }

    def _change(self, kind: str, story: str, article: str | None, at: datetime, *, copy_of: str | None = None,
                other: str | None = None) -> dict[str, Any]:
        return {"language": "en", "kind": kind, "story_id": story, "article_id": article, "copy_of": copy_of,
                "other_story_id": other, "score": 1.0, "changed_at": at}

    def _write(self, at: datetime, rows: list[dict[str, Any]], changes: list[dict[str, Any]]) -> None:
        if rows:
            table = rows_to_table(sorted(rows, key=lambda r: (r["first_seen_at"], r["article_id"])), ARTICLES_SCHEMA)
            write_segment(self.store, layout.article_segment_key(at, content_segment_id(table)), table, ARTICLES_SCHEMA)
        if changes:
            # A writer's commit: one segment, offsets from its checkpoint on, in its order.
            first = self.offset
            for i, c in enumerate(changes):
                c.update(offset=first + i, change_id=f"en:{first + i}")
            self.offset += len(changes)
            write_segment(self.store, layout.story_changes_key("en", first),
                          rows_to_table(changes, STORY_CHANGES_SCHEMA), STORY_CHANGES_SCHEMA)

    def minute(self, m: int) -> datetime:
        """Write minute ``m`` of the stream; returns its end (the instant a cycle runs at)."""
        end = START + timedelta(minutes=m + 1)
        rows, changes = list(self.held_rows), list(self.held_changes)
        self.held_rows, self.held_changes = [], []
        # The writer drops a story idle longer than the active window, as the aggregates do.
        idle = end - timedelta(hours=SETTINGS.active_hours) + timedelta(minutes=1)
        for story in [s for s, t in self.last_seen.items() if t < idle]:
            self.members.pop(story, None)
            del self.last_seen[story]
            self.expired += 1
        # A repair or a new version only ever follows decisions its writer committed.
        settled = [s for s, ms in self.members.items() if ms and not set(ms) & {c["article_id"] for c in changes}]
        live = [s for s, ms in self.members.items() if ms]
        for i in range(self.rng.randint(2, 5)):
            seen = end - timedelta(seconds=self.rng.randint(1, 59))
            publisher = self.rng.choice(PUBLISHERS)[0]
            aid = _id("a", m, i)
            row = self._row(aid, "?", publisher, seen)
            self.publisher_of[aid] = publisher
            if not live or self.rng.random() < 0.3:
                story = _id("s", m, i)
                self.members[story] = [aid]
                change = self._change("new_story", story, aid, seen)
            elif self.rng.random() < 0.2:
                story = self.rng.choice(live)
                original = self.members[story][0]
                self.members[story].append(aid)
                change = self._change("copy", story, aid, seen, copy_of=original)
            else:
                story = self.rng.choice(live)
                self.members[story].append(aid)
                change = self._change("assign", story, aid, seen)
            row["terms"][0] = f"{story}-t0"
            self.last_seen[story] = max(self.last_seen.get(story, seen), seen)
            if m % 7 == 3 and i == 0:
                self.held_changes.append(change)  # the writer commits it next minute
                rows.append(row)
            elif m % 11 == 5 and i == 0:
                changes.append(change)
                self.held_rows.append(row)  # its segment lands a minute after the change
            else:
                rows.append(row)
                changes.append(change)
        if m % 4 == 2 and settled:  # a new version of an older member, acknowledged now or a minute late
            story = self.rng.choice(settled)
            aid = self.rng.choice(self.members[story])
            self.versions[aid] = self.versions.get(aid, 1) + 1
            seen = end - timedelta(seconds=5)
            rows.append(self._row(aid, story, self.publisher_of[aid], seen, self.versions[aid]))
            version = self._change("version", story, aid, seen)
            (self.held_changes if m % 8 == 2 else changes).append(version)
        settled = [s for s in settled if s in self.members and not set(self.members[s])
                   & {c["article_id"] for c in self.held_changes}]
        if m % 13 == 9 and len(settled) >= 2:  # a merge: every member of one story moves to an older one
            keep, gone = sorted(self.rng.sample(settled, 2))
            for aid in self.members[gone]:
                changes.append(self._change("merge", keep, aid, end, other=gone))
            self.members[keep] += self.members.pop(gone)
            self.last_seen[keep] = max(self.last_seen[keep], self.last_seen.pop(gone))
            settled = [s for s in settled if s != gone]
        if m % 17 == 12:  # a split: the newer half of a story of 4+ leaves for a new story
            big = [s for s in settled if len(self.members[s]) >= 4]
            if big:
                story = self.rng.choice(big)
                half = self.members[story][len(self.members[story]) // 2:]
                new = _id("split", m, story)
                for aid in half:
                    changes.append(self._change("split", new, aid, end, other=story))
                self.members[story] = self.members[story][: len(self.members[story]) // 2]
                self.members[new] = half
                self.last_seen[new] = self.last_seen[story]
                self.splits += 1
        if m == 30:  # an ingest run ahead of the clock: one row of its segment is 3 minutes ahead
            ahead = self._row(_id("ahead", m), "?", "p1", end + timedelta(minutes=3))
            self.held_rows.append(self._row(_id("ahead2", m), "?", "p3", end - timedelta(seconds=2)))
            ahead_story = _id("s-ahead", m)
            self.members[ahead_story] = [ahead["article_id"]]
            self.last_seen[ahead_story] = ahead["first_seen_at"]
            self.publisher_of[ahead["article_id"]] = "p1"
            rows.append(ahead)
            self.held_changes.append(self._change("new_story", ahead_story, ahead["article_id"],
                                                  ahead["first_seen_at"]))
        self._write(end, rows, changes)
        return end
