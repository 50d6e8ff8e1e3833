"""The merge probe of ``bench/cluster_ceiling.py``: which story pairs it compares, and how it ranks them."""

from __future__ import annotations

import numpy as np
import pytest

from bench.cluster_ceiling import story_pair_separation

# Two topics. Topic t1 has two events, the first split over stories s1 and s2; topic t2 has one
# story, which must never be paired with t1's stories.
ROWS = [
    {"id": "a", "event": "e1", "topic": "t1"},
    {"id": "b", "event": "e1", "topic": "t1"},
    {"id": "c", "event": "e1", "topic": "t1"},
    {"id": "d", "event": "e2", "topic": "t1"},
    {"id": "e", "event": "e3", "topic": "t2"},
]
STORIES = {"a": "s1", "b": "s1", "c": "s2", "d": "s3", "e": "s4"}


def _similarity(one_event: float, two_events: float) -> np.ndarray:
    similarity = np.full((5, 5), 0.9)  # across topics: high, and ignored
    similarity[:4, :4] = two_events
    similarity[np.ix_([0, 1, 2], [0, 1, 2])] = one_event
    return similarity


@pytest.mark.parametrize(("one_event", "two_events", "auc"), [(0.6, 0.2, 1.0), (0.2, 0.6, 0.0), (0.4, 0.4, 0.5)])
def test_ranks_one_event_pairs_against_two_event_pairs_of_a_topic(one_event: float, two_events: float,
                                                                  auc: float) -> None:
    assert story_pair_separation(_similarity(one_event, two_events), ROWS, STORIES) == (auc, 1, 2)

