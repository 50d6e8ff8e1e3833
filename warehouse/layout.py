"""Object keys: the only place that knows where each table lives in the store.

Every key is relative to the store root (a local folder or ``s3://bucket/prefix``). Keys derive
from content or ids, so a rerun after a crash writes the same key again instead of a new one.
"""

from __future__ import annotations

import re
from datetime import datetime

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

PUBLISHERS_KEY = "registry/publishers.parquet"
FEEDS_KEY = "registry/feeds.parquet"
FEED_STATE_KEY = "state/feeds/feeds.parquet"
ARTICLES_PREFIX = "log/articles/"
STORY_CHANGES_PREFIX = "log/story_changes/"
STORY_STATE_PREFIX = "state/stories/"
PAGES_PREFIX = "pages/"
CLICKS_PREFIX = "log/clicks/"
FETCHES_PREFIX = "log/fetches/"
LISTINGS_PREFIX = "log/listings/"
ARTICLE_LINKS_PREFIX = "log/article_links/"
WEBSUB_PREFIX = "state/websub/"
PUSH_PREFIX = "state/push/"
INGEST_PENDING_KEY = "state/ingest/pending.json"
"""Names the article segment an ingest run is writing until its identities are committed: the next
run rolls a crashed run's segment forward instead of writing its articles again (issue 28)."""
ROBOTS_CACHE_KEY = "state/robots/robots.json.gz"
"""robots.txt verdicts by origin with their fetch time (gzip JSON), reused across ingest runs
until a TTL (RFC 9309 §2.4); replaced only with a conditional put."""
SERVICES_PREFIX = "state/services/"
"""One JSON object per long-running flow (``ingest``, ``rank``): when it last did a pass (issue 31)."""
STORIES_PAGE = "stories"
"""The story snapshot (Full Coverage for every ranked story) lives at ``pages/stories/``."""
SEARCH_PAGE = "search"
"""The search index of the live window lives at ``pages/search/`` (issue 30): ``v{n}.tar`` versions
(tantivy's files in one tar, not JSON) and a ``latest.json`` pointer like a page's."""
SEARCH_VERSION_SUFFIX = ".tar"
PENDING_SOURCES_PREFIX = "pending/sources/"
"""Sources readers asked for (``POST /v1/subscriptions``, issue 30): one folder per feed, outside
the operator's ``registry/``, read by ingest's planner (first in its run) until an operator
imports the feed into the registry."""
LIVE_EVENTS_PREFIX = "log/events/live/"
"""Breaking events again, keyed by the time rank found them (``date=YYYY-MM-DD/HHMMSS-...``), so a
serving replica lists only what is new since it last looked (issue 30)."""


def _check(part: str, what: str) -> str:
    if not _SAFE.match(part):
        raise ValueError(f"unsafe {what} in object key: {part!r}")
    return part


def article_segment_key(day: datetime, segment_id: str) -> str:
    """Key of one append-only articles segment, partitioned by the UTC day it was first seen."""
    return f"{ARTICLES_PREFIX}date={day:%Y-%m-%d}/{_check(segment_id, 'segment id')}.parquet"


def story_changes_key(language: str, first_offset: int) -> str:
    """Key of one story-changes segment; ``first_offset`` is the writer's change offset."""
    return f"{STORY_CHANGES_PREFIX}language={_check(language, 'language')}/{first_offset:016d}.parquet"


def story_checkpoint_key(language: str) -> str:
    """Key of a language writer's checkpoint, replaced only with a conditional put."""
    return f"{STORY_STATE_PREFIX}{_check(language, 'language')}/checkpoint.json"


def story_state_key(language: str, offset: int, content_id: str | None = None) -> str:
    """Key of an immutable story-state blob a checkpoint points at (Zstandard JSON).

    A writer names each blob by the offset it holds the state at and ``content_id``, a hash of its
    bytes, so a run never finds another run's blob (one that died before its checkpoint) under its
    own key. Without ``content_id``: the key of the one blob per offset written before, which
    still loads.

    >>> story_state_key("en", 7, "ab12")
    'state/stories/en/state-0000000000000007-ab12.json.zst'
    """
    name = f"state-{offset:016d}" + (f"-{_check(content_id, 'content id')}" if content_id is not None else "")
    return f"{STORY_STATE_PREFIX}{_check(language, 'language')}/{name}.json.zst"


def story_state_object_key(language: str, kind: str, offset: int, content_id: str) -> str:
    """Key of an immutable version 4 state object (issue 15): a ``base`` snapshot of a writer's
    whole state at ``offset``, or a ``delta`` of what one run changed, named by a hash of its bytes
    as state blobs are.

    >>> story_state_object_key("en", "delta", 7, "ab12")
    'state/stories/en/delta-0000000000000007-ab12.nrws'
    """
    if kind not in ("base", "delta"):
        raise ValueError(f"a state object is a base or a delta, got {kind!r}")
    return f"{STORY_STATE_PREFIX}{_check(language, 'language')}/{kind}-{offset:016d}-{_check(content_id, 'content id')}.nrws"


def is_state_object_key(key: str | None) -> bool:
    """Whether a key names a version 4 state object (a base or a delta), not a JSON state blob.

    >>> is_state_object_key("state/stories/en/base-0000000000000007-ab12.nrws")
    True
    >>> is_state_object_key("state/stories/en/state-0000000000000007-ab12.json.zst")
    False
    """
    return key is not None and key.endswith(".nrws")


def story_compacted_key(language: str) -> str:
    """Key of the note naming the newest base folded from a writer's deltas (a hint the writer
    adopts at its next commit; never the truth, which is the checkpoint)."""
    return f"{STORY_STATE_PREFIX}{_check(language, 'language')}/compacted.json"


def state_object_offset(key: str) -> int | None:
    """The offset a state blob's or state object's key names (None for other keys).

    >>> state_object_offset("state/stories/en/delta-0000000000000007-ab12.nrws")
    7
    >>> state_object_offset("state/stories/en/state-0000000000000003.json.zst")
    3
    """
    name = key.rsplit("/", 1)[-1]
    for prefix in ("state-", "base-", "delta-"):
        if name.startswith(prefix):
            digits = name[len(prefix):len(prefix) + 16]
            return int(digits) if digits.isdigit() else None
    return None


def state_key_to_legacy(key: str) -> str:
    """Where the blob of a (Zstandard) state key sits if it was written as gzip JSON.

    >>> state_key_to_legacy("state/stories/en/state-0000000000000007.json.zst")
    'state/stories/en/state-0000000000000007.json.gz'
    """
    return key.removesuffix(".json.zst") + ".json.gz"


def page_dir(edition: str, section: str) -> str:
    return f"{PAGES_PREFIX}{_check(edition, 'edition')}/{_check(section, 'section')}/"


def page_version_key(edition: str, section: str, version: int) -> str:
    """Key of an immutable page snapshot version."""
    if version < 1:
        raise ValueError(f"page versions start at 1, got {version}")
    return f"{page_dir(edition, section)}v{version}.json"


def page_pointer_key(edition: str, section: str) -> str:
    """Key of the pointer naming a page's live version; written last, after validation."""
    return f"{page_dir(edition, section)}latest.json"


def story_snapshot_key(version: int) -> str:
    return f"{PAGES_PREFIX}{STORIES_PAGE}/v{version}.json"


def story_snapshot_pointer_key() -> str:
    return f"{PAGES_PREFIX}{STORIES_PAGE}/latest.json"


def search_index_key(version: int) -> str:
    """Key of an immutable search index version.

    >>> search_index_key(3)
    'pages/search/v3.tar'
    """
    if version < 1:
        raise ValueError(f"search index versions start at 1, got {version}")
    return f"{PAGES_PREFIX}{SEARCH_PAGE}/v{version}{SEARCH_VERSION_SUFFIX}"


def search_index_pointer_key() -> str:
    return f"{PAGES_PREFIX}{SEARCH_PAGE}/latest.json"


def pending_source_key(feed_id: str, name: str) -> str:
    """Key of one object of a pending source: ``request.json`` (serving) or ``poll.json`` (ingest).

    >>> pending_source_key("f0123", "request.json")
    'pending/sources/f0123/request.json'
    """
    if name not in ("request.json", "poll.json"):
        raise ValueError(f"a pending source holds request.json and poll.json, not {name!r}")
    return f"{PENDING_SOURCES_PREFIX}{_check(feed_id, 'feed id')}/{name}"


def live_event_key(at: datetime, kind: str, event_id: str) -> str:
    """Key of one live event, ordered by the instant it was found (then kind and id).

    >>> live_event_key(datetime(2026, 12, 3, 9, 5, 7), "story.breaking", "s1")
    'log/events/live/date=2026-12-03/090507-story.breaking-s1.json'
    """
    return (f"{LIVE_EVENTS_PREFIX}date={at:%Y-%m-%d}/{at:%H%M%S}-{_check(kind, 'event kind')}-"
            f"{_check(event_id, 'event id')}.json")


def article_links_key(day: datetime, segment_id: str) -> str:
    """Key of a segment of links from other URLs (AMP, print) to the article they copy."""
    return f"{ARTICLE_LINKS_PREFIX}date={day:%Y-%m-%d}/{_check(segment_id, 'segment id')}.parquet"


def fetch_segment_key(day: datetime, segment_id: str) -> str:
    """Key of one ingest run's fetches (feed polls and page fetches), named by a hash of its rows."""
    return f"{FETCHES_PREFIX}date={day:%Y-%m-%d}/{_check(segment_id, 'segment id')}.parquet"


def listing_segment_key(day: datetime, segment_id: str) -> str:
    """Key of one rank cycle's newly listed articles, named by a hash of its rows."""
    return f"{LISTINGS_PREFIX}date={day:%Y-%m-%d}/{_check(segment_id, 'segment id')}.parquet"


def partition_day(key: str) -> str | None:
    """The ``YYYY-MM-DD`` of a key's ``date=`` partition, or None.

    >>> partition_day("log/clicks/date=2026-12-03/abc.parquet"), partition_day("pages/en-US/top/latest.json")
    ('2026-12-03', None)
    """
    for part in key.split("/"):
        if part.startswith("date="):
            return part[5:]
    return None


CLICK_BATCH_PREFIX = "batch-"
"""Click segments named ``batch-<content hash>`` hold one replica's clicks of one flush interval
(issue 19); the others are compacted segments or, from before batching, one click each, named
by its click id."""


def click_segment_key(day: datetime, segment_id: str) -> str:
    return f"{CLICKS_PREFIX}date={day:%Y-%m-%d}/{_check(segment_id, 'segment id')}.parquet"


def click_batch_key(day: datetime, content_id: str) -> str:
    """Key of one replica's batch of clicks from one UTC day, named by a hash of its bytes.

    >>> click_batch_key(datetime(2026, 12, 3), "ab12")
    'log/clicks/date=2026-12-03/batch-ab12.parquet'
    """
    return click_segment_key(day, f"{CLICK_BATCH_PREFIX}{content_id}")


def is_click_batch(key: str) -> bool:
    """Whether a click segment key is a batch (many clicks) rather than one click's own segment.

    >>> is_click_batch("log/clicks/date=2026-12-03/batch-ab12.parquet"), is_click_batch("log/clicks/date=2026-12-03/c1.parquet")
    (True, False)
    """
    return key.rsplit("/", 1)[-1].startswith(CLICK_BATCH_PREFIX)


POOL_SECTION = "pool"
"""Each edition's candidate pool lives at ``pages/{edition}/pool/``: versions and a pointer like a
page's, but it is not a page and serving must not list it (issue 5)."""
EVENTS_PREFIX = "log/events/"
FEED_BOOSTS_KEY = "state/boosts/feeds.json"
"""``{publisher_id: until ISO instant}``: publishers whose feeds ingest should poll faster (issue 5)."""
LEARNED_SECTIONS_KEY = "state/sections/learned.json"
"""What the articles whose feed names their section taught the section classifier, per language (issue 33)."""


def event_key(kind: str, event_id: str) -> str:
    """Key of one event object (``story.breaking`` -> ``log/events/story.breaking/<id>.json``)."""
    return f"{EVENTS_PREFIX}{_check(kind, 'event kind')}/{_check(event_id, 'event id')}.json"


def subscription_key(feed_id: str) -> str:
    """Key of one feed's WebSub subscription record (issue 3): what we asked a hub and its lease."""
    return f"{WEBSUB_PREFIX}{_check(feed_id, 'feed id')}.json"


def push_marker_key(feed_id: str, marker_id: str) -> str:
    """Key of one push marker: an authenticated hub delivery or publisher ping asking to poll ``feed_id`` now.

    One object per push, so the ingest deletes exactly the markers it acted on and a push landing
    during a run is never lost.
    """
    return f"{PUSH_PREFIX}{_check(feed_id, 'feed id')}/{_check(marker_id, 'marker id')}.json"


def feed_id_of_push_marker(key: str) -> str:
    """The feed id a push marker key names.

    >>> feed_id_of_push_marker("state/push/abc/1.json")
    'abc'
    """
    if not key.startswith(PUSH_PREFIX):
        raise ValueError(f"not a push marker key: {key!r}")
    return key[len(PUSH_PREFIX):].split("/", 1)[0]


def service_heartbeat_key(name: str) -> str:
    """Key of a long-running flow's heartbeat: when it last did a pass, so a scheduled run of the same
    step knows whether to stand by (issue 31).

    >>> service_heartbeat_key("rank")
    'state/services/rank.json'
    """
    return f"{SERVICES_PREFIX}{_check(name, 'service name')}.json"
