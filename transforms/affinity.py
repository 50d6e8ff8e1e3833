"""Reader affinity: fold clicks into exponentially decayed topic, source and term weights.

Pure: no I/O and no clock; ``now`` arrives as an argument. The profiles flow calls
``fold_weights`` once per reader per cycle. A weight ``w`` recorded at ``as_of`` is worth
``w * 2 ** -((now - as_of) / half_life)`` at ``now``; a click adds 1 to each of its story's
topics, to its publisher, and to each of its headline's terms, decayed from when it happened.
The For-you re-rank (``serving/foryou.py``) only uses weights relative to a reader's strongest,
so the absolute scale never matters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

HALF_LIFE_HOURS = 72.0
MIN_WEIGHT = 0.01
"""Weights decayed below this are dropped, so an old interest leaves the profile entirely."""
MAX_TERMS_PER_READER = 256
WeightKey = tuple[str, str]
"""``(kind, key)`` with kind ``topic``, ``source`` or ``term``."""


def decay_factor(elapsed_seconds: float, half_life_hours: float) -> float:
    """How much of a weight survives ``elapsed_seconds``; never more than 1 (no growth from the future).

    >>> decay_factor(0, 72), decay_factor(72 * 3600, 72), decay_factor(-5, 72)
    (1.0, 0.5, 1.0)
    """
    if half_life_hours <= 0:
        raise ValueError(f"half_life_hours must be positive, got {half_life_hours}")
    return float(2.0 ** (-max(elapsed_seconds, 0.0) / (half_life_hours * 3600.0)))


@dataclass(frozen=True, slots=True)
class ClickSignal:
    """What one click says about a reader's interests."""

    topics: tuple[str, ...]
    publisher_id: str | None
    terms: tuple[str, ...]
    clicked_at: datetime


@dataclass(frozen=True, slots=True)
class StoredWeight:
    weight: float
    as_of: datetime


def fold_weights(
    current: Mapping[WeightKey, StoredWeight],
    clicks: Iterable[ClickSignal],
    now: datetime,
    *,
    half_life_hours: float = HALF_LIFE_HOURS,
    min_weight: float = MIN_WEIGHT,
    max_terms: int = MAX_TERMS_PER_READER,
) -> dict[WeightKey, float]:
    """A reader's weights as of ``now``: the old ones decayed, plus every click, decayed.

    Args:
        current: The stored weights and when each was computed.
        clicks: New clicks of this reader.
        now: The fold time (timezone-aware).
        half_life_hours: Time for a weight to halve.
        min_weight: Weights below it are dropped.
        max_terms: Only the strongest terms are kept.

    Returns:
        ``{(kind, key): weight}`` valid at ``now``.

    Raises:
        ValueError: ``now`` is naive, or a parameter is out of range.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if min_weight < 0 or max_terms < 0:
        raise ValueError("min_weight and max_terms must not be negative")
    out: dict[WeightKey, float] = {}
    for key, stored in current.items():
        out[key] = stored.weight * decay_factor((now - stored.as_of).total_seconds(), half_life_hours)
    for click in clicks:
        worth = decay_factor((now - click.clicked_at).total_seconds(), half_life_hours)
        keys: list[WeightKey] = [("topic", t) for t in click.topics]
        if click.publisher_id:
            keys.append(("source", click.publisher_id))
        keys += [("term", t) for t in click.terms]
        for key in keys:
            out[key] = out.get(key, 0.0) + worth
    kept = {k: w for k, w in out.items() if w >= min_weight}
    terms = sorted((k for k in kept if k[0] == "term"), key=lambda k: (-kept[k], k[1]))
    for k in terms[max_terms:]:
        del kept[k]
    return kept
