"""For you: the edition's candidate pool re-ranked for one signed-in reader.

The pool is the edition's live top page plus its section pages (until rank publishes a dedicated
pool), built once per combination of page versions. Cards carry click URLs signed for this
reader, which is why the answer is ``Cache-Control: private``.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from serving.cache import SnapshotCache
from serving.cursors import decode_cursor, encode_cursor
from serving.errors import CursorExpiredError, ProfileStoreError
from serving.foryou import TOP_STORIES_REASON, CandidatePool, Pick, build_pool, rank_for_you
from serving.profiles import Profile, ProfileStore
from serving.signing import Session, Signer

logger = logging.getLogger(__name__)

FeedMode = Literal["for_you", "top_stories", "top_stories_fallback"]
CARD_SOURCES = 4


@dataclass(frozen=True, slots=True)
class Pool:
    key: str
    top_version: int
    candidates: CandidatePool


class PoolCache:
    """The candidate pool of each edition, rebuilt only when one of its pages changes."""

    def __init__(self, cache: SnapshotCache) -> None:
        self._cache = cache
        self._pools: dict[str, Pool] = {}
        self._lock = threading.Lock()

    def pool(self, edition: str) -> Pool:
        pages = self._cache.edition_pages(edition)
        key = hashlib.blake2b(
            ";".join(f"{p.section}:{p.version}" for p in pages).encode(), digest_size=6
        ).hexdigest()
        with self._lock:
            found = self._pools.get(edition)
        if found is not None and found.key == key:
            return found
        top = pages[0].version
        pool = Pool(key, top, build_pool(p.stories for p in pages))
        with self._lock:
            self._pools[edition] = pool
        return pool


def _card(
    pick: Pick, position: int, profile: Profile | None, session: Session, signer: Signer
) -> dict[str, Any]:
    c = pick.candidate
    story: Mapping[str, Any] = c.story
    hidden = profile.hidden_sources if profile is not None else frozenset()
    sources = [s for s in story.get("sources") or [] if s.get("publisher_id") not in hidden]
    cards = []
    for s in sources[:CARD_SOURCES]:
        token = signer.issue_click(
            article_id=str(s["article_id"]),
            story_id=c.story_id,
            url=str(s["url"]),
            reader_hash=session.reader_hash,
            surface="for_you",
            position=position,
        )
        cards.append(dict(s, click_url=f"/r/{token}"))
    return dict(story, sources=cards, reason=pick.reason, topic=c.topics[0] if c.topics else None)


def build_feed(
    *,
    cache: SnapshotCache,
    pools: PoolCache,
    profiles: ProfileStore,
    signer: Signer,
    session: Session,
    edition: str,
    cursor: str | None,
    limit: int,
) -> dict[str, Any]:
    """One page of the reader's For you, as the FeedPublic JSON object."""
    pool = pools.pool(edition)
    scope = f"feed:{edition}:{limit}"
    offset = 0
    if cursor:
        version, offset = decode_cursor(cursor, scope)
        if version != pool.key:
            raise CursorExpiredError("the edition was republished; start again from the first page")
    profile: Profile | None
    mode: FeedMode
    try:
        profile = profiles.load(session.reader_hash)
    except ProfileStoreError as e:
        # Degrade, don't fail: a reader still gets the news, labelled as not personalised.
        logger.warning("feed_fallback reason=profile_store error=%s", e)
        profile, mode = None, "top_stories_fallback"
    else:
        mode = "top_stories" if profile.is_empty else "for_you"
    if profile is None or profile.is_empty:
        total = len(pool.candidates)
        chunk = [Pick(c, c.importance, TOP_STORIES_REASON) for c in pool.candidates.candidates[offset : offset + limit]]
    else:
        ranking = rank_for_you(pool.candidates, profile)
        total = len(ranking)
        chunk = ranking.picks(offset, offset + limit)
    more = offset + limit < total
    return {
        "mode": mode,
        "edition": edition,
        "version": pool.top_version,
        "stories": [_card(p, offset + i, profile, session, signer) for i, p in enumerate(chunk)],
        "next_cursor": encode_cursor(scope, pool.key, offset + limit) if more else None,
    }
