"""The inverted index over the terms of the active stories' centroids, and the candidate search.

Each story holds a small integer *slot*, so the candidate dots of an article are summed with
numpy over the postings of its terms (never a scan of every story). A posting is live while its
stamp is the current stamp of its slot: re-indexing a story gives it a new stamp, so its old
postings go stale without being searched for, and are dropped once they outnumber the live ones.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from operator import itemgetter

import numpy as np
import numpy.typing as npt

_SLOT_CHUNK = 1024


class Postings:
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
        """Live ``(slots, weights)``, compacting the arrays once stale postings are a fifth of them."""
        if self.stale_share_reached():
            self.compact(slot_stamp)
        slots = np.frombuffer(self.slots, dtype=np.int64)
        weights = np.frombuffer(self.weights, dtype=np.float64)
        if slots.size == self.live:
            return slots, weights
        mask = np.frombuffer(self.stamps, dtype=np.int64) == slot_stamp[slots]
        return slots[mask], weights[mask]

    def stale_share_reached(self) -> bool:
        """Whether stale postings are a fifth of the arrays (a quarter of the live ones): worth
        copying the arrays without them."""
        return 4 * (len(self.slots) - self.live) >= self.live

    def compact(self, slot_stamp: npt.NDArray[np.int64]) -> None:
        """Drop the stale postings."""
        slots = np.frombuffer(self.slots, dtype=np.int64)
        stamps = np.frombuffer(self.stamps, dtype=np.int64)
        mask = stamps == slot_stamp[slots]
        weights = np.frombuffer(self.weights, dtype=np.float64)[mask]
        slots, stamps = slots[mask], stamps[mask]
        self.slots = array("q", slots.tobytes())
        self.weights = array("d", weights.tobytes())
        self.stamps = array("q", stamps.tobytes())


def sum_by_slot(slots: npt.NDArray[np.int64], values: npt.NDArray[np.float64], scratch: npt.NDArray[np.int32]
                ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The distinct ``slots`` (in the order of their last posting) and the sum of the ``values``
    of each, added in input order (as a loop over the terms would add them, so the sums are
    exactly those of such a loop).

    ``scratch`` is any int32 array longer than the largest slot; what it holds is overwritten.
    Each posting writes its position at its slot, so reading the slots back gives every posting
    the last position of its slot: the postings that read their own position are the distinct
    slots. No sort: a stable argsort of a few thousand postings cost twice as much CPU time
    (``np.unique`` nearly six times; issue 15).

    >>> u, s = sum_by_slot(np.array([3, 1, 3]), np.array([0.5, 1.0, 0.25]), np.empty(4, np.int32))
    >>> u.tolist(), s.tolist()
    ([1, 3], [1.0, 0.75])
    """
    if not slots.size:
        return slots, np.zeros(0)
    positions = np.arange(slots.size, dtype=np.int32)
    scratch[slots] = positions
    last = scratch[slots]
    distinct = last == positions
    number = np.cumsum(distinct) - 1
    return slots[distinct], np.bincount(number[last], weights=values, minlength=int(number[-1]) + 1)


def best_and_tied(values: npt.NDArray[np.float64], keep: int) -> npt.NDArray[np.intp]:
    """Positions (ascending) of the ``keep`` largest ``values`` and of every value tied with
    the last of them.

    The ``keep``-th largest of the first 256 values is a floor for the ``keep``-th largest of
    all, so the cut is searched for among the values at or above it only: a few dozen of the
    ~3,000 sums of a candidate search, instead of a partition of all (a third of the CPU time).

    >>> best_and_tied(np.array([0.1, 0.5, 0.3, 0.5, 0.2]), 2).tolist()
    [1, 3]
    >>> best_and_tied(np.array([0.1, 0.5, 0.3, 0.4, 0.2]), 2).tolist()
    [1, 3]
    """
    if values.size <= keep:
        return np.arange(values.size)
    head = values[:256]
    if head.size > keep:
        floor = np.partition(head, head.size - keep)[head.size - keep]
        above = np.flatnonzero(values >= floor)
        kept = values[above]
        cut = np.partition(kept, kept.size - keep)[kept.size - keep]
        return above[kept >= cut]
    cut = np.partition(values, values.size - keep)[values.size - keep]
    return np.flatnonzero(values >= cut)


def heaviest_first(vector: Mapping[str, float]) -> list[tuple[str, float]]:
    """``vector``'s items, heaviest (by absolute weight) first, ties by term.

    >>> heaviest_first({"b": 0.5, "c": -0.8, "a": 0.5})
    [('c', -0.8), ('a', 0.5), ('b', 0.5)]
    """
    ranked = sorted(vector.items(), key=itemgetter(0))
    # By term, then stably (which ``reverse`` keeps) by weight: two sorts at C speed, without a
    # Python key per term, when no weight is negative (an article's never is).
    ranked.sort(key=itemgetter(1) if min(vector.values(), default=0.0) >= 0 else _absolute_weight, reverse=True)
    return ranked


def _absolute_weight(item: tuple[str, float]) -> float:
    return abs(item[1])



@dataclass(slots=True)
class _PostingsRead:
    """The postings one article's search read (joined as raw bytes and masked once: a numpy call per
    term, not five, issue 15), and the terms it left unread with their IDF-weighted article weights."""

    slot_parts: list[array[int]] = field(default_factory=list)
    weight_parts: list[array[float]] = field(default_factory=list)
    stamp_parts: list[array[int]] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    scales: list[float] = field(default_factory=list)
    rest: list[tuple[str, float]] = field(default_factory=list)
    stale: bool = False
    """Whether a term's arrays hold stale postings (compacted once a fifth of them are stale)."""

class TermIndex:
    """Term → postings of (story slot, the term's weight in the story's centroid).

    The index does not keep what each story holds: :meth:`remove` takes the centroid the story
    was indexed with (the caller removes a story before changing its centroid, and adds it back
    after).

    Attributes:
        postings: Term → its :class:`Postings`.
        slot_of: Story id → slot.
        story_of_slot: Slot → story id (``""`` for a free slot).
        free_slots: Free slots, a min-heap (the smallest is reused first).
        slot_stamp: Slot → the stamp of its live postings (-1: not indexed).
        next_stamp: The last stamp handed out.
        scratch: Working space of the candidate search (:func:`sum_by_slot`), an int32 per
            slot (half the cache an int64 takes); not part of the index (a pickle leaves it out).
    """

    __slots__ = ("postings", "slot_of", "story_of_slot", "free_slots", "slot_stamp", "next_stamp", "scratch")

    def __init__(self) -> None:
        self.postings: dict[str, Postings] = {}
        self.slot_of: dict[str, int] = {}
        self.story_of_slot: list[str] = []
        self.free_slots: list[int] = []
        self.slot_stamp = np.full(_SLOT_CHUNK, -1, dtype=np.int64)
        self.next_stamp = 0
        self.scratch = np.empty(0, dtype=np.int32)

    def __getstate__(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__slots__ if name != "scratch"}

    def __setstate__(self, state: dict[str, object] | tuple[None, dict[str, object]]) -> None:
        # An index pickled before it had a scratch array holds its slots as ``(None, slots)``.
        for name, value in (state[1] if isinstance(state, tuple) else state).items():
            setattr(self, name, value)
        self.scratch = np.empty(0, dtype=np.int32)

    def add(self, story_id: str, centroid: Mapping[str, float]) -> None:
        """Index a story's centroid (taking a slot if it has none), replacing what it had."""
        slot = self.slot_of.get(story_id)
        if slot is not None and self.slot_stamp[slot] >= 0:
            self.remove(story_id, centroid)
        if slot is None:
            slot = heapq.heappop(self.free_slots) if self.free_slots else len(self.story_of_slot)
            if slot == len(self.story_of_slot):
                self.story_of_slot.append(story_id)
                if slot >= self.slot_stamp.size:
                    self.slot_stamp = np.concatenate([self.slot_stamp, np.full(max(_SLOT_CHUNK, slot), -1, np.int64)])
            else:
                self.story_of_slot[slot] = story_id
            self.slot_of[story_id] = slot
        self.next_stamp += 1
        stamp = self.next_stamp
        self.slot_stamp[slot] = stamp
        index, slot_stamp = self.postings, self.slot_stamp
        for term, weight in centroid.items():
            postings = index.get(term)
            if postings is None:
                postings = index[term] = Postings()
            # Append one posting (the only place postings are added; inlined, as this loop runs for
            # every term of every updated story), compacting once stale ones outnumber live ones.
            postings.slots.append(slot)
            postings.weights.append(weight)
            postings.stamps.append(stamp)
            postings.live += 1
            if len(postings.slots) > 2 * postings.live + 16:
                postings.compact(slot_stamp)

    def remove(self, story_id: str, centroid: Mapping[str, float]) -> None:
        """Make a story's postings stale (it keeps its slot); ``centroid`` is the one it was indexed with."""
        slot = self.slot_of.get(story_id)
        if slot is None or self.slot_stamp[slot] < 0:
            return
        self.slot_stamp[slot] = -1  # every posting of the story is stale from now on
        for term in centroid:
            postings = self.postings.get(term)
            if postings is not None:
                postings.live -= 1
                if postings.live <= 0:
                    del self.postings[term]

    def release(self, story_id: str, centroid: Mapping[str, float]) -> None:
        """Remove a story and free its slot."""
        self.remove(story_id, centroid)
        slot = self.slot_of.pop(story_id)
        self.story_of_slot[slot] = ""
        heapq.heappush(self.free_slots, slot)

    def add_all(self, stories: Sequence[tuple[str, Mapping[str, float]]]) -> None:
        """Index ``(story id, centroid)`` pairs into an empty index at once: the same slots, stamps
        and postings (in the same order) as calling :meth:`add` on each in turn, built with numpy
        instead of one array append per centroid term (a 50,000-story checkpoint loads seconds
        faster; bench/writer_checkpoint.py)."""
        if self.story_of_slot:
            raise RuntimeError("bulk indexing needs an index with no story indexed yet")
        n = len(stories)
        if n == 0:
            return
        self.story_of_slot = [sid for sid, _ in stories]
        self.slot_of = {sid: slot for slot, sid in enumerate(self.story_of_slot)}
        size = self.slot_stamp.size
        while size <= n - 1:
            size += max(_SLOT_CHUNK, size)
        self.slot_stamp = np.full(size, -1, np.int64)
        self.slot_stamp[:n] = np.arange(1, n + 1, dtype=np.int64)
        self.next_stamp = n
        term_ids: dict[str, int] = {}
        flat_ids: list[int] = []
        flat_weights: list[float] = []
        counts = np.empty(n, dtype=np.int64)
        for slot, (_, centroid) in enumerate(stories):
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
            postings = self.postings[term] = Postings()
            postings.slots.frombytes(slots[start:end].tobytes())
            postings.weights.frombytes(weights[start:end].tobytes())
            postings.stamps.frombytes(stamps[start:end].tobytes())
            postings.live = end - start
            start = end

    def candidate_dots(
        self, vector: Mapping[str, float], idf: Callable[[str], float], bar: float, budget: int, keep: int
    ) -> tuple[dict[str, float], list[tuple[str, float]]]:
        """Candidate stories and their IDF-weighted dots with the article, from the postings.

        Postings are read heaviest article term first, and reading stops once the terms left
        could not lift an unseen story to a joinable score: by Cauchy-Schwarz, a story sharing
        only those terms has a cosine of at most their norm (``bar``: the least centroid cosine
        with which a story could still be joined). The common, low-IDF terms, whose postings
        hold most of the active stories, are the ones this skips.

        At most ``budget`` postings are read per article: a term whose postings would overrun
        what is left is not read (it still counts in the dots of the shortlisted stories). On a
        busy stream those are the common words; a story is found through the names and rarer
        words it shares.

        Args:
            vector: The article's unit-length term vector; the centroid side is weighted by ``idf``.
            idf: Term weights.
            bar: Least joinable centroid cosine (0 or less: read every term).
            budget: Most postings read.
            keep: Stories kept: the best ``keep`` and every story tied with the last of them.

        Returns:
            ``(dots, rest)``: unnormalised dots over the terms read, and the unread terms
            with their IDF-weighted article weights, for the caller to complete the dots of
            the stories it keeps.
        """
        read = self._read_postings(vector, idf, bar, budget)
        if not read.slot_parts:
            return {}, read.rest
        return self._sum_postings(read, keep), read.rest

    def _read_postings(self, vector: Mapping[str, float], idf: Callable[[str], float], bar: float,
                       budget: int) -> _PostingsRead:
        """The postings :meth:`candidate_dots` reads, heaviest article term first, and the terms it
        leaves unread (past the bar, or over the budget)."""
        ranked = heaviest_first(vector)
        # tail[i]: the squared norm of the terms from i on (summed from the lightest, as before).
        tail = list(accumulate(reversed([w ** 2 for _, w in ranked]), initial=0.0))
        tail.reverse()
        bar_sq = bar * bar if bar > 0 else -1.0
        read = _PostingsRead()
        index, slot_stamp = self.postings, self.slot_stamp
        for i, (term, weight) in enumerate(ranked):
            scaled = weight * idf(term)
            if tail[i] < bar_sq:
                read.rest.extend((t, w * idf(t)) for t, w in ranked[i:])
                break
            postings = index.get(term)
            if postings is None:
                continue
            live = postings.live
            if live > budget:
                read.rest.append((term, scaled))  # a common term: counted for the shortlist only
                continue
            budget -= live
            if len(postings.slots) != live:
                if postings.stale_share_reached():
                    postings.compact(slot_stamp)
                else:
                    read.stale = True
            read.slot_parts.append(postings.slots)
            read.weight_parts.append(postings.weights)
            read.stamp_parts.append(postings.stamps)
            read.counts.append(len(postings.slots))
            read.scales.append(scaled)
        return read

    def _sum_postings(self, read: _PostingsRead, keep: int) -> dict[str, float]:
        """Each story's dot over the postings read: the best ``keep`` and those tied with the last."""
        slot_stamp = self.slot_stamp
        slots = np.frombuffer(b"".join(read.slot_parts), dtype=np.int64)
        # Each posting's weight times its term's article weight, in one product.
        values = np.frombuffer(b"".join(read.weight_parts), dtype=np.float64) * np.repeat(
            np.asarray(read.scales, dtype=np.float64), read.counts)
        if read.stale:
            live_postings = np.frombuffer(b"".join(read.stamp_parts), dtype=np.int64) == slot_stamp[slots]
            slots, values = slots[live_postings], values[live_postings]
        if self.scratch.size < slot_stamp.size:
            self.scratch = np.empty(slot_stamp.size, dtype=np.int32)
        unique, sums = sum_by_slot(slots, values, self.scratch)
        chosen = best_and_tied(sums, keep)
        story_of_slot = self.story_of_slot
        return dict(zip([story_of_slot[slot] for slot in unique[chosen].tolist()], sums[chosen].tolist(),
                        strict=True))
