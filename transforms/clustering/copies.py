"""Copy detection: the MinHash signatures of the window's recent articles, in LSH buckets.

An article is a syndicated copy when an LSH candidate (``lsh_bands`` × ``lsh_rows``) among the
recent articles of an active story has an estimated Jaccard of at least ``copy_jaccard``; the copy
then names the first article of that candidate's chain of copies, when it clearly copies that one
too (see :meth:`CopyIndex.find_copy`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from transforms.signatures import estimate_jaccard, lsh_bands, lsh_bands_many


@dataclass(slots=True)
class Recent:
    """A recent article's signature: the story it is in, and the first article of its chain of
    copies (``root_id``; itself for an original)."""

    article_id: str
    story_id: str
    root_id: str
    seen_ms: int
    minhash: npt.NDArray[np.uint32]
    bands: list[int] = field(default_factory=list)


class CopyIndex:
    """The recent articles of one writer's window and their LSH buckets.

    Attributes:
        recent: Article id → :class:`Recent`, in the order they were remembered.
        buckets: LSH key → ids of the recent articles that hash there (once per band).
        changed: Recent articles remembered or moved to another story since :meth:`forget_changes`.
        removed: Recent articles forgotten since then (what a writer's delta holds).
    """

    __slots__ = ("bands", "rows", "recent", "buckets", "_bands_memo", "changed", "removed")

    def __init__(self, bands: int, rows: int) -> None:
        self.bands = bands
        self.rows = rows
        self.recent: dict[str, Recent] = {}
        self.buckets: dict[int, list[str]] = defaultdict(list)
        self._bands_memo: tuple[Sequence[int], list[int]] | None = None
        self.changed: set[str] = set()
        self.removed: set[str] = set()

    def forget_changes(self) -> None:
        """Start tracking changes afresh (a writer committed the ones so far)."""
        self.changed = set()
        self.removed = set()

    def bands_of(self, minhash: Sequence[int]) -> list[int]:
        """LSH keys of a signature; the copy check and :meth:`remember` of one article share them."""
        memo = self._bands_memo
        if memo is not None and memo[0] is minhash:
            return memo[1]
        keys = lsh_bands(minhash, self.bands, self.rows)
        self._bands_memo = (minhash, keys)
        return keys

    def remember(self, article_id: str, story_id: str, root_id: str, seen_ms: int, minhash: Sequence[int]) -> None:
        """Keep an article's signature as a copy candidate (replacing an earlier version of it)."""
        recent = Recent(article_id, story_id, root_id, seen_ms, np.asarray(minhash, dtype=np.uint32))
        self.add(recent, self.bands_of(minhash))

    def add(self, recent: Recent, bands: list[int]) -> None:
        """Index ``recent`` under its LSH keys ``bands``."""
        # A new version of an article replaces the old one everywhere, as a reloaded state has it:
        # left in the old version's buckets, its id would outlive its entry when it expires.
        previous = self.recent.pop(recent.article_id, None)
        if previous is not None:
            self.discard(previous)
        recent.bands = bands
        self.recent[recent.article_id] = recent
        for key in recent.bands:
            self.buckets[key].append(recent.article_id)
        self.changed.add(recent.article_id)
        self.removed.discard(recent.article_id)

    def add_all(self, rows: Sequence[tuple[str, str, str, int]], signatures: npt.NDArray[np.uint32]) -> None:
        """Index ``(article id, story id, root id, seen ms)`` rows with their signatures (one per
        row) into an empty index at once, with the LSH keys computed in one vectorised pass."""
        if not rows:
            return
        keys = lsh_bands_many(signatures, self.bands, self.rows)
        recent, buckets = self.recent, self.buckets
        for (aid, sid, root, seen), signature, bands in zip(rows, signatures, keys, strict=True):
            # add(), inlined: this loop runs for every recent article of a checkpoint.
            item = Recent(aid, sid, root, seen, signature, bands)
            recent[item.article_id] = item
            for key in bands:
                buckets[key].append(item.article_id)

    def discard(self, recent: Recent) -> None:
        """Take an article's id out of its LSH buckets (each holds it once per band that hashed there)."""
        for key in recent.bands:
            bucket = self.buckets.get(key)
            if bucket is not None:
                bucket.remove(recent.article_id)
                if not bucket:
                    del self.buckets[key]

    def expire(self, cutoff_ms: int) -> None:
        """Forget the articles seen before ``cutoff_ms``."""
        old = [r for r in self.recent.values() if r.seen_ms < cutoff_ms]
        for recent in old:
            self.discard(recent)
            del self.recent[recent.article_id]
            self.changed.discard(recent.article_id)
            self.removed.add(recent.article_id)

    def restory(self, article_ids: Iterable[str], story_id: str) -> None:
        """Point the recent articles among ``article_ids`` at ``story_id`` (a merge or split moved them)."""
        for article_id in article_ids:
            recent = self.recent.get(article_id)
            if recent is not None:
                recent.story_id = story_id
                self.changed.add(article_id)

    def best_match(self, article_id: str, minhash: Sequence[int], live_stories: Container[str],
                   threshold: float) -> tuple[Recent, float] | None:
        """The LSH candidate with the highest estimated Jaccard at or above ``threshold`` (ties by
        article id), among recent articles of ``live_stories`` other than ``article_id`` itself."""
        keys = self.bands_of(minhash)
        seen: dict[str, None] = {}
        for key in keys:
            for aid in self.buckets.get(key, ()):
                seen[aid] = None
        best: tuple[Recent, float] | None = None
        if not seen:
            return None
        mine = np.asarray(minhash, dtype=np.uint32)
        for aid in seen:
            recent = self.recent[aid]
            if aid == article_id or recent.story_id not in live_stories:
                continue  # an earlier version of the article itself is no original of it
            jaccard = estimate_jaccard(mine, recent.minhash)
            if jaccard < threshold:
                continue
            if best is None or (jaccard, best[0].article_id) > (best[1], aid):
                best = (recent, jaccard)
        return best

    def find_copy(self, article_id: str, minhash: Sequence[int], live_stories: Container[str],
                  copy_jaccard: float, chain_jaccard: float) -> tuple[str, str, float] | None:
        """The original an article would be named a copy of, without remembering it.

        The best LSH candidate at or above ``copy_jaccard`` is the match. The copy names the
        first article of the match's chain of copies when it is clearly a copy of that article
        too (estimated Jaccard at least ``chain_jaccard``), else the match itself. A chain
        can hold a weak link: two reports of one event whose estimated Jaccard crossed
        ``copy_jaccard`` by the estimator's noise (128 permutations: a standard error of 0.044
        at 0.5). A verbatim reprint of the second shares that noise with the first, so only a
        margin above the bar keeps it from being named a copy of an article it barely resembles.

        Returns:
            ``(original_id, story_id, jaccard with the match)``, or None if it is no copy.
        """
        match = self.best_match(article_id, minhash, live_stories, copy_jaccard)
        if match is None:
            return None
        recent, jaccard = match
        original_id = recent.article_id
        root = self.recent.get(recent.root_id)
        if root is not None and root is not recent:
            mine = np.asarray(minhash, dtype=np.uint32)
            if estimate_jaccard(mine, root.minhash) >= chain_jaccard:
                original_id = root.article_id
        elif root is None:  # the first article left the window: it cannot be checked, keep the chain
            original_id = recent.root_id
        return original_id, recent.story_id, jaccard
