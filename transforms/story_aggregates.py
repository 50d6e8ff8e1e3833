"""Story aggregates kept from the change log (issue 15): what ranking needs of each story, updated
from only the story changes and article rows a rank cycle has not folded yet.

A rank cycle used to read every article and story change of the 48-hour window and recompute
every story's aggregates (``story_scores.sql``), so its cost grew with everything stored. Here a
story is one compact row (counts, first and last seen, its original publishers, the few recent
and early originals that velocity, coverage and bursts look at, section votes, its story-level
representative) and a cycle folds only what is new onto the rows it touches. Members (the
article fields pages show) are kept beside it, and read only for the stories a page lists.

What a story holds, the same for a cycle that folds one minute onto the aggregates and for a
rebuild that folds the whole log at once (so the two give equal tables):

- An article's story is its latest change by offset among ``new_story``, ``assign``, ``copy``,
  ``merge`` and ``split`` (as ``story_assignments_as_of`` reads it); ``copy_of`` comes with it.
- Its text is the latest version its writer acknowledged: a row of the article whose
  ``first_seen_at`` equals the ``changed_at`` of one of its ``new_story``, ``assign``, ``copy``
  or ``version`` changes (the writer stamps those with the row's time). A new version that ingest
  stored and the writer has not clustered yet shows from the cycle that reads its ``version``
  change; until then the member keeps the text its story was built from.
- It is a member once it has a story and an acknowledged row, and its publisher is registered and
  not opted out (copies never count for coverage; opted-out publishers never count at all). Its
  first seen time is its earliest acknowledged row's.

Joins are a monoid on the story row (:func:`add_member`): counts add, times take min and max,
sorted lists merge. Moves (merge, split) and new versions recompute the stories they touch from
their members (:func:`story_from_members`). Pure: the clock arrives as ``at``; nothing here reads
the store.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, NotRequired, TypedDict

import numpy as np

from transforms.representative import has_title
from transforms.sections import article_section_votes

ASSIGN_KINDS = frozenset({"new_story", "assign", "copy", "merge", "split"})
"""Changes that name an article's story (``story_assignments_as_of``)."""
ACK_KINDS = frozenset({"new_story", "assign", "copy", "version"})
"""Changes whose ``changed_at`` is the ``first_seen_at`` of the article row the writer clustered."""
MOVE_KINDS = frozenset({"merge", "split"})

ROW_FIELDS = (
    "article_id", "version", "content_hash", "publisher_id", "language", "first_seen_at", "title", "snippet", "url",
    "canonical_url", "image_url", "section", "categories", "section_guess", "is_opinion", "terms", "term_weights",
    "entities", "embedding_q", "embedding_scale",
)
"""What a member keeps of its article row: the fields pages, representatives and links read.
The sentence embedding is kept quantized (:func:`quantize_embedding`); signatures and the body
never are."""
ROW_REF = "row_ref"
"""A caller's own reference to where a row came from (a rebuild's index into the rows it read, so
the fields it left out of the fold are joined back); it moves with the row a member shows."""
MEMBER_FIELDS = ("story_id", *ROW_FIELDS, "copy_of", "assigned_offset", "listed_at")
"""A member: its row, its story, and when a published story snapshot first listed it (``log/listings``)."""

class FoldRow(TypedDict, total=False):
    """An article row as the fold reads it (``ROW_FIELDS``; the embedding quantized), with the
    caller's ``row_ref`` when it left :data:`ROW_FIELDS`' heavy columns behind."""

    article_id: str
    version: int
    content_hash: str
    publisher_id: str
    language: str
    first_seen_at: datetime
    title: str | None
    snippet: str | None
    url: str
    canonical_url: str | None
    image_url: str | None
    section: str | None
    categories: list[str] | None
    section_guess: str | None
    is_opinion: bool
    terms: list[str] | None
    term_weights: list[float] | None
    entities: list[str] | None
    embedding_q: bytes | None
    embedding_scale: float | None
    row_ref: int


class MemberRow(FoldRow, total=False):
    """A member (``MEMBER_FIELDS``): its acknowledged row, its story, and when a published story
    snapshot first listed it."""

    story_id: str
    copy_of: str | None
    assigned_offset: int | None
    listed_at: datetime | None


class StoryRow(TypedDict):
    """One story's aggregate (``STORY_AGGREGATES_SCHEMA``): counts, times, the recent and early
    originals velocity, coverage and bursts read, section votes and its story-level representative."""

    story_id: str
    is_removed: NotRequired[bool]
    language: str | None
    first_seen_at: datetime | None
    last_seen_at: datetime | None
    article_count: int
    original_count: int
    titled_count: int
    first_original_at: datetime | None
    last_original_at: datetime | None
    older_last_at: datetime | None
    publishers: list[str]
    recent_times: list[datetime]
    recent_publishers: list[str]
    cov_publishers: list[str]
    cov_times: list[datetime]
    early_times: list[datetime]
    early_publishers: list[str]
    section_names: list[str]
    section_counts: list[int]
    rep_class: int | None
    rep_authority: float | None
    rep_article_id: str | None
    rep_publisher_id: str | None
    rep_title: str | None
    rep_snippet: str | None
    rep_image_url: str | None
    rep_url: str | None
    rep_first_seen_at: datetime | None
    rep_is_copy: bool | None
    rep_is_opinion: bool | None
    rep_language: str | None


@dataclass(frozen=True, slots=True)
class AggregateRules:
    """The windows a story row must answer for; a change of any of them rebuilds the aggregates.

    Attributes:
        coverage_window_hours: Publishers count for coverage this long after their last original.
        velocity_window_minutes: The recent window of velocity.
        lag_seconds: How far back the smoothing looks: (smoothing cycles - 1) x cycle seconds.
        early_minutes: Originals this soon after a story's first article are kept one by one
            (bursts, the first-hour baseline): at least an hour and the Breaking window.
        active_hours: Stories idle longer leave the table.
        pending_hours: Article rows and changes that wait for their other half this long are dropped.
    """

    coverage_window_hours: float = 6.0
    velocity_window_minutes: float = 30.0
    lag_seconds: int = 240
    early_minutes: float = 60.0
    active_hours: float = 48.0
    pending_hours: float = 48.0

    def __post_init__(self) -> None:
        if min(self.coverage_window_hours, self.velocity_window_minutes, self.active_hours, self.pending_hours) <= 0:
            raise ValueError("windows must be > 0")
        if self.lag_seconds < 0 or self.early_minutes < 60:
            raise ValueError("lag_seconds must be >= 0 and early_minutes >= 60")

    def fingerprint(self) -> str:
        """A short stable hash of the rules (stored with the aggregates)."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()

    def horizons(self, at: datetime) -> tuple[datetime, datetime, timedelta]:
        """(trim horizon, coverage horizon, early window) at ``at``, computed once per fold."""
        return _horizons(self, at)

    def trim_horizon(self, at: datetime) -> datetime:
        """Originals at or before this are summed up, not kept one by one: every lag a cycle at or
        after ``at`` scores looks at most velocity_window back from ``at - lag``."""
        return at - timedelta(seconds=self.lag_seconds) - timedelta(minutes=self.velocity_window_minutes)

    def coverage_horizon(self, at: datetime) -> datetime:
        """A publisher whose last original is at or before this never counts for coverage again
        (unless it publishes again)."""
        return at - timedelta(seconds=self.lag_seconds) - timedelta(hours=self.coverage_window_hours)

    def early_window(self) -> timedelta:
        return timedelta(minutes=self.early_minutes)


@functools.lru_cache(maxsize=64)
def _horizons(rules: AggregateRules, at: datetime) -> tuple[datetime, datetime, timedelta]:
    return rules.trim_horizon(at), rules.coverage_horizon(at), rules.early_window()


def registry_fingerprint(publishers: Iterable[Mapping[str, Any]]) -> str:
    """A short stable hash of what the aggregates read from the registry: who may count, and
    the authority representatives are chosen by. Names, regions and paywalls are read at rank
    time, so they never invalidate the aggregates."""
    items = sorted((str(p["publisher_id"]), repr(float(p["authority"] or 0.0)), bool(p["is_opted_out"]))
                   for p in publishers)
    return hashlib.blake2b(json.dumps(items).encode(), digest_size=8).hexdigest()


# --- Embeddings -----------------------------------------------------------------------------------

def quantize_embedding(values: Sequence[float] | None) -> tuple[bytes | None, float | None]:
    """A sentence embedding as int8 bytes and one scale (max |x| / 127): a quarter of the float32
    bytes, and deterministic, so a rebuild quantizes exactly as the cycle that first folded it.

    >>> q, scale = quantize_embedding([0.5, -0.25, 0.0])
    >>> [round(float(x), 3) for x in dequantize_embedding(q, scale)]
    [0.5, -0.252, 0.0]
    >>> quantize_embedding([])
    (None, None)
    """
    if values is None or len(values) == 0:
        return None, None
    array = np.asarray(values, dtype=np.float32)
    top = float(np.max(np.abs(array)))
    if not math.isfinite(top):
        return None, None
    scale = np.float32(top / 127.0) if top > 0 else np.float32(1.0)
    q = np.clip(np.rint(array / scale), -127, 127).astype(np.int8)
    return q.tobytes(), float(scale)


def dequantize_embedding(data: bytes | None, scale: float | None) -> np.ndarray | None:
    """The float32 embedding :func:`quantize_embedding` stored (None when there is none)."""
    if data is None or scale is None:
        return None
    return np.frombuffer(data, dtype=np.int8).astype(np.float32) * np.float32(scale)


def quantize_embedding_column(lengths: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`quantize_embedding` of many embeddings at once (an Arrow list column's value lengths and
    flat float32 values): the flat int8 values, each row's scale, and which rows have an embedding.
    The same bytes and scales as one by one.

    >>> q, scale, ok = quantize_embedding_column(np.array([2, 0]), np.array([0.5, -0.25], dtype=np.float32))
    >>> (q.tobytes(), float(scale[0]), ok.tolist()) == (quantize_embedding([0.5, -0.25])[0],
    ...                                                 quantize_embedding([0.5, -0.25])[1], [True, False])
    True
    """
    values = values.astype(np.float32, copy=False)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    has = lengths > 0
    top = np.zeros(len(lengths), dtype=np.float32)
    if has.any():
        top[has] = np.maximum.reduceat(np.abs(values), starts[has])
    ok = has & np.isfinite(top)
    scale = np.where(top > 0, (top.astype(np.float64) / 127.0).astype(np.float32), np.float32(1.0))
    with np.errstate(invalid="ignore", over="ignore"):  # rows with NaN or inf are not ok
        q = np.clip(np.rint(values / np.repeat(scale, lengths)), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32), ok


def row_rank(row: Mapping[str, Any]) -> tuple[int, datetime, str]:
    """Which of two acknowledged rows of one article a member shows: the latest version, then the
    latest seen, then (a rerun's duplicate) the larger content hash."""
    return (int(row["version"] or 0), row["first_seen_at"], str(row["content_hash"] or ""))


# --- One story ------------------------------------------------------------------------------------

def empty_story(story_id: str, language: str | None) -> StoryRow:
    return {
        "story_id": story_id, "language": language, "first_seen_at": None, "last_seen_at": None,
        "article_count": 0, "original_count": 0, "titled_count": 0,
        "first_original_at": None, "last_original_at": None, "older_last_at": None,
        "publishers": [], "recent_times": [], "recent_publishers": [],
        "cov_publishers": [], "cov_times": [], "early_times": [], "early_publishers": [],
        "section_names": [], "section_counts": [],
        "rep_class": None, "rep_authority": None, "rep_article_id": None, "rep_publisher_id": None,
        "rep_title": None, "rep_snippet": None, "rep_image_url": None, "rep_url": None,
        "rep_first_seen_at": None, "rep_is_copy": None, "rep_is_opinion": None, "rep_language": None,
    }


REP_FIELDS = ("article_id", "publisher_id", "title", "snippet", "image_url", "url", "first_seen_at", "is_copy",
              "is_opinion", "language")
"""What a story row keeps of its representative: enough for a pool card and its source."""


def member_votes(member: Mapping[str, Any]) -> tuple[str, ...]:
    """One member's section votes (``transforms.sections.article_section_votes``)."""
    categories = member.get("categories")
    return _votes(member.get("section"), tuple(categories) if categories else None, member.get("section_guess"))


@functools.lru_cache(maxsize=4096)
def _votes(section: str | None, categories: tuple[str, ...] | None, guess: str | None) -> tuple[str, ...]:
    return tuple(article_section_votes([section], [list(categories) if categories else None], [guess])[0])


def _set_min(story: StoryRow, name: str, value: datetime) -> None:
    if story[name] is None or value < story[name]:
        story[name] = value


def _set_max(story: StoryRow, name: str, value: datetime) -> None:
    if story[name] is None or value > story[name]:
        story[name] = value


def _cov_put(story: StoryRow, publisher: str, at: datetime) -> None:
    pubs, times = story["cov_publishers"], story["cov_times"]
    i = bisect.bisect_left(pubs, publisher)
    if i < len(pubs) and pubs[i] == publisher:
        if at > times[i]:
            times[i] = at
    else:
        pubs.insert(i, publisher)
        times.insert(i, at)


def _pair_insert(times: list[datetime], publishers: list[str], at: datetime, publisher: str) -> None:
    """Insert ``(at, publisher)`` into two parallel lists kept sorted by time, then publisher."""
    lo, hi = bisect.bisect_left(times, at), bisect.bisect_right(times, at)
    i = lo + bisect.bisect_right(publishers[lo:hi], publisher) if hi > lo else lo
    times.insert(i, at)
    publishers.insert(i, publisher)


def add_member(story: StoryRow, member: Mapping[str, Any], authority: Mapping[str, float], rules: AggregateRules,
               at: datetime) -> None:
    """Fold one member into its story's row, in place (the monoid of the module doc).

    Args:
        story: The story's row (:func:`empty_story` for a new story).
        member: The member (``MEMBER_FIELDS``); ``copy_of`` set for a copy.
        authority: Publisher authority from the registry (representative choice).
        rules: The windows.
        at: The fold's instant: originals older than ``rules.trim_horizon(at)`` are summed up.
    """
    trim_at, coverage_at, early = rules.horizons(at)
    seen: datetime = member["first_seen_at"]
    publisher = str(member["publisher_id"])
    is_original = member.get("copy_of") is None
    if story["language"] is None:
        story["language"] = member.get("language")
    story["article_count"] += 1
    if story["first_seen_at"] is None or seen < story["first_seen_at"]:
        story["first_seen_at"] = seen
        limit = seen + early
        keep = [i for i, t in enumerate(story["early_times"]) if t <= limit]
        story["early_times"] = [story["early_times"][i] for i in keep]
        story["early_publishers"] = [story["early_publishers"][i] for i in keep]
    _set_max(story, "last_seen_at", seen)
    titled = has_title(member)  # never a date line standing where the headline goes (issue 14)
    if titled:
        story["titled_count"] += 1
    names, counts = story["section_names"], story["section_counts"]
    for v in member_votes(member):
        i = bisect.bisect_left(names, v)
        if i < len(names) and names[i] == v:
            counts[i] += 1
        else:
            names.insert(i, v)
            counts.insert(i, 1)
    _consider_representative(story, member, titled, is_original, authority)
    if not is_original:
        return
    story["original_count"] += 1
    _set_min(story, "first_original_at", seen)
    _set_max(story, "last_original_at", seen)
    i = bisect.bisect_left(story["publishers"], publisher)
    if i == len(story["publishers"]) or story["publishers"][i] != publisher:
        story["publishers"].insert(i, publisher)
    if seen > trim_at:
        _pair_insert(story["recent_times"], story["recent_publishers"], seen, publisher)
    else:
        _set_max(story, "older_last_at", seen)
        if seen > coverage_at:
            _cov_put(story, publisher, seen)
    if seen <= story["first_seen_at"] + early:
        _pair_insert(story["early_times"], story["early_publishers"], seen, publisher)


def _consider_representative(story: StoryRow, member: Mapping[str, Any], titled: bool, is_original: bool,
                             authority: Mapping[str, float]) -> None:
    """``transforms.pages.choose_representative`` as a running best: titled before untitled, then
    originals before copies, then the highest authority, the first seen and the smallest id."""
    rank = 2 * titled + is_original
    weight = float(authority.get(str(member["publisher_id"])) or 0.0)
    key = (-rank, -weight, member["first_seen_at"], str(member["article_id"]))
    if story["rep_class"] is not None:
        best = (-story["rep_class"], -story["rep_authority"], story["rep_first_seen_at"], story["rep_article_id"])
        if key >= best:
            return
    story["rep_class"], story["rep_authority"] = rank, weight
    for name in REP_FIELDS:
        story[f"rep_{name}"] = (not is_original) if name == "is_copy" else member.get(name)


def trim_story(story: StoryRow, rules: AggregateRules, at: datetime) -> None:
    """Sum up the originals that left the recent window as of ``at``, and forget publishers that
    can no longer count for coverage; in place. Scores read the same from a trimmed row and an
    untrimmed one, so rows are trimmed when they are written anyway."""
    horizon, coverage = rules.trim_horizon(at), rules.coverage_horizon(at)
    times, pubs = story["recent_times"], story["recent_publishers"]
    cut = 0
    while cut < len(times) and times[cut] <= horizon:
        _set_max(story, "older_last_at", times[cut])
        if times[cut] > coverage:
            _cov_put(story, pubs[cut], times[cut])
        cut += 1
    if cut:
        story["recent_times"], story["recent_publishers"] = times[cut:], pubs[cut:]
    keep = [i for i, t in enumerate(story["cov_times"]) if t > coverage]
    if len(keep) != len(story["cov_times"]):
        story["cov_publishers"] = [story["cov_publishers"][i] for i in keep]
        story["cov_times"] = [story["cov_times"][i] for i in keep]


def member_order(member: Mapping[str, Any]) -> tuple[datetime, str]:
    """How members are listed: first seen, then id (``story_members.sql``'s order)."""
    return (member["first_seen_at"], str(member["article_id"]))


def story_from_members(story_id: str, language: str | None, members: Iterable[Mapping[str, Any]],
                       authority: Mapping[str, float], rules: AggregateRules, at: datetime) -> StoryRow:
    """A story row from all its members (a move or a new version changed them)."""
    story = empty_story(story_id, language)
    for m in sorted(members, key=member_order):
        add_member(story, m, authority, rules, at)
    trim_story(story, rules, at)
    return story


def is_expired(story: Mapping[str, Any], rules: AggregateRules, at: datetime) -> bool:
    """Whether a story left the active window (its last article older than ``active_hours``); the
    writer drops it at the same age, so no later change names it."""
    last = story["last_seen_at"]
    return last is None or last < at - timedelta(hours=rules.active_hours)
