"""A store holding every kind of object the pipeline writes, built by the real pipeline code, and the
faults the store-fault tests inject into it (issue 16).

Two cycles (ingest, cluster, rank) publish two versions of every page and story snapshot; two more
ingests leave two article segments the writers have not consumed yet. ``Built`` names one object of
each kind; a test copies the store, damages one object and watches what the pipeline, ``health``,
the doctor and a fresh server do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pipeline_harness import START

from replay.site import ReplaySite
from tasks.ingest.commit import commit_ingest
from tasks.ingest.plan import plan_due_feeds
from tasks.ingest.poll import poll_shard
from tasks.ingest.robots import load_robots_cache, robots_for_shard
from tasks.rank.publish import publish_all
from tasks.registry import import_publishers
from tasks.replay_control import download_publishers_csv
from tasks.settings import IngestSettings, RankSettings
from tasks.writer.run import cluster_language, languages_in_log
from warehouse import layout
from warehouse.snapshots import list_live_pages, read_pointer, read_stories_pointer
from warehouse.store import ObjectStore

Fault = Literal["corrupt", "deleted"]
KINDS = ("pointer", "page_version", "story_snapshot", "article_segment", "change_segment", "checkpoint",
         "state_blob", "feed_state", "robots_cache")
FAULTS: tuple[Fault, ...] = ("corrupt", "deleted")
CYCLES = [START + timedelta(minutes=m) for m in (40, 70)]
PENDING = [START + timedelta(minutes=m) for m in (95, 115)]
AFTER = START + timedelta(minutes=130)
LANGUAGE = "en"


def ingest_settings() -> IngestSettings:
    return IngestSettings(  # type: ignore[call-arg]
        allow_private_addresses=True, embeddings=False, connect_timeout_seconds=5, read_timeout_seconds=5,
        total_timeout_seconds=10, host_rate_per_second=200.0, host_burst=200.0, host_max_concurrency=8,
    )


def ingest(store: ObjectStore, site: ReplaySite, now: datetime) -> dict[str, Any]:
    """One ingest run at ``now`` through the plain functions the ingest flow's tasks call."""
    site.set_clock(now)
    settings = ingest_settings()
    plan = plan_due_feeds(store, now, shards=2)
    robots = load_robots_cache(store, now, settings.robots_ttl_seconds) if plan else {}
    shards = [poll_shard(jobs, settings, now, robots_cache=robots_for_shard(robots, jobs)) for jobs in plan]
    return commit_ingest(store, shards, now)


def cluster(store: ObjectStore, now: datetime) -> dict[str, dict[str, Any]]:
    """Every language's writer at ``now``; a language's exception is its summary's ``error``, as in the flow."""
    summaries = {}
    for language in languages_in_log(store):
        try:
            summaries[language] = cluster_language(store, language, now)
        except Exception as e:  # noqa: BLE001 - recorded as the cluster flow records it
            summaries[language] = {"language": language, "committed": False, "error": f"{type(e).__name__}: {e}"}
    return summaries


def rank(store: ObjectStore, now: datetime) -> dict[str, Any]:
    return publish_all(store, now, RankSettings())


@dataclass
class Built:
    """The store's objects of each kind that the faults hit, found while building it."""

    edition: str = ""
    keys: dict[str, str] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    """The article segments written after the writers' last run, oldest first."""
    story_id: str = ""
    """A story of the story snapshot version before the live one."""


def build_store(store: ObjectStore, site: ReplaySite, tmp: Path) -> Built:
    import_publishers(store, download_publishers_csv(site.control_url, tmp / "publishers.csv"))
    for now in CYCLES:
        ingest(store, site, now)
        cluster(store, now)
        summary = rank(store, now)
        assert summary["published"], summary
    before = set(store.list(layout.ARTICLES_PREFIX))
    pending = []
    for now in PENDING:
        ingest(store, site, now)
        new = sorted(set(store.list(layout.ARTICLES_PREFIX)) - before - set(pending))
        assert len(new) == 1, new
        pending += new
    built = Built(pending=pending)
    built.edition = next(e for e, s in list_live_pages(store) if s == "top")
    pointer = read_pointer(store, built.edition, "top")
    stories = read_stories_pointer(store)
    assert pointer is not None and pointer.version >= 2 and stories is not None and stories.version >= 2
    checkpoint_key = layout.story_checkpoint_key(LANGUAGE)
    checkpoint = json.loads(store.get(checkpoint_key).data)
    changes = sorted(k for k in store.list(f"{layout.STORY_CHANGES_PREFIX}language={LANGUAGE}/"))
    built.keys = {
        "pointer": layout.page_pointer_key(built.edition, "top"),
        "page_version": pointer.key,
        "story_snapshot": stories.key,
        "article_segment": pending[0],
        "change_segment": changes[-1],
        "checkpoint": checkpoint_key,
        "state_blob": checkpoint["state_key"],
        "feed_state": layout.FEED_STATE_KEY,
        "robots_cache": layout.ROBOTS_CACHE_KEY,
    }
    for key in built.keys.values():
        assert store.head(key) is not None, key
    older = json.loads(store.get(layout.story_snapshot_key(stories.version - 1)).data)
    built.story_id = sorted(older["stories"])[0]
    return built


@dataclass
class World:
    """The built store (``source``, never changed by a test), what was built, the replay site, and
    how to open an empty store of the same backend."""

    backend: str
    source: ObjectStore
    built: Built
    site: ReplaySite
    fresh: Callable[[], ObjectStore]

    def copy(self) -> ObjectStore:
        """A new store of the same backend holding every object of ``source``."""
        target = self.fresh()
        copy_store(self.source, target)
        return target


def copy_store(source: ObjectStore, target: ObjectStore) -> None:
    for key in source.list(""):
        target.put(key, source.get(key).data)


def damage(store: ObjectStore, key: str, fault: Fault) -> None:
    """A torn write (the first half of the bytes) or a lost object."""
    if fault == "deleted":
        store.delete(key)
    else:
        data = store.get(key).data
        store.put(key, data[: len(data) // 2])

