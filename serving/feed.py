"""For you: the edition's candidate pool re-ranked for one signed-in reader.

The pool is the edition's live top page plus its section pages (until rank publishes a dedicated
pool), built once per combination of page versions. The answer is ``Cache-Control: private``
because the ranking is the reader's. Cards carry *anonymous* click URLs (``surface=for_you``):
a card link that is shared names no reader and writes into no profile. The reader page mints a
personal click through ``POST /v1/click-token`` with the session instead (``serving.signing``).
A source whose URL cannot be signed keeps ``click_url: null`` rather than failing the page.

Paging keeps the set of stories already shown in the cursor (``serving.cursors``): the profile
can change between pages, and the next page is the current ranking minus what was shown. A
``section`` filter ranks only that section's stories, with a cursor of its own.

What a request costs (issue 29): everything that does not depend on the reader is made once per
pool version, the first time a card is shown, and kept with the pool: each card's JSON bytes with
a gap for the reason (and its sources list, for a reader who hides one of its sources), each
source's bytes, and its anonymous click link. A link names no reader, so every reader of this pool
version gets the same one, signed once: its ``position`` is the story's place in the edition's
pool (importance order), not in one reader's list, and two readers following the same card link
within one pool version are one click in the clicks log (``click_id`` comes from the token), as a
shared link always was. A request ranks the pool, words the reasons and joins bytes. The bytes are
those ``json.dumps`` gave for the card dicts before (a test holds 200 readers' answers to the code
before, click tokens aside), and they validate as ``FeedPublic``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from typing import Any, Literal

from serving.cache import SnapshotCache
from serving.cache_state import CachedPage, CacheState
from serving.cursors import decode_feed_cursor, encode_feed_cursor
from serving.errors import CursorExpiredError, ProfileStoreError, UnsignableUrlError
from serving.foryou import TOP_STORIES_REASON, Candidate, CandidatePool, build_pool, rank_for_you
from serving.profiles import Profile, ProfileStore
from serving.signing import Signer

logger = logging.getLogger(__name__)

FeedMode = Literal["for_you", "top_stories", "top_stories_fallback"]
CARD_SOURCES = 4
CARDS_MADE_AHEAD = 60
"""Cards made with the pool, off the event loop: the best-scored stories open most readers' pages."""
_SOURCES, _REASON = 0, 1


def _dumps(value: object) -> str:
    """JSON exactly as the API's JSON responses write it (starlette's ``JSONResponse.render``)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


@lru_cache(maxsize=8192)
def _json_bytes(text: str | None) -> bytes:
    return _dumps(text).encode()


@dataclass(frozen=True, slots=True)
class Card:
    """A story's card as JSON bytes with gaps for what a request fills in.

    ``parts[0] gap parts[1] gap ...``, each gap being the reason or the sources list (``gaps``),
    in the order the card's keys have them. ``sources`` is every source's JSON with its click link.
    ``fixed`` is ``parts`` with the sources list a reader who hides none of ``publishers`` sees
    already in, so that reader's card is ``fixed[0] reason fixed[1] ...``.
    """

    parts: tuple[bytes, ...]
    gaps: tuple[int, ...]
    sources: tuple[tuple[object, bytes], ...]
    """``(publisher_id as the snapshot has it, JSON)`` per source: hidden sources are compared as they are."""
    publishers: frozenset[object]
    fixed: tuple[bytes, ...]
    issued_at: float
    """When its click links were signed: a card is made again once they are half their TTL old."""


def _sources_json(sources: list[bytes]) -> bytes:
    return b"[" + b",".join(sources[:CARD_SOURCES]) + b"]"


def _split(text: str, markers: dict[str, int]) -> tuple[tuple[bytes, ...], tuple[int, ...]]:
    """``text`` cut at each marker's JSON spelling: the pieces, and which marker stood between them."""
    spelled = {_dumps(m): gap for m, gap in markers.items()}
    pieces = re.split("(" + "|".join(re.escape(s) for s in spelled) + ")", text)
    return tuple(p.encode() for p in pieces[0::2]), tuple(spelled[m] for m in pieces[1::2])


def _click_url(signer: Signer, source: Mapping[str, Any], story_id: str, position: int, now: float) -> str | None:
    """An anonymous ``/r/`` URL for a card's source, or None when its URL cannot be signed."""
    try:
        token = signer.issue_click(
            article_id=str(source["article_id"]),
            story_id=story_id,
            url=str(source["url"]),
            reader_hash="",  # shareable: see the module docstring
            surface="for_you",
            position=position,
            now=now,
        )
    except UnsignableUrlError:
        logger.warning("click_url_skipped article_id=%s reason=unsignable_url", source.get("article_id"))
        return None
    return f"/r/{token}"


def card_of(candidate: Candidate, position: int, signer: Signer, now: float) -> Card:
    """The card of ``candidate``, ``position`` in its pool, with its click links signed at ``now``.

    The gaps are cut at markers that carry a random id, so no text in a story can be mistaken for one.
    """
    story: Mapping[str, Any] = candidate.story
    marker = uuid.uuid4().hex
    sources_marker, reason_marker = f"\x00{marker}s\x00", f"\x00{marker}r\x00"
    card = dict(story, sources=sources_marker, reason=reason_marker,
                topic=candidate.topics[0] if candidate.topics else None)
    parts, gaps = _split(_dumps(card), {sources_marker: _SOURCES, reason_marker: _REASON})
    sources = tuple(
        (s.get("publisher_id"),
         _dumps(dict(s, click_url=_click_url(signer, s, candidate.story_id, position, now))).encode())
        for s in story.get("sources") or []
    )
    shown = _sources_json([data for _, data in sources])
    fixed = [parts[0]]
    for gap, part in zip(gaps, parts[1:], strict=True):
        if gap == _SOURCES:
            fixed[-1] += shown + part
        else:
            fixed.append(part)
    return Card(parts, gaps, sources, frozenset(p for p, _ in sources), tuple(fixed), now)


class Pool:
    """An edition's candidates for one combination of page versions, and their cards, made as shown."""

    __slots__ = ("key", "top_version", "candidates", "_cards", "_signer")

    def __init__(self, key: str, top_version: int, candidates: CandidatePool, signer: Signer) -> None:
        self.key = key
        self.top_version = top_version
        self.candidates = candidates
        self._cards: list[Card | None] = [None] * len(candidates)
        self._signer = signer

    def card(self, i: int, now: float) -> Card:
        """Candidate ``i``'s card, made the first time it is asked for (a race makes it twice: harmless),
        and again when its click links are half their TTL old (a pool that outlives its links)."""
        found = self._cards[i]
        if found is None or now - found.issued_at > self._signer.click_ttl_seconds / 2:
            found = self._cards[i] = card_of(self.candidates.candidates[i], i, self._signer, now)
        return found


def _pool_key(cache: SnapshotCache, edition: str) -> tuple[str, int, list[CachedPage]]:
    pages = cache.edition_pages(edition)
    key = hashlib.blake2b(";".join(f"{p.section}:{p.version}" for p in pages).encode(), digest_size=6).hexdigest()
    return key, pages[0].version, pages


class PoolCache:
    """The candidate pool of each edition, rebuilt only when one of its pages changes."""

    def __init__(self, cache: SnapshotCache, signer: Signer) -> None:
        self._cache = cache
        self._signer = signer
        self._pools: dict[str, tuple[CacheState, Pool]] = {}
        self._lock = threading.Lock()
        self._building: dict[str, threading.Lock] = {}

    def current(self, edition: str) -> Pool | None:
        """The edition's pool when it is built for the live pages, else None; never builds one.

        Cheap enough for the event loop: the pages are looked at again only after a refresh swapped
        the cache's state. Raises PageNotFoundError when the edition has no live page.
        """
        state = self._cache.state
        found = self._pools.get(edition)
        if found is not None and found[0] is state:
            return found[1]
        key, _, _ = _pool_key(self._cache, edition)
        if found is not None and found[1].key == key:
            with self._lock:
                self._pools[edition] = (state, found[1])
            return found[1]
        return None

    def pool(self, edition: str) -> Pool:
        """The edition's pool, built when a page changed (one build at a time per edition)."""
        found = self.current(edition)
        if found is not None:
            return found
        with self._lock:
            building = self._building.setdefault(edition, threading.Lock())
        with building:
            found = self.current(edition)  # built by the request we waited for
            if found is not None:
                return found
            state = self._cache.state
            key, top_version, pages = _pool_key(self._cache, edition)
            pool = Pool(key, top_version, build_pool(p.stories for p in pages), self._signer)
            now = time.time()
            for i in range(min(CARDS_MADE_AHEAD, len(pool.candidates))):
                pool.card(i, now)
            with self._lock:
                self._pools[edition] = (state, pool)
            return pool


def load_profile(profiles: ProfileStore, reader_hash: str) -> tuple[Profile | None, FeedMode]:
    """The reader's profile and the feed's mode; None and ``top_stories_fallback`` when the store fails."""
    try:
        profile = profiles.load(reader_hash)
    except ProfileStoreError as e:
        # Degrade, don't fail: a reader still gets the news, labelled as not personalised.
        logger.warning("feed_fallback reason=profile_store error=%s", e)
        return None, "top_stories_fallback"
    return profile, feed_mode(profile)


def feed_mode(profile: Profile) -> FeedMode:
    """``for_you`` for a reader with a profile, ``top_stories`` for one without any yet."""
    return "top_stories" if profile.is_empty else "for_you"


def _render_card(card: Card, reason: bytes, hidden: frozenset[str], out: list[bytes]) -> None:
    if not hidden or hidden.isdisjoint(card.publishers):
        fixed = card.fixed
        out.append(fixed[0])
        for part in fixed[1:]:
            out += (reason, part)
        return
    # The reader hides one of this story's sources: its sources list is made for them.
    shown = _sources_json([data for publisher, data in card.sources if publisher not in hidden])
    out.append(card.parts[0])
    for gap, part in zip(card.gaps, card.parts[1:], strict=True):
        out += (reason if gap == _REASON else shown, part)


def build_feed(
    *,
    pool: Pool,
    profile: Profile | None,
    mode: FeedMode,
    edition: str,
    section: str | None,
    cursor: str | None,
    limit: int,
) -> bytes:
    """One page of the reader's For you, as the bytes of a FeedPublic JSON object.

    The page is the first ``limit`` stories of the reader's current ranking (of ``section``'s
    stories only, when given) that the cursor has not shown yet, so a profile change between pages
    neither skips nor repeats a story.
    """
    # The scope without a section is the one cursors had before sections, so those still page.
    scope = f"feed:{edition}:{limit}" if section is None else f"feed:{edition}:{limit}:{section}"
    offset = 0
    shown: frozenset[int] | None = frozenset()
    if cursor:
        at = decode_feed_cursor(cursor, scope)
        if at.version != pool.key:
            raise CursorExpiredError("the edition was republished; start again from the first page")
        offset, shown = at.offset, at.shown
    candidates = pool.candidates
    only = candidates.in_section(section) if section is not None else None
    order: Iterator[int]
    if profile is None or profile.is_empty:
        order = iter(range(len(candidates)) if only is None else only.nonzero()[0].tolist())
        ranking = None
    else:
        ranking = rank_for_you(candidates, profile, only=only)
        order = ranking.iter_order()
    if shown is None:  # a cursor from before shown-sets: it paged this order by offset
        shown = frozenset(islice(order, offset))
    # The first limit + 1 stories not shown yet: the page, and whether there is a next one.
    remaining = list(islice((i for i in order if i not in shown), limit + 1))
    chunk_ids = remaining[:limit]
    hidden = profile.hidden_sources if profile is not None else frozenset()
    now = time.time()
    out = [b'{"mode":', _json_bytes(mode), b',"edition":', _json_bytes(edition),
           b',"version":', str(pool.top_version).encode(), b',"stories":[']
    for k, i in enumerate(chunk_ids):
        if k:
            out.append(b",")
        reason = TOP_STORIES_REASON if ranking is None else ranking.reason(i)
        _render_card(pool.card(i, now), _json_bytes(reason), hidden, out)
    more = len(remaining) > limit
    next_cursor = encode_feed_cursor(scope, pool.key, offset + len(chunk_ids), shown.union(chunk_ids)) if more else None
    out += (b'],"next_cursor":', _dumps(next_cursor).encode(), b"}")
    return b"".join(out)
