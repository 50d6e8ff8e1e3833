"""Topic streams: every live story about a section slug or a named entity, newest first.

Answers are shared (identical bytes for everyone) and memoised per story snapshot version. Topics
match case-insensitively, so a topic is normalised to lower case before anything else: every
spelling of it gets the same bytes (``topic_id`` is the normalised topic), whichever spelling a
replica happened to be asked first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, cast

from serving.cache import SnapshotCache
from serving.coverage import FullCoverageJson
from serving.cursors import decode_cursor, encode_cursor
from serving.errors import CursorExpiredError, TopicNotFoundError
from serving.foryou import section_label
from serving.responses import CachedBody
from warehouse.snapshot_json import StoryJson
from warehouse.snapshots import dump_snapshot

CARD_SOURCES = 4
_MEMO_SIZE = 512
_FULL_ONLY = ("timeline", "publishers", "local_sources", "opinion_count", "linked")


def normalize_topic(topic: str) -> str:
    """The one spelling of a topic that pages, memo keys and cursors use.

    >>> normalize_topic("TECHNOLOGY")
    'technology'
    """
    return topic.lower()


def is_about(story: Mapping[str, Any], topic: str) -> bool:
    wanted = topic.lower()
    if any(str(s).lower() == wanted for s in story.get("sections") or []):
        return True
    return any(isinstance(e, str) and e.lower() == wanted for e in story.get("entities") or [])


def story_card(story: FullCoverageJson) -> StoryJson:
    """A page-style card from a Full Coverage story: the representative source first, then others."""
    card = cast("StoryJson", {k: v for k, v in story.items() if k not in _FULL_ONLY})
    sources = list(story.get("sources") or [])
    rep = story.get("representative_id")
    sources.sort(key=lambda s: (s.get("article_id") != rep, bool(s.get("is_copy"))))
    card["sources"] = sources[:CARD_SOURCES]
    return card


class TopicPages:
    """Cuts topic pages from the live story snapshot."""

    def __init__(self, cache: SnapshotCache) -> None:
        self._cache = cache
        self._memo: OrderedDict[tuple[object, ...], CachedBody] = OrderedDict()
        self._lock = threading.Lock()

    def page(self, topic: str, edition: str | None, cursor: str | None, limit: int) -> CachedBody:
        topic = normalize_topic(topic)
        version = self._cache.story_version()
        if version is None:
            raise TopicNotFoundError(topic)
        scope = f"topic:{topic}:{edition or ''}:{limit}"
        offset = 0
        if cursor:
            cursor_version, offset = decode_cursor(cursor, scope)
            if cursor_version != str(version):
                raise CursorExpiredError("the stories were republished; start again from the first page")
        key = (version, topic, edition, offset, limit)
        with self._lock:
            found = self._memo.get(key)
            if found is not None:
                self._memo.move_to_end(key)
                return found
        body = self._build(topic, edition, offset, limit, version, scope)
        with self._lock:
            self._memo[key] = body
            while len(self._memo) > _MEMO_SIZE:
                self._memo.popitem(last=False)
        return body

    def stories(self, topic: str, edition: str | None) -> tuple[int, list[Mapping[str, Any]]]:
        """The story snapshot's version and every live story about ``topic``, newest first.
        Raises TopicNotFoundError when there is none."""
        topic = normalize_topic(topic)
        version = self._cache.story_version()
        stories = [
            s
            for s in self._cache.parsed_stories().values()
            if is_about(s, topic) and (edition is None or edition in (s.get("editions") or []))
        ]
        if version is None or not stories:
            raise TopicNotFoundError(topic)
        stories.sort(key=lambda s: (str(s.get("updated_at")), str(s["story_id"])), reverse=True)
        return version, stories

    def _build(
        self, topic: str, edition: str | None, offset: int, limit: int, version: int, scope: str
    ) -> CachedBody:
        _, stories = self.stories(topic, edition)
        chunk = stories[offset : offset + limit]
        more = offset + limit < len(stories)
        payload = {
            "topic_id": topic,
            "label": section_label(topic),
            "edition": edition,
            "version": version,
            "stories": [story_card(s) for s in chunk],
            "next_cursor": encode_cursor(scope, str(version), offset + limit) if more else None,
        }
        return CachedBody.of(dump_snapshot(payload))
