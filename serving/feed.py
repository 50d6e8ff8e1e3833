"""For you: the edition's candidate pool re-ranked for one signed-in reader.

The pool is the edition's live top page plus its section pages (until rank publishes a dedicated
pool), built once per combination of page versions. The answer is ``Cache-Control: private``
because the ranking is the reader's. Cards carry *anonymous* click URLs (``surface=for_you``):
a card link that is shared names no reader and writes into no profile. The reader page mints a
personal click through ``POST /v1/click-token`` with the session instead (``serving.signing``).
A source whose URL cannot be signed keeps ``click_url: null`` rather than failing the page.

Paging keeps the set of stories already shown in the cursor (``serving.cursors``): the profile
can change between pages, and the next page is the current ranking minus what was shown.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from serving.cache import SnapshotCache
from serving.cursors import decode_feed_cursor, encode_feed_cursor
from serving.errors import CursorExpiredError, ProfileStoreError, UnsignableUrlError
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


def _click_url(signer: Signer, source: Mapping[str, Any], story_id: str, position: int) -> str | None:
    """An anonymous ``/r/`` URL for a card's source, or None when its URL cannot be signed."""
    try:
        token = signer.issue_click(
            article_id=str(source["article_id"]),
            story_id=story_id,
            url=str(source["url"]),
            reader_hash="",  # shareable: see the module docstring
            surface="for_you",
            position=position,
        )
    except UnsignableUrlError:
        logger.warning("click_url_skipped article_id=%s reason=unsignable_url", source.get("article_id"))
        return None
    return f"/r/{token}"


def _card(pick: Pick, position: int, profile: Profile | None, signer: Signer) -> dict[str, Any]:
    c = pick.candidate
    story: Mapping[str, Any] = c.story
    hidden = profile.hidden_sources if profile is not None else frozenset()
    sources = [s for s in story.get("sources") or [] if s.get("publisher_id") not in hidden]
    cards = [dict(s, click_url=_click_url(signer, s, c.story_id, position)) for s in sources[:CARD_SOURCES]]
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
    """One page of the reader's For you, as the FeedPublic JSON object.

    The page is the first ``limit`` stories of the reader's current ranking that the cursor has
    not shown yet, so a profile change between pages neither skips nor repeats a story.
    """
    pool = pools.pool(edition)
    scope = f"feed:{edition}:{limit}"
    offset = 0
    shown: frozenset[int] | None = frozenset()
    if cursor:
        at = decode_feed_cursor(cursor, scope)
        if at.version != pool.key:
            raise CursorExpiredError("the edition was republished; start again from the first page")
        offset, shown = at.offset, at.shown
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
    candidates = pool.candidates.candidates
    if profile is None or profile.is_empty:
        order: tuple[int, ...] = tuple(range(len(candidates)))
        ranking = None
    else:
        ranking = rank_for_you(pool.candidates, profile)
        order = ranking.order
    if shown is None:  # a cursor from before shown-sets: it paged this order by offset
        shown = frozenset(order[:offset])
    remaining = [i for i in order if i not in shown]
    chunk_ids = remaining[:limit]
    if ranking is None:
        chunk = [Pick(candidates[i], candidates[i].importance, TOP_STORIES_REASON) for i in chunk_ids]
    else:
        chunk = [ranking.pick(i) for i in chunk_ids]
    more = len(remaining) > limit
    next_offset = offset + len(chunk)
    return {
        "mode": mode,
        "edition": edition,
        "version": pool.top_version,
        "stories": [_card(p, offset + i, profile, signer) for i, p in enumerate(chunk)],
        "next_cursor": encode_feed_cursor(scope, pool.key, next_offset, shown.union(chunk_ids)) if more else None,
    }
