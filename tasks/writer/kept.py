"""Writer states kept in memory between runs of one long-lived process, held by that process's
owner (the long-running writer, a writer session) and handed to each run: no module-level state."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from transforms.clustering import LanguageClusterer
from warehouse.store import ObjectStore


@dataclass(slots=True)
class _KeptState:
    checkpoint_etag: str
    clusterer: LanguageClusterer
    seen: dict[str, str]


class KeptStates:
    """Writer states kept in memory between runs of one long-lived process (see
    :func:`keep_states_in_memory`), each valid only while the checkpoint's ETag is the one its
    own commit got back. Loading a 50,000-story state takes 17–19 s (bench/writer_checkpoint.py);
    a run that finds its state here skips that. A state is taken out before a run changes it and
    put back only after that run's commit, so a failed or fenced run never leaves a state that
    differs from the stored one.
    """

    def __init__(self) -> None:
        self._states: dict[tuple[int, str], _KeptState] = {}
        self.hits = 0

    def take(self, store: ObjectStore, language: str, etag: str | None) -> tuple[LanguageClusterer, dict[str, str]] | None:
        kept = self._states.pop((id(store), language), None)
        if kept is None or etag is None or kept.checkpoint_etag != etag:
            return None
        self.hits += 1
        return kept.clusterer, kept.seen

    def put(self, store: ObjectStore, language: str, etag: str | None, clusterer: LanguageClusterer,
            seen: dict[str, str]) -> None:
        """Keep the state stored under the checkpoint with ``etag`` (nothing when there is no checkpoint)."""
        if etag is not None:
            self._states[(id(store), language)] = _KeptState(etag, clusterer, seen)

    def clear(self) -> None:
        self._states.clear()


@contextmanager
def keep_states_in_memory() -> Iterator[KeptStates]:
    """States kept for the runs within this block, each of which reuses the state its previous
    run committed, instead of loading it again, as long as no other writer has committed since.
    The owner hands them to each run (``kept=``); they are let go when the block ends."""
    kept = KeptStates()
    try:
        yield kept
    finally:
        kept.clear()
