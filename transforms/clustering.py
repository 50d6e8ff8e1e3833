"""Online story clustering, one writer per language.

For each article, in arrival order, :class:`LanguageClusterer` decides:

1. **Syndicated copy?** MinHash LSH (``LSH_BANDS`` × ``LSH_ROWS``) over the articles of the
   active window proposes candidates; the best one whose estimated Jaccard is at least
   ``copy_jaccard`` is the original. The copy joins the original's story and ``copy_of``
   names the original (the first article of a chain of copies).
2. **Otherwise, nearest active story.** An inverted index over the terms of the centroids of
   stories active in the window gives the candidates (never a scan of every story). Each is
   scored ``cosine(article, centroid) + entity_bonus × shared-entity share
   − time_penalty_per_hour × hours since the story's last article``; the best candidate at
   or above ``join_threshold`` is joined, else the article starts a story.

Term weights from :mod:`transforms.features` are reweighted by an **online IDF** kept in the
clusterer state: document frequencies of the terms (and entities) of every article seen,
decayed with a half-life of ``idf_half_life_hours`` so the state stays small and follows the
news. Nothing is fitted on evaluation data: the IDF is just what the stream has shown so far.

Everything is deterministic: no randomness, candidates are ranked by (score, story id), and
:meth:`LanguageClusterer.to_state` / :meth:`LanguageClusterer.from_state` round-trip floats
exactly through JSON, so a resumed writer makes the same decisions as an uninterrupted one.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import heapq
import math
import re
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

from transforms.embedding import mean_direction
from transforms.features import DATE_TERM_PREFIX, ArticleFeatures
from transforms.signatures import (
    LSH_BANDS,
    LSH_ROWS,
    NUM_PERM,
    SIGNATURE_VERSION,
    estimate_jaccard,
    lsh_bands,
    lsh_bands_many,
)

STATE_VERSION = 3
READABLE_STATE_VERSIONS = (2, 3)
"""Version 3 stores MinHash signatures as base64; version 2 checkpoints (lists of ints) still load."""
ENTITY_LIMIT = 20
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_YEAR_RE = re.compile(r"^(1[89]\d\d|20\d\d)$")
_NUMBER_RE = re.compile(r"^\d[\d.,]*$")


@dataclass(frozen=True, slots=True)
class ClusterParams:
    """Thresholds and weights of the online clusterer; the defaults are the tuned values.

    Attributes:
        join_threshold: Least score for an article to join an existing story.
        copy_jaccard: Least estimated MinHash Jaccard for an article to be a copy.
        copy_chain_jaccard: Least estimated Jaccard with the first article of a chain of copies
            for a new copy to name that article rather than the one it matched (see
            :meth:`LanguageClusterer.find_copy`).
        entity_bonus: Weight of the IDF-weighted share of the article's entities that the
            story has already seen.
        year_conflict_penalty: Subtracted when the article names years and none of them is a
            year the story names (and the story names some): same kind of event, other year.
        date_conflict_penalty: Subtracted when the article's dateline year (the pseudo-term
            ``date:<year>``) is not among the dateline years of the story's articles.
        time_penalty_per_hour: Subtracted per hour since the story's last article.
        active_window_hours: Stories idle longer than this are dropped; articles older than
            this are no longer copy candidates.
        centroid_min_weight: The newest article's weight in the centroid is
            ``max(1 / originals, centroid_min_weight)``, ``originals`` counting the story's
            members that are no copies (a copy leaves the centroid as it is): a plain mean for
            small stories, an exponential moving average for large ones, so a story follows its
            latest news.
        centroid_terms: Most terms kept in a centroid.
        max_candidates: Most stories scored in full per article.
        idf_half_life_hours: Half-life of the document frequencies of the online IDF.
        idf_prior_docs: Pseudo-documents of the IDF, so that early on every term weighs alike.
        lsh_bands: MinHash LSH bands.
        lsh_rows: MinHash LSH rows per band.
        link_threshold: Least IDF-weighted cosine of the language-neutral profiles (names,
            acronyms, numbers) of two stories of different languages for them to be linked.
        link_embedding_threshold: Least cosine of the mean sentence embeddings of two stories of
            different languages, each the other's best match, for them to be linked.
        link_min_shared: Least number of shared language-neutral tokens for a link.
        link_same_language_threshold: If set, stories of one language are also linked at this
            cosine (a merge the online pass missed); off by default, it did not help on dev.
        member_weight: Share of the score that comes from the article's mean cosine to the
            story's latest members (the rest from the centroid cosine). A second-order check:
            a centroid mixed by one stray article still looks close to both events, the
            members of the right event do not (issue 4).
        member_sample: Most recent original members compared in full per candidate story.
        young_story_size: Stories with at most this many members are "young".
        young_story_margin: Added to ``join_threshold`` for young stories: the 2nd and 3rd
            article decide what a story is about, so they must clear a stricter bar.
        member_terms: Terms kept per member (for the member check and the repair pass).
        max_postings: Most term-index postings read per article to find candidate stories.
        norm_tolerance: A story's cached IDF-weighted norms are recomputed when the IDF's
            document count has moved by more than this share since they were computed (0:
            recomputed for every article, as exact as before the cache).
    """

    join_threshold: float = 0.30
    copy_jaccard: float = 0.5
    copy_chain_jaccard: float = 0.6
    entity_bonus: float = 0.10
    year_conflict_penalty: float = 0.10
    date_conflict_penalty: float = 0.30
    time_penalty_per_hour: float = 0.002
    active_window_hours: float = 48.0
    centroid_min_weight: float = 0.1
    centroid_terms: int = 100
    max_candidates: int = 15
    idf_half_life_hours: float = 24.0 * 7
    idf_prior_docs: float = 10.0
    lsh_bands: int = LSH_BANDS
    lsh_rows: int = LSH_ROWS
    link_threshold: float = 0.15
    link_embedding_threshold: float = 0.5
    link_min_shared: int = 2
    link_same_language_threshold: float | None = None
    member_weight: float = 0.0
    member_sample: int = 16
    young_story_size: int = 2
    young_story_margin: float = 0.0
    member_terms: int = 40
    norm_tolerance: float = 0.02
    max_postings: int = 3000

    def __post_init__(self) -> None:
        for name in ("join_threshold", "copy_jaccard", "copy_chain_jaccard", "centroid_min_weight", "link_threshold", "member_weight", "link_embedding_threshold"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        for name in ("norm_tolerance", "entity_bonus", "year_conflict_penalty", "date_conflict_penalty", "time_penalty_per_hour", "idf_prior_docs"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.active_window_hours <= 0 or self.idf_half_life_hours <= 0:
            raise ValueError("active_window_hours and idf_half_life_hours must be > 0")
        if min(self.centroid_terms, self.max_candidates, self.member_sample, self.member_terms, self.max_postings) < 1:
            raise ValueError("centroid_terms, max_candidates, member_sample, member_terms, max_postings must be >= 1")
        if self.lsh_bands < 1 or self.lsh_rows < 1 or self.lsh_bands * self.lsh_rows > NUM_PERM:
            raise ValueError(f"lsh {self.lsh_bands}x{self.lsh_rows} does not fit {NUM_PERM} permutations")


@dataclass(frozen=True, slots=True)
class Assignment:
    """The clusterer's decision for one article.

    ``is_new_version`` marks a new version of an article the clusterer already holds: it stays
    the same member of the same story (``story_id``, ``copy_of`` as before) with its features
    replaced, and ``score`` is the estimated Jaccard of the new text with the previous one (0.0
    when the previous signature has left the copy window).
    """

    article_id: str
    story_id: str
    copy_of: str | None
    is_new_story: bool
    score: float
    is_new_version: bool = False


@dataclass(frozen=True, slots=True)
class Member:
    """What a story keeps of each of its articles: enough to re-score, split and merge it."""

    article_id: str
    seen_ms: int
    publisher_id: str | None
    copy_of: str | None
    terms: tuple[str, ...]
    weights: tuple[float, ...]
    entities: tuple[str, ...]

    def to_json(self) -> list[object]:
        return [self.article_id, self.seen_ms, self.publisher_id, self.copy_of, list(self.terms),
                list(self.weights), list(self.entities)]

    @classmethod
    def from_json(cls, raw: Sequence[object]) -> Member:
        aid, seen, publisher, copy_of, terms, weights, entities = raw
        return cls(
            article_id=str(aid),
            seen_ms=int(seen),  # type: ignore[call-overload]
            publisher_id=None if publisher is None else str(publisher),
            copy_of=None if copy_of is None else str(copy_of),
            terms=tuple(map(str, terms)),  # type: ignore[call-overload]
            weights=tuple(map(float, weights)),  # type: ignore[call-overload]
            entities=tuple(map(str, entities)),  # type: ignore[call-overload]
        )


@dataclass(slots=True)
class _Story:
    story_id: str
    first_article_id: str
    first_seen_ms: int
    last_seen_ms: int
    size: int
    centroid: dict[str, float]
    entities: dict[str, float]
    years: list[str]
    members: list[Member] = field(default_factory=list)
    repaired_ms: int | None = None
    # IDF-weighted norms of the centroid and of the entity counts, and the IDF's document count
    # they were computed at (see LanguageClusterer._story_norms); None until the story is next
    # scored (computed then, lazily, so a resumed writer computes them at the same point).
    norms: tuple[float, float, float] | None = None

    def to_json(self) -> list[object]:
        return [
            self.story_id,
            self.first_article_id,
            self.first_seen_ms,
            self.last_seen_ms,
            self.size,
            [[t, w] for t, w in self.centroid.items()],
            [[e, c] for e, c in self.entities.items()],
            self.years,
            [m.to_json() for m in self.members],
            self.repaired_ms,
            None if self.norms is None else list(self.norms),
        ]

    @classmethod
    def from_json(cls, raw: Sequence[object]) -> _Story:
        sid, first_id, first_ms, last_ms, size, centroid, entities, years, members, repaired = raw[:10]
        norms = raw[10] if len(raw) > 10 else None  # states written before the norm cache lack it
        return cls(
            story_id=str(sid),
            first_article_id=str(first_id),
            first_seen_ms=int(first_ms),  # type: ignore[call-overload]
            last_seen_ms=int(last_ms),  # type: ignore[call-overload]
            size=int(size),  # type: ignore[call-overload]
            centroid={str(t): float(w) for t, w in centroid},  # type: ignore[attr-defined]
            entities={str(e): float(c) for e, c in entities},  # type: ignore[attr-defined]
            years=[str(y) for y in years],  # type: ignore[attr-defined]
            members=[Member.from_json(m) for m in members],  # type: ignore[attr-defined]
            repaired_ms=None if repaired is None else int(repaired),  # type: ignore[call-overload]
            norms=None if norms is None else (float(norms[0]), float(norms[1]), float(norms[2])),  # type: ignore[index]
        )


@dataclass(slots=True)
class _Recent:
    article_id: str
    story_id: str
    root_id: str
    seen_ms: int
    minhash: npt.NDArray[np.uint32]
    bands: list[int] = field(default_factory=list)


def _encode_minhash(minhash: npt.NDArray[np.uint32]) -> str:
    """A signature in a checkpoint: base64 of little-endian uint32 (a tenth of the JSON ints' parse time)."""
    return base64.b64encode(np.asarray(minhash, dtype="<u4").tobytes()).decode("ascii")


def _decode_minhash(raw: object) -> npt.NDArray[np.uint32]:
    if isinstance(raw, str):
        return np.frombuffer(base64.b64decode(raw), dtype="<u4").astype(np.uint32)
    return np.asarray(raw, dtype=np.uint32)  # a version 2 checkpoint: a list of ints


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while many long-lived objects are built (a checkpoint
    parsed and rebuilt: none of them can be garbage yet), and restore it as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _to_ms(when: datetime) -> int:
    if when.tzinfo is None:
        raise ValueError(f"datetimes must be timezone-aware, got {when!r}")
    return (when - _EPOCH) // timedelta(milliseconds=1)


def make_story_id(first_seen_at: datetime, first_article_id: str, language: str = "", salt: str = "") -> str:
    """64-bit, time-ordered, deterministic story id candidate as 16 hex digits.

    The top 32 bits are the first article's first-seen time in whole seconds since the Unix
    epoch, the low 32 bits a blake2b hash of ``(language, salt, first article id)``. Ids sort by
    creation second and a rerun gives the same ids. Two ids collide only within one second and
    with a chance of about n²/2³³ for n stories of that second, so writers of different languages
    (which share no state) practically never meet; within one writer,
    :meth:`LanguageClusterer._free_story_id` bumps a candidate past the writer's active ids.

    Ids written before this format (ms << 16 | a 16-bit hash) stay valid: ids are opaque
    16-hex strings and nothing parses a time back out of them. Any such id is below
    ``(ms + 1) << 16``, far below ``seconds << 32`` for the same moment, so every id of this
    format sorts after every old-format id made earlier (or at the same time).

    >>> make_story_id(datetime(2024, 1, 1, tzinfo=UTC), "a", "en")[:8]
    '65920080'
    """
    seconds = _to_ms(first_seen_at) // 1000
    if not 0 <= seconds < 1 << 32:
        raise ValueError(f"first_seen_at out of range for a story id: {first_seen_at!r}")
    key = "\x1f".join((language, salt, first_article_id)).encode("utf-8")
    low = int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "big")
    return f"{(seconds << 32) | low:016x}"


def _years(terms: Iterable[str]) -> list[str]:
    """Years named in the text, and dateline years as ``date:<year>``."""
    return sorted({t for t in terms if _YEAR_RE.match(t) or t.startswith(DATE_TERM_PREFIX)})


def _entity_words(entities: Sequence[str], limit: int = ENTITY_LIMIT) -> list[str]:
    """Distinct words of the article's leading entities: "tara reid" and "reid" meet on "reid"."""
    out: dict[str, None] = {}
    for name in entities[:limit]:
        for word in name.split():
            if len(word) > 1:
                out[word] = None
    return list(out)


class LanguageClusterer:
    """Online copy detection and story clustering for the articles of one language."""

    def __init__(self, language: str, params: ClusterParams | None = None) -> None:
        self.language = language
        self.params = params or ClusterParams()
        self._stories: dict[str, _Story] = {}
        # term -> postings (story slot, the term's weight in the story's centroid); a story's
        # slot is a small integer so candidate scores are summed with numpy.
        self._term_index: dict[str, _Postings] = {}
        self._slot_of: dict[str, int] = {}
        self._story_of_slot: list[str] = []
        self._free_slots: list[int] = []
        self._slot_stamp = np.full(1024, -1, dtype=np.int64)
        self._next_stamp = 0
        self._bands_memo: tuple[Sequence[int], list[int]] | None = None
        self._recent: dict[str, _Recent] = {}
        # article id -> the active story holding it as a member (derived; not in the checkpoint)
        self._story_of_member: dict[str, str] = {}
        self._lsh: dict[int, list[str]] = defaultdict(list)
        self._df: dict[str, float] = {}
        self._n_docs = 0.0
        self._clock_ms: int | None = None
        self._decayed_ms: int | None = None

    # ---------------------------------------------------------------- public API

    def assign(self, features: ArticleFeatures) -> Assignment:
        """Place one article: copy of a recent article, member of an active story, or new story.

        An article id this clusterer already holds (a member of an active story) is a new
        version of that article: it stays the same member of its story, with its features
        (centroid share, entities, signature) replaced in place, and is never a copy of
        itself (see :class:`Assignment`). An article whose story has expired is placed as new.

        Args:
            features: The article's features; its language must be this clusterer's.

        Returns:
            The assignment.

        Raises:
            ValueError: If the language or signature version does not match.
        """
        if features.language != self.language:
            raise ValueError(f"article {features.article_id} is {features.language!r}, clusterer is {self.language!r}")
        if features.signature_version != SIGNATURE_VERSION:
            raise ValueError(
                f"article {features.article_id} has signature version {features.signature_version!r}, "
                f"expected {SIGNATURE_VERSION!r}"
            )
        now_ms = _to_ms(features.first_seen_at)
        if self._clock_ms is None or now_ms > self._clock_ms:
            self._clock_ms = now_ms
        # Drop idle stories and old articles about once an hour of stream time.
        if self._decayed_ms is None or self._clock_ms - self._decayed_ms >= 3_600_000:
            self.expire(datetime.fromtimestamp(self._clock_ms / 1000, tz=UTC))

        if features.article_id in self._story_of_member:
            version = self._update_version(features, now_ms)
            if version is not None:
                return version

        idf = self._idf_function()
        vector = self._weighted_vector(features.terms, features.term_weights, idf)
        entity_weights = {e: idf("e:" + e) for e in _entity_words(features.entities)}

        copy = self.find_copy(features)
        if copy is not None:
            original_id, story_id, jaccard = copy
            story = self._stories[story_id]
            story.last_seen_ms = max(story.last_seen_ms, now_ms)
            story.size += 1  # a copy counts for coverage; it leaves the centroid as it is
            story.members.append(self._member(features, now_ms, original_id))
            self._story_of_member[features.article_id] = story.story_id
            self._remember(features, story.story_id, original_id, now_ms)
            self._count_document(features)
            return Assignment(features.article_id, story.story_id, original_id, False, jaccard)

        best = self._best_story(features, vector, entity_weights, idf, now_ms)
        if best is not None and best[1] >= self.params.join_threshold:
            story, score = best
            self._update_story(story, features, now_ms)
            is_new = False
        else:
            story = self._new_story(features, now_ms)
            score = best[1] if best is not None else 0.0
            is_new = True
        self._remember(features, story.story_id, features.article_id, now_ms)
        self._count_document(features)
        return Assignment(features.article_id, story.story_id, None, is_new, score)

    def expire(self, now: datetime) -> int:
        """Drop stories idle longer than the active window and articles older than it.

        Also decays the online IDF's document frequencies to ``now``.

        Args:
            now: The current stream time (timezone-aware).

        Returns:
            How many stories were dropped.
        """
        now_ms = _to_ms(now)
        window_ms = int(self.params.active_window_hours * 3_600_000)
        cutoff = now_ms - window_ms
        dropped = [s for s in self._stories.values() if s.last_seen_ms < cutoff]
        for story in dropped:
            self._drop_story(story)
        old = [r for r in self._recent.values() if r.seen_ms < cutoff]
        for recent in old:
            self._unindex_recent(recent)
            del self._recent[recent.article_id]
        if self._decayed_ms is not None and now_ms > self._decayed_ms:
            hours = (now_ms - self._decayed_ms) / 3_600_000
            factor = 0.5 ** (hours / self.params.idf_half_life_hours)
            self._n_docs *= factor
            self._df = {t: c * factor for t, c in self._df.items() if c * factor >= 0.05}
        if self._decayed_ms is None or now_ms > self._decayed_ms:
            self._decayed_ms = now_ms
        return len(dropped)

    @property
    def clock(self) -> datetime | None:
        """The latest first-seen time this clusterer has seen (its stream time)."""
        return None if self._clock_ms is None else _EPOCH + timedelta(milliseconds=self._clock_ms)

    def story_size_counts(self) -> dict[int, int]:
        """How many active stories have each number of members (for the run's size distribution)."""
        sizes: dict[int, int] = {}
        for story in self._stories.values():
            sizes[len(story.members)] = sizes.get(len(story.members), 0) + 1
        return dict(sorted(sizes.items()))

    @property
    def active_story_count(self) -> int:
        """Stories currently in memory."""
        return len(self._stories)

    def to_state(self) -> dict[str, object]:
        """A JSON-serialisable checkpoint; :meth:`from_state` resumes from it exactly."""
        return {
            "version": STATE_VERSION,
            "signature_version": SIGNATURE_VERSION,
            "language": self.language,
            "params": asdict(self.params),
            "clock_ms": self._clock_ms,
            "decayed_ms": self._decayed_ms,
            "n_docs": self._n_docs,
            "df": [[t, c] for t, c in self._df.items()],
            "stories": [s.to_json() for s in self._stories.values()],
            "recent": [[r.article_id, r.story_id, r.root_id, r.seen_ms, _encode_minhash(r.minhash)]
                       for r in self._recent.values()],
        }

    @classmethod
    def from_state(cls, state: Mapping[str, object]) -> LanguageClusterer:
        """Rebuild a clusterer from :meth:`to_state` output (indexes are rebuilt, not stored).

        The cyclic garbage collector is paused while the millions of small objects of a large
        checkpoint are built (none of them can be garbage yet): it would otherwise walk them
        again and again as they are allocated.

        Raises:
            ValueError: If the state was written by another state or signature version.
        """
        with paused_gc():
            return cls._from_state(state)

    @classmethod
    def _from_state(cls, state: Mapping[str, object]) -> LanguageClusterer:
        if state.get("version") not in READABLE_STATE_VERSIONS:
            raise ValueError(f"clusterer state version {state.get('version')!r} is not one of {READABLE_STATE_VERSIONS}")
        if state.get("signature_version") != SIGNATURE_VERSION:
            raise ValueError(f"state signature version {state.get('signature_version')!r} is not {SIGNATURE_VERSION!r}")
        raw_params = state["params"]
        assert isinstance(raw_params, Mapping)
        known = {f.name for f in fields(ClusterParams)}
        params = ClusterParams(**{k: v for k, v in raw_params.items() if k in known})
        out = cls(str(state["language"]), params)
        clock = state["clock_ms"]
        decayed = state["decayed_ms"]
        out._clock_ms = None if clock is None else int(clock)  # type: ignore[call-overload]
        out._decayed_ms = None if decayed is None else int(decayed)  # type: ignore[call-overload]
        out._n_docs = float(state["n_docs"])  # type: ignore[arg-type]
        out._df = {str(t): float(c) for t, c in state["df"]}  # type: ignore[attr-defined]
        for raw in state["stories"]:  # type: ignore[attr-defined]
            story = _Story.from_json(raw)
            out._stories[story.story_id] = story
            for member in story.members:
                out._story_of_member[member.article_id] = story.story_id
        out._index_new_stories(list(out._stories.values()))  # norms stay as saved: None ones are computed when first scored
        rows = list(state["recent"])  # type: ignore[call-overload]
        if rows:
            signatures = np.vstack([_decode_minhash(row[4]) for row in rows])
            keys = lsh_bands_many(signatures, params.lsh_bands, params.lsh_rows)
            recent, lsh = out._recent, out._lsh
            for (aid, sid, root, seen, _), signature, bands in zip(rows, signatures, keys, strict=True):
                # _index_recent, inlined: this loop runs for every recent article of a checkpoint.
                item = _Recent(str(aid), str(sid), str(root), int(seen), signature, bands)
                recent[item.article_id] = item
                for key in bands:
                    lsh[key].append(item.article_id)
        return out

    # ---------------------------------------------------------------- repair support

    def story_members(self, story_id: str) -> list[Member]:
        """The members of an active story, oldest first (a copy names its original)."""
        return list(self._stories[story_id].members)

    def story_ids(self) -> list[str]:
        """Ids of the active stories, sorted."""
        return sorted(self._stories)

    def story_times(self, story_id: str) -> tuple[int, int, int | None]:
        """``(first_seen_ms, last_seen_ms, repaired_ms)`` of an active story."""
        story = self._stories[story_id]
        return story.first_seen_ms, story.last_seen_ms, story.repaired_ms

    def story_first_article(self, story_id: str) -> str:
        """The article that started a story (its default representative)."""
        return self._stories[story_id].first_article_id

    def idf(self) -> Callable[[str], float]:
        """The current online IDF (``e:<word>`` for entity words)."""
        return self._idf_function()

    def centroid_vector(self, story_id: str) -> dict[str, float]:
        """A story's centroid weighted by the current IDF, L2-normalised."""
        idf = self._idf_function()
        story = self._stories[story_id]
        return self._weighted_vector(tuple(story.centroid), tuple(story.centroid.values()), idf)

    def apply_merge(self, survivor_id: str, merged_id: str, now: datetime) -> list[Member]:
        """Move every member of ``merged_id`` into ``survivor_id`` and drop ``merged_id``.

        Returns:
            The moved members.
        """
        if survivor_id == merged_id:
            raise ValueError("a story cannot be merged into itself")
        survivor = self._stories[survivor_id]
        merged = self._stories[merged_id]
        self._drop_story(merged)
        moved = list(merged.members)
        self._rebuild_story(survivor, survivor.members + moved, _to_ms(now))
        self._restory_recent(moved, survivor_id)
        return moved

    def apply_split(self, story_id: str, moved_ids: Iterable[str], now: datetime) -> tuple[str, list[Member]]:
        """Move ``moved_ids`` (and copies of them) out of ``story_id`` into a new story.

        The new story's id is made from its first article's first-seen second and a hash salted
        with the split (``story_id`` and ``now``), bumped past the active ids.

        Returns:
            The new story's id and its members.
        """
        story = self._stories[story_id]
        moving = set(moved_ids)
        moved = [m for m in story.members if m.article_id in moving or (m.copy_of in moving)]
        kept = [m for m in story.members if m not in moved]
        if not moved or not kept:
            raise ValueError(f"a split of {story_id} must leave members on both sides")
        first = min(moved, key=lambda m: (m.seen_ms, m.article_id))
        first_at = datetime.fromtimestamp(first.seen_ms / 1000, tz=UTC)
        now_ms = _to_ms(now)
        # Salted with the split: derived from the first article alone, the id could be the one
        # that article's story had before it was merged away, an alias that must never live again.
        new_id = self._free_story_id(make_story_id(first_at, first.article_id, self.language,
                                                   salt=f"split:{story_id}:{now_ms}"))
        self._rebuild_story(story, kept, now_ms)
        new = _Story(new_id, first.article_id, first.seen_ms, first.seen_ms, 0, {}, {}, [])
        self._stories[new_id] = new
        self._rebuild_story(new, moved, now_ms)
        self._restory_recent(moved, new_id)
        return new_id, moved

    def _rebuild_story(self, story: _Story, members: list[Member], now_ms: int) -> None:
        """Recompute a story from its member rows: centroid, entities, years, counters."""
        self._unindex_story(story)
        members = sorted(members, key=lambda m: (m.seen_ms, m.article_id))
        originals = [m for m in members if m.copy_of is None] or members
        summed: dict[str, float] = defaultdict(float)
        for member in originals:
            for term, weight in zip(member.terms, member.weights, strict=True):
                summed[term] += weight / len(originals)
        top = sorted(summed.items(), key=lambda kv: (-kv[1], kv[0]))[: self.params.centroid_terms]
        story.centroid = dict(top)
        story.norms = None
        entities: dict[str, float] = defaultdict(float)
        for member in originals:
            for word in member.entities:
                entities[word] += 1.0
        story.entities = dict(entities)
        story.years = _years(t for m in originals for t in m.terms)
        story.members = members
        for member in members:
            self._story_of_member[member.article_id] = story.story_id
        story.size = len(members)
        story.first_seen_ms = members[0].seen_ms
        story.last_seen_ms = max(m.seen_ms for m in members)
        story.first_article_id = members[0].article_id
        story.repaired_ms = now_ms
        self._index_story(story)

    def _restory_recent(self, members: Iterable[Member], story_id: str) -> None:
        for member in members:
            recent = self._recent.get(member.article_id)
            if recent is not None:
                recent.story_id = story_id

    # ---------------------------------------------------------------- internals

    def _idf_function(self) -> _Idf:
        return _Idf(self._df, self._n_docs, self.params.idf_prior_docs)

    @staticmethod
    def _weighted_vector(
        terms: Sequence[str], weights: Sequence[float], idf: _Idf
    ) -> dict[str, float]:
        raw = {t: w * idf(t) for t, w in zip(terms, weights, strict=True)}
        norm = math.sqrt(sum(v * v for v in raw.values()))
        return {t: v / norm for t, v in raw.items()} if norm > 0 else {}

    def find_copy(self, features: ArticleFeatures) -> tuple[str, str, float] | None:
        """The original an article would be named a copy of, without assigning it.

        The best LSH candidate at or above ``copy_jaccard`` is the match. The copy names the
        first article of the match's chain of copies when it is clearly a copy of that article
        too (estimated Jaccard at least ``copy_chain_jaccard``), else the match itself. A chain
        can hold a weak link: two reports of one event whose estimated Jaccard crossed
        ``copy_jaccard`` by the estimator's noise (128 permutations: a standard error of 0.044
        at 0.5). A verbatim reprint of the second shares that noise with the first, so only a
        margin above the bar keeps it from being named a copy of an article it barely resembles.

        Returns:
            ``(original_id, story_id, jaccard with the match)``, or None if it is no copy.
        """
        match = self._find_copy(features)
        if match is None:
            return None
        recent, jaccard = match
        original_id = recent.article_id
        root = self._recent.get(recent.root_id)
        if root is not None and root is not recent:
            mine = np.asarray(features.minhash, dtype=np.uint32)
            if estimate_jaccard(mine, root.minhash) >= self.params.copy_chain_jaccard:
                original_id = root.article_id
        elif root is None:  # the first article left the window: it cannot be checked, keep the chain
            original_id = recent.root_id
        return original_id, recent.story_id, jaccard

    def _find_copy(self, features: ArticleFeatures) -> tuple[_Recent, float] | None:
        keys = self._bands_of(features.minhash)
        seen: dict[str, None] = {}
        for key in keys:
            for aid in self._lsh.get(key, ()):
                seen[aid] = None
        best: tuple[_Recent, float] | None = None
        if not seen:
            return None
        mine = np.asarray(features.minhash, dtype=np.uint32)
        for aid in seen:
            recent = self._recent[aid]
            if aid == features.article_id or recent.story_id not in self._stories:
                continue  # an earlier version of the article itself is no original of it
            jaccard = estimate_jaccard(mine, recent.minhash)
            if jaccard < self.params.copy_jaccard:
                continue
            if best is None or (jaccard, best[0].article_id) > (best[1], aid):
                best = (recent, jaccard)
        return best

    def _best_story(
        self,
        features: ArticleFeatures,
        vector: Mapping[str, float],
        entity_weights: Mapping[str, float],
        idf: _Idf,
        now_ms: int,
    ) -> tuple[_Story, float] | None:
        partial, rest = self._candidate_dots(vector, idf)
        if not partial:
            return None
        n = self.params.max_candidates
        if len(partial) > n:
            cut = heapq.nlargest(n, partial.values())[-1]
            shortlist = sorted((s for s, v in partial.items() if v >= cut), key=lambda s: (-partial[s], s))[:n]
        else:
            shortlist = sorted(partial, key=lambda s: (-partial[s], s))
        if rest:  # terms whose postings were pruned: complete the dots of the shortlisted stories
            rest_weights = dict(rest)
            for sid in shortlist:
                centroid = self._stories[sid].centroid
                # Only the shared terms count (a C-level key intersection); fsum is exact, so
                # the set's iteration order cannot change the result.
                shared_terms = rest_weights.keys() & centroid.keys()
                if shared_terms:
                    partial[sid] += math.fsum([rest_weights[t] * centroid[t] for t in shared_terms])
        all_years = set(_years(features.terms))
        article_dates = {y for y in all_years if y.startswith(DATE_TERM_PREFIX)}
        article_years = all_years - article_dates
        entity_norm = math.sqrt(sum(w * w for w in entity_weights.values()))
        scored: list[tuple[float, str]] = []
        for sid in shortlist:
            story = self._stories[sid]
            norm, story_norm = self._story_norms(story, idf)
            cosine = partial[sid] / norm if norm > 0 else 0.0
            score = cosine
            if entity_norm > 0 and story_norm > 0:
                shared = sum(w * story.entities.get(e, 0.0) * w for e, w in entity_weights.items())
                score += self.params.entity_bonus * shared / (entity_norm * story_norm)
            story_dates = {y for y in story.years if y.startswith(DATE_TERM_PREFIX)}
            story_years = set(story.years) - story_dates
            if article_years and story_years and not article_years & story_years:
                score -= self.params.year_conflict_penalty
            if article_dates and story_dates and not article_dates & story_dates:
                score -= self.params.date_conflict_penalty
            hours = max(0, now_ms - story.last_seen_ms) / 3_600_000
            score -= self.params.time_penalty_per_hour * hours
            if self.params.member_weight > 0:
                score += self.params.member_weight * (self._member_mean(story, vector, idf) - cosine)
            if story.size <= self.params.young_story_size:
                score -= self.params.young_story_margin
            scored.append((score, sid))
        score, sid = min(scored, key=lambda x: (-x[0], x[1]))
        return self._stories[sid], score

    def _candidate_dots(
        self, vector: Mapping[str, float], idf: _Idf
    ) -> tuple[dict[str, float], list[tuple[str, float]]]:
        """Candidate stories and their IDF-weighted dots with the article, from the term index.

        Postings are read heaviest article term first, and reading stops once the terms left
        could not lift an unseen story to a joinable score: by Cauchy-Schwarz, a story sharing
        only those terms has a cosine of at most their norm, and a score of at most that plus
        the entity bonus (and the member share). The common, low-IDF terms, whose postings
        hold most of the active stories, are the ones this skips.

        Returns:
            ``(dots, rest)``: unnormalised dots over the terms read, and the unread terms
            with their IDF-weighted article weights, for the caller to complete the dots of
            the stories it keeps.

        At most ``max_postings`` postings are read per article: the article's terms are read
        heaviest first, and a term whose postings would overrun what is left is not read (it
        still counts in the dots of the shortlisted stories). On a busy stream those are the
        common words; a story is found through the names and rarer words it shares.
        """
        # The article vector is unit-length; the centroid side is weighted by the IDF.
        ranked = sorted(vector.items(), key=lambda kv: (-abs(kv[1]), kv[0]))
        tail = [0.0] * (len(ranked) + 1)
        for i in range(len(ranked) - 1, -1, -1):
            tail[i] = tail[i + 1] + ranked[i][1] ** 2
        bar = self._least_joinable_cosine()
        bar_sq = bar * bar if bar > 0 else -1.0
        budget = self.params.max_postings
        rest: list[tuple[str, float]] = []
        slot_parts: list[npt.NDArray[np.int64]] = []
        value_parts: list[npt.NDArray[np.float64]] = []
        for i, (term, weight) in enumerate(ranked):
            scaled = weight * idf(term)
            if tail[i] < bar_sq:
                rest.extend((t, w * idf(t)) for t, w in ranked[i:])
                break
            postings = self._term_index.get(term)
            if postings is None:
                continue
            if postings.live > budget:
                rest.append((term, scaled))  # a common term: counted for the shortlist only
                continue
            budget -= postings.live
            slots, values = postings.read(self._slot_stamp)
            slot_parts.append(slots)
            value_parts.append(values * scaled)
        if not slot_parts:
            return {}, rest
        # Sums per story in term order (as a loop over the terms would add them).
        unique, inverse = np.unique(np.concatenate(slot_parts), return_inverse=True)
        sums = np.bincount(inverse, weights=np.concatenate(value_parts), minlength=unique.size)
        keep = self.params.max_candidates
        if unique.size > keep:  # the shortlist and every story tied with its last place
            cut = np.partition(sums, unique.size - keep)[unique.size - keep]
            chosen = np.flatnonzero(sums >= cut)
        else:
            chosen = np.arange(unique.size)
        story_of_slot = self._story_of_slot
        return {story_of_slot[int(unique[k])]: float(sums[k]) for k in chosen}, rest

    def _least_joinable_cosine(self) -> float:
        """Least centroid cosine with which a story could still reach ``join_threshold``."""
        p = self.params
        if p.member_weight >= 1.0:
            return 0.0
        return (p.join_threshold - p.entity_bonus - p.member_weight) / (1.0 - p.member_weight)

    def _story_norms(self, story: _Story, idf: _Idf) -> tuple[float, float]:
        """IDF-weighted norms of a story's centroid and entity counts, cached on the story.

        Recomputing them for every candidate of every article costs more than the rest of an
        assignment; they are kept until the centroid changes or the IDF's document count has
        moved by more than ``norm_tolerance`` (relative), so they are at most that stale. The
        cache is part of the checkpoint, so a resumed writer decides exactly as before.
        """
        cached = story.norms
        n = self._n_docs
        if cached is not None and abs(n - cached[2]) <= self.params.norm_tolerance * cached[2]:
            return cached[0], cached[1]
        norm = math.sqrt(sum((w * idf(t)) ** 2 for t, w in story.centroid.items()))
        entity_norm = math.sqrt(sum((c * idf("e:" + e)) ** 2 for e, c in story.entities.items()))
        story.norms = (norm, entity_norm, n)
        return norm, entity_norm

    def _free_story_id(self, candidate: str) -> str:
        """``candidate``, or the next 64-bit value after it that no active story of this writer
        holds (deterministic: a rerun from the same state bumps the same way)."""
        value = int(candidate, 16)
        while f"{value:016x}" in self._stories:
            value += 1
            if value >= 1 << 64:
                raise ValueError(f"no free story id after {candidate}")
        return f"{value:016x}"

    def _new_story(self, features: ArticleFeatures, now_ms: int) -> _Story:
        story_id = self._free_story_id(make_story_id(features.first_seen_at, features.article_id, self.language))
        story = _Story(
            story_id=story_id,
            first_article_id=features.article_id,
            first_seen_ms=now_ms,
            last_seen_ms=now_ms,
            size=1,
            centroid=dict(zip(features.terms, features.term_weights, strict=True)),
            entities={e: 1.0 for e in _entity_words(features.entities)},
            years=_years(features.terms),
            members=[self._member(features, now_ms, None)],
        )
        self._stories[story_id] = story
        self._story_of_member[features.article_id] = story_id
        self._index_story(story)
        return story

    def _update_story(self, story: _Story, features: ArticleFeatures, now_ms: int) -> None:
        self._unindex_story(story)
        story.size += 1
        # A running mean over the original members (copies count for coverage only), as
        # _rebuild_story recomputes it from them.
        originals = 1 + sum(1 for m in story.members if m.copy_of is None)
        alpha = max(1.0 / originals, self.params.centroid_min_weight)
        merged = {t: (1.0 - alpha) * w for t, w in story.centroid.items()}
        for term, weight in zip(features.terms, features.term_weights, strict=True):
            merged[term] = merged.get(term, 0.0) + alpha * weight
        top = sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))[: self.params.centroid_terms]
        story.centroid = dict(top)
        story.norms = None
        for word in _entity_words(features.entities):
            story.entities[word] = story.entities.get(word, 0.0) + 1.0
        story.years = sorted(set(story.years) | set(_years(features.terms)))
        story.last_seen_ms = max(story.last_seen_ms, now_ms)
        story.members.append(self._member(features, now_ms, None))
        self._story_of_member[features.article_id] = story.story_id
        self._index_story(story)

    def _update_version(self, features: ArticleFeatures, now_ms: int) -> Assignment | None:
        """Replace a held article's features with those of its new version, in place (None,
        and the article is placed as new, if its story no longer lists it).

        The member keeps its place, first-seen time and ``copy_of``. An original member's share
        of the centroid (``1 / originals``, its weight in the plain mean the repair pass
        recomputes) moves from its old terms to its new ones, and its entities and years are
        swapped; a copy never weighed in the centroid. Its signature replaces the old one in
        the copy index. The IDF is not counted again: it counts articles, not versions.
        """
        story = self._stories.get(self._story_of_member[features.article_id])
        index = None if story is None else next(
            (i for i, m in enumerate(story.members) if m.article_id == features.article_id), None)
        if story is None or index is None:
            del self._story_of_member[features.article_id]
            return None
        old = story.members[index]
        new = self._member(features, old.seen_ms, old.copy_of)
        story.members[index] = new
        if old.copy_of is None:
            self._unindex_story(story)
            originals = [m for m in story.members if m.copy_of is None]
            if len(originals) == 1:
                centroid = dict(zip(features.terms, features.term_weights, strict=True))
            else:
                share = 1.0 / len(originals)
                centroid = dict(story.centroid)
                for term, weight in zip(old.terms, old.weights, strict=True):
                    centroid[term] = centroid.get(term, 0.0) - share * weight
                for term, weight in zip(features.terms, features.term_weights, strict=True):
                    centroid[term] = centroid.get(term, 0.0) + share * weight
            top = sorted(((t, w) for t, w in centroid.items() if w > 1e-12), key=lambda kv: (-kv[1], kv[0]))
            story.centroid = dict(top[: self.params.centroid_terms])
            story.norms = None
            for word in old.entities:
                count = story.entities.get(word, 0.0) - 1.0
                if count > 0:
                    story.entities[word] = count
                else:
                    story.entities.pop(word, None)
            for word in new.entities:
                story.entities[word] = story.entities.get(word, 0.0) + 1.0
            others = set(_years(t for m in originals if m is not new for t in m.terms))
            gone = set(_years(old.terms)) - others
            story.years = sorted((set(story.years) - gone) | set(_years(features.terms)))
            self._index_story(story)
        previous = self._recent.get(features.article_id)
        jaccard = 0.0
        if previous is not None:
            jaccard = estimate_jaccard(np.asarray(features.minhash, dtype=np.uint32), previous.minhash)
        root = previous.root_id if previous is not None else (old.copy_of or old.article_id)
        self._remember(features, story.story_id, root, now_ms)
        return Assignment(features.article_id, story.story_id, old.copy_of, False, jaccard, is_new_version=True)

    def _member(self, features: ArticleFeatures, now_ms: int, copy_of: str | None) -> Member:
        k = self.params.member_terms
        return Member(
            article_id=features.article_id,
            seen_ms=now_ms,
            publisher_id=features.publisher_id,
            copy_of=copy_of,
            terms=features.terms[:k],
            weights=features.term_weights[:k],
            entities=tuple(_entity_words(features.entities)),
        )

    def _member_mean(self, story: _Story, vector: Mapping[str, float], idf: _Idf) -> float:
        """Mean IDF-weighted cosine of the article to the story's latest original members."""
        originals = [m for m in story.members if m.copy_of is None][-self.params.member_sample :]
        if not originals:
            return 0.0
        total = 0.0
        for member in originals:
            dot = 0.0
            norm = 0.0
            for term, weight in zip(member.terms, member.weights, strict=True):
                value = weight * idf(term)
                norm += value * value
                dot += value * vector.get(term, 0.0)
            if norm > 0:
                total += dot / math.sqrt(norm)
        return total / len(originals)

    def _index_story(self, story: _Story) -> None:
        slot = self._slot_of.get(story.story_id)
        if slot is not None and self._slot_stamp[slot] >= 0:
            self._unindex_story(story)
        if slot is None:
            slot = heapq.heappop(self._free_slots) if self._free_slots else len(self._story_of_slot)
            if slot == len(self._story_of_slot):
                self._story_of_slot.append(story.story_id)
                if slot >= self._slot_stamp.size:
                    self._slot_stamp = np.concatenate([self._slot_stamp, np.full(max(1024, slot), -1, np.int64)])
            else:
                self._story_of_slot[slot] = story.story_id
            self._slot_of[story.story_id] = slot
        self._next_stamp += 1
        stamp = self._next_stamp
        self._slot_stamp[slot] = stamp
        index, slot_stamp = self._term_index, self._slot_stamp
        for term, weight in story.centroid.items():
            postings = index.get(term)
            if postings is None:
                postings = index[term] = _Postings()
            # Append one posting (the only place postings are added; inlined, as this loop runs for
            # every term of every updated story), compacting once stale ones outnumber live ones.
            postings.slots.append(slot)
            postings.weights.append(weight)
            postings.stamps.append(stamp)
            postings.live += 1
            if len(postings.slots) > 2 * postings.live + 16:
                postings.read(slot_stamp)

    def _index_new_stories(self, stories: Sequence[_Story]) -> None:
        """Index ``stories`` into an empty clusterer at once: the same slots, stamps and postings
        (in the same order) as calling :meth:`_index_story` on each in turn, built with numpy
        instead of one array append per centroid term (a 50,000-story checkpoint loads seconds
        faster; bench/writer_checkpoint.py)."""
        if self._stories.keys() - {s.story_id for s in stories} or self._story_of_slot:
            raise RuntimeError("bulk indexing needs a clusterer with no story indexed yet")
        n = len(stories)
        if n == 0:
            return
        self._story_of_slot = [s.story_id for s in stories]
        self._slot_of = {sid: slot for slot, sid in enumerate(self._story_of_slot)}
        size = self._slot_stamp.size
        while size <= n - 1:
            size += max(1024, size)
        self._slot_stamp = np.full(size, -1, np.int64)
        self._slot_stamp[:n] = np.arange(1, n + 1, dtype=np.int64)
        self._next_stamp = n
        term_ids: dict[str, int] = {}
        flat_ids: list[int] = []
        flat_weights: list[float] = []
        counts = np.empty(n, dtype=np.int64)
        for slot, story in enumerate(stories):
            centroid = story.centroid
            counts[slot] = len(centroid)
            flat_ids.extend([term_ids.setdefault(term, len(term_ids)) for term in centroid])
            flat_weights.extend(centroid.values())
        ids = np.asarray(flat_ids, dtype=np.int64)
        order = np.argsort(ids, kind="stable")  # within a term, postings stay in slot order
        slots = np.repeat(np.arange(n, dtype=np.int64), counts)[order]
        weights = np.asarray(flat_weights, dtype=np.float64)[order]
        stamps = slots + 1
        ends = np.cumsum(np.bincount(ids, minlength=len(term_ids)))
        start = 0
        for term, end in zip(term_ids, ends.tolist(), strict=True):
            postings = self._term_index[term] = _Postings()
            postings.slots.frombytes(slots[start:end].tobytes())
            postings.weights.frombytes(weights[start:end].tobytes())
            postings.stamps.frombytes(stamps[start:end].tobytes())
            postings.live = end - start
            start = end

    def _unindex_story(self, story: _Story) -> None:
        slot = self._slot_of.get(story.story_id)
        if slot is None or self._slot_stamp[slot] < 0:
            return
        self._slot_stamp[slot] = -1  # every posting of the story is stale from now on
        for term in story.centroid:
            postings = self._term_index.get(term)
            if postings is not None:
                postings.live -= 1
                if postings.live <= 0:
                    del self._term_index[term]

    def _drop_story(self, story: _Story) -> None:
        """Unindex a story and free its slot."""
        self._unindex_story(story)
        del self._stories[story.story_id]
        for member in story.members:
            if self._story_of_member.get(member.article_id) == story.story_id:
                del self._story_of_member[member.article_id]
        slot = self._slot_of.pop(story.story_id)
        self._story_of_slot[slot] = ""
        heapq.heappush(self._free_slots, slot)

    def _bands_of(self, minhash: Sequence[int]) -> list[int]:
        """LSH keys of a signature; the copy check and ``_remember`` of one article share them."""
        memo = self._bands_memo
        if memo is not None and memo[0] is minhash:
            return memo[1]
        keys = lsh_bands(minhash, self.params.lsh_bands, self.params.lsh_rows)
        self._bands_memo = (minhash, keys)
        return keys

    def _remember(self, features: ArticleFeatures, story_id: str, root_id: str, now_ms: int) -> None:
        recent = _Recent(features.article_id, story_id, root_id, now_ms, np.asarray(features.minhash, dtype=np.uint32))
        self._index_recent(recent, self._bands_of(features.minhash))

    def _index_recent(self, recent: _Recent, bands: list[int]) -> None:
        # A new version of an article replaces the old one everywhere, as a reloaded state has it:
        # left in the old version's buckets, its id would outlive its entry when it expires.
        previous = self._recent.pop(recent.article_id, None)
        if previous is not None:
            self._unindex_recent(previous)
        recent.bands = bands
        self._recent[recent.article_id] = recent
        for key in recent.bands:
            self._lsh[key].append(recent.article_id)

    def _unindex_recent(self, recent: _Recent) -> None:
        """Take an article's id out of its LSH buckets (each holds it once per band that hashed there)."""
        for key in recent.bands:
            bucket = self._lsh.get(key)
            if bucket is not None:
                bucket.remove(recent.article_id)
                if not bucket:
                    del self._lsh[key]

    def _count_document(self, features: ArticleFeatures) -> None:
        self._n_docs += 1.0
        for term in features.terms:
            self._df[term] = self._df.get(term, 0.0) + 1.0
        for entity in _entity_words(features.entities):
            key = "e:" + entity
            self._df[key] = self._df.get(key, 0.0) + 1.0


class _Postings:
    """The postings of one term: append-only arrays of (slot, weight, stamp).

    A posting is live while its stamp is the current stamp of its slot; re-indexing a story
    gives it a new stamp, so its old postings go stale without being searched for. Stale
    postings are dropped once they outnumber the live ones.
    """

    __slots__ = ("slots", "weights", "stamps", "live")

    def __init__(self) -> None:
        self.slots = array("q")
        self.weights = array("d")
        self.stamps = array("q")
        self.live = 0

    def read(self, slot_stamp: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Live ``(slots, weights)``, compacting the arrays when stale postings are found."""
        slots = np.frombuffer(self.slots, dtype=np.int64)
        weights = np.frombuffer(self.weights, dtype=np.float64)
        if slots.size == self.live:
            return slots, weights
        mask = np.frombuffer(self.stamps, dtype=np.int64) == slot_stamp[slots]
        slots, weights = slots[mask], weights[mask]
        stamps = np.frombuffer(self.stamps, dtype=np.int64)[mask]
        self.slots = array("q", slots.tobytes())
        self.weights = array("d", weights.tobytes())
        self.stamps = array("q", stamps.tobytes())
        return slots, weights


class _Idf:
    """Smoothed online IDF: ``ln((N + prior) / (df + 1))``, at least a small floor."""

    __slots__ = ("_df", "_n", "_cache")

    def __init__(self, df: Mapping[str, float], n_docs: float, prior_docs: float) -> None:
        self._df = df
        self._n = n_docs + prior_docs
        self._cache: dict[str, float] = {}

    def __call__(self, term: str) -> float:
        value = self._cache.get(term)
        if value is None:
            value = max(math.log((self._n + 1.0) / (self._df.get(term, 0.0) + 1.0)), 0.1)
            self._cache[term] = value
        return value


def cluster_articles(articles: Iterable[ArticleFeatures], params: ClusterParams | None = None) -> list[Assignment]:
    """Cluster articles online, one :class:`LanguageClusterer` per language, in the given order.

    Args:
        articles: Features in arrival order.
        params: Clusterer parameters; the tuned defaults if omitted.

    Returns:
        One assignment per article, in input order.
    """
    params = params or ClusterParams()
    clusterers: dict[str, LanguageClusterer] = {}
    out: list[Assignment] = []
    for features in articles:
        clusterer = clusterers.get(features.language)
        if clusterer is None:
            clusterer = clusterers[features.language] = LanguageClusterer(features.language, params)
        out.append(clusterer.assign(features))
    return out


_LATIN_TOKEN_RE = re.compile(r"^[a-z\u00c0-\u024f][a-z\u00c0-\u024f0-9'\-]*$")


def language_neutral_tokens(features: ArticleFeatures) -> list[str]:
    """Tokens that read the same in every language: names, acronyms and numbers (see
    :func:`neutral_tokens`)."""
    return neutral_tokens(features.entities, features.terms)


def neutral_tokens(entities: Sequence[str], terms: Sequence[str]) -> list[str]:
    """Tokens that read the same in every language: names, acronyms and numbers.

    Words of the article's entities (Latin-script names, which Malay and English share and
    Chinese newswires give in brackets), Latin-script terms of CJK articles, and numbers of
    two or more digits (amounts, ages, dates), plus the dateline year.

    >>> neutral_tokens(["anwar ibrahim"], ["perdana", "2024", "date:2024"])
    ['anwar', 'ibrahim', '2024', 'date:2024']
    """
    out: dict[str, None] = {}
    for name in entities:
        for word in name.split():
            word = word.strip("'-")
            if len(word) > 2 and _LATIN_TOKEN_RE.match(word):
                out[word] = None
    cjk = any("\u4e00" <= ch <= "\u9fff" for t in terms[:10] for ch in t)
    for term in terms:
        if term.isdigit() and len(term) >= 2:
            out[term] = None
        elif term.startswith(DATE_TERM_PREFIX):
            out[term] = None
        elif cjk and len(term) > 2 and _LATIN_TOKEN_RE.match(term):
            out[term] = None
    return list(out)


def link_languages(
    articles: Sequence[ArticleFeatures], assignments: Sequence[Assignment], params: ClusterParams | None = None
) -> dict[str, str]:
    """Link stories of different languages that report the same event.

    Two rules, by what the stories carry:

    - **Embeddings** (both stories have articles with a sentence embedding, see
      :mod:`transforms.embedding`): the stories' mean embeddings are compared across languages;
      a pair is linked when its cosine is at least ``params.link_embedding_threshold`` and each
      story is the other's best match in that language (mutual best: one event is usually one
      story per language, and a near-miss second best is the usual false link).
    - **Language-neutral tokens** otherwise: a profile of :func:`language_neutral_tokens`
      counted over the story's articles, compared by IDF-weighted cosine (IDF over the stories
      given, i.e. the active window); pairs at or above ``params.link_threshold`` sharing at
      least ``params.link_min_shared`` tokens are linked.

    Links are joined with union-find. Only stories of different languages are linked directly;
    a group can still hold two stories of one language through a third.

    Args:
        articles: Features of the articles of the window, any languages.
        assignments: Their assignments (same order or not; matched by article id).
        params: Parameters (``link_embedding_threshold``, ``link_threshold``, ``link_min_shared``).

    Returns:
        Story id → linked group id (the smallest story id of the group), only for stories
        linked to at least one other story.
    """
    params = params or ClusterParams()
    story_of = {a.article_id: a.story_id for a in assignments}
    profiles: dict[str, dict[str, float]] = {}
    language_of: dict[str, str] = {}
    embeddings: dict[str, list[Sequence[float]]] = defaultdict(list)
    for features in articles:
        sid = story_of.get(features.article_id)
        if sid is None:
            continue
        language_of[sid] = features.language
        profile = profiles.setdefault(sid, {})
        for token in language_neutral_tokens(features):
            profile[token] = profile.get(token, 0.0) + 1.0
        if features.embedding:
            embeddings[sid].append(features.embedding)
    return link_story_profiles(language_of, profiles, embeddings, params)


def _mutual_best_pairs(left: npt.NDArray[np.float64], right: npt.NDArray[np.float64], threshold: float,
                       chunk: int = 1024) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)`` where row ``i`` of ``left`` and row ``j`` of ``right`` are each other's
    most similar (dot product; first index on ties) and their dot is at least ``threshold``.

    Computed in row chunks, so memory stays ``chunk × len(right)`` however many stories a
    snapshot lists.

    >>> eye = np.eye(3)
    >>> _mutual_best_pairs(eye, eye[[2, 0]], 0.5)
    [(0, 1), (2, 0)]
    """
    best_right = np.empty(len(left), dtype=np.int64)
    best_right_score = np.empty(len(left))
    col_best = np.full(len(right), -1, dtype=np.int64)
    col_score = np.full(len(right), -np.inf)
    for start in range(0, len(left), chunk):
        sims = left[start : start + chunk] @ right.T
        best_right[start : start + len(sims)] = np.argmax(sims, axis=1)
        best_right_score[start : start + len(sims)] = sims.max(axis=1)
        rows = np.argmax(sims, axis=0)
        scores = sims[rows, np.arange(len(right))]
        better = scores > col_score  # strictly: an earlier row keeps a tie
        col_best[better] = rows[better] + start
        col_score[better] = scores[better]
    return [(i, int(j)) for i, j in enumerate(best_right.tolist())
            if col_best[j] == i and best_right_score[i] >= threshold]


def link_story_profiles(
    language_of: Mapping[str, str],
    token_counts: Mapping[str, Mapping[str, float]],
    embeddings: Mapping[str, Sequence[Sequence[float]]],
    params: ClusterParams | None = None,
) -> dict[str, str]:
    """The linking of :func:`link_languages`, from per-story profiles.

    Args:
        language_of: Story id → language, for every story to consider.
        token_counts: Story id → language-neutral token → count.
        embeddings: Story id → the sentence embeddings of its articles (may be missing).
        params: Parameters.

    Returns:
        Story id → linked group id (the smallest story id of the group), only for linked stories.
    """
    params = params or ClusterParams()
    parent = {sid: sid for sid in language_of}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        a, b = find(a), find(b)
        if a != b:
            parent[max(a, b)] = min(a, b)

    ordered = sorted(language_of)
    directions = {sid: d for sid in ordered if (d := mean_direction(embeddings.get(sid) or ())) is not None}
    by_language: dict[str, list[str]] = defaultdict(list)
    for sid in ordered:
        if sid in directions:
            by_language[language_of[sid]].append(sid)
    languages = sorted(by_language)
    for i, first in enumerate(languages):
        for second in languages[i + 1 :]:
            a_ids, b_ids = by_language[first], by_language[second]
            for a, b in _mutual_best_pairs(np.vstack([directions[s] for s in a_ids]),
                                           np.vstack([directions[s] for s in b_ids]),
                                           params.link_embedding_threshold):
                union(a_ids[a], b_ids[b])

    # Token profiles, for the pairs the embeddings cannot judge (a story without embeddings).
    df: dict[str, int] = defaultdict(int)
    for sid in ordered:
        for token in token_counts.get(sid, {}):
            df[token] += 1
    n = len(ordered)
    vectors: dict[str, dict[str, float]] = {}
    for sid in ordered:
        raw = {t: (1.0 + math.log(c)) * math.log((n + 1) / (df[t] + 0.5)) for t, c in token_counts.get(sid, {}).items()}
        norm = math.sqrt(sum(v * v for v in raw.values()))
        vectors[sid] = {t: v / norm for t, v in raw.items()} if norm > 0 else {}
    index: dict[str, list[str]] = defaultdict(list)
    for sid in ordered:
        for token in vectors[sid]:
            index[token].append(sid)
    for sid in ordered:
        dots: dict[str, float] = defaultdict(float)
        shared: dict[str, int] = defaultdict(int)
        for token, weight in vectors[sid].items():
            for other in index[token]:
                if other > sid:
                    dots[other] += weight * vectors[other][token]
                    shared[other] += 1
        for other in sorted(dots):
            same = language_of[other] == language_of[sid]
            if not same and sid in directions and other in directions:
                continue  # judged by the embeddings above
            threshold = params.link_same_language_threshold if same else params.link_threshold
            if threshold is not None and dots[other] >= threshold and shared[other] >= params.link_min_shared:
                union(sid, other)
    groups: dict[str, list[str]] = defaultdict(list)
    for sid in ordered:
        groups[find(sid)].append(sid)
    return {sid: min(members) for members in groups.values() if len(members) > 1 for sid in members}
