"""Live events: what a serving replica pushes to connected readers, keyed by when it happened (issue 30).

Rank writes one ``story.breaking`` event per story the first time it turns Breaking
(``log/events/story.breaking/<story_id>.json``, ``tasks.rank.publish.record_breaking``): that key says
which story, not when, so a replica could only find new ones by listing every event ever written.
This writes the same news again under ``log/events/live/date=YYYY-MM-DD/HHMMSS-story.breaking-<id>.json``
(``warehouse.layout.live_event_key``), keyed by the cycle's instant: a replica lists the keys after
the last one it read (today's and yesterday's folders), a cost in proportion to what is new.

It runs before ``record_breaking`` and only for stories that have no ``story.breaking`` event yet,
so a cycle that dies between the two writes the live event again at the next cycle, under a later
key: replicas keep the first event per story (``serving/live.py``), so a reader is alerted once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from transforms.pages import iso
from warehouse import layout
from warehouse.errors import PreconditionFailedError
from warehouse.snapshots import dump_snapshot
from warehouse.store import ObjectStore

BREAKING = "story.breaking"


def record_live_breaking(store: ObjectStore, breaking: Sequence[Mapping[str, Any]], now: datetime,
                         stories: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A live event for each story of ``breaking`` not yet recorded as Breaking; returns their ids.

    Args:
        breaking: Rank's Breaking stories (``story_id``, ``breaking_since``, ``editions``).
        stories: The story snapshot's stories, for each event's headline and language.
    """
    written = []
    for b in sorted(breaking, key=lambda b: str(b["story_id"])):
        sid = str(b["story_id"])
        if store.head(layout.event_key(BREAKING, sid)) is not None:
            continue  # alerted already (the first cycle that found it Breaking)
        story = stories.get(sid) or {}
        payload = {"kind": BREAKING, "story_id": sid, "detected_at": iso(now), "breaking_since": b.get("breaking_since"),
                   "editions": list(b.get("editions") or []), "title": story.get("title"),
                   "language": story.get("language")}
        try:
            store.put(layout.live_event_key(now, BREAKING, sid), dump_snapshot(payload), if_none_match=True,
                      content_type="application/json")
        except PreconditionFailedError:
            pass  # a rerun of this cycle wrote it
        written.append(sid)
    return written
