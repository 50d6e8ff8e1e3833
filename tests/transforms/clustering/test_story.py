"""A story's members and running sums (transforms/clustering/story.py): the members' embedding
codes, the story's exact sum of them and its cached direction (issue 14)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import numpy as np
import pytest
from embedded_articles import MIXING, T0, bodied, direction, near
from repair_corpus import bern, mannheim

from transforms.clustering import LanguageClusterer
from transforms.clustering.story import count_embeddings, embedding_code, embedding_direction, trim_members


@pytest.mark.parametrize("raw", [[0.0] * 512, [], None], ids=["zero", "empty", "none"])
def test_no_embedding_has_no_codes_but_a_zero_one_does(raw: list[float] | None) -> None:
    assert (embedding_code(raw) is None) is (not raw)


def test_a_storys_embedding_sum_is_its_members_codes_through_joins_versions_merges_and_splits() -> None:
    m_dir, b_dir = direction(5), direction(6)
    clusterer = LanguageClusterer("en", MIXING)
    for i in range(6):
        clusterer.assign(bodied(f"m{i}", mannheim(i), 2 * i, near(m_dir, 100 + i)))
        clusterer.assign(bodied(f"b{i}", bern(i), 2 * i + 1, near(b_dir, 200 + i)))
    # a new version of a member swaps its codes
    clusterer.assign(dataclasses.replace(bodied("m1", mannheim(1) + " Updated.", 13, near(b_dir, 300))))
    (story_id,) = clusterer.story_ids()
    other = clusterer.assign(bodied("x", bern(2), 20, near(b_dir, 301)))

    def check() -> None:
        for sid in clusterer.story_ids():
            story = clusterer.stories[sid]
            running = (None if story.embedding_sum is None else story.embedding_sum.copy(), story.embedded)
            count_embeddings(story)
            assert running[1] == story.embedded
            assert np.array_equal(running[0], story.embedding_sum)

    check()
    clusterer.apply_split(story_id, [f"b{i}" for i in range(6)], T0 + timedelta(minutes=30))
    check()
    if other.story_id != story_id:
        clusterer.apply_merge(story_id, other.story_id, T0 + timedelta(minutes=31))
    check()


def test_a_storys_embedding_direction_is_never_stale() -> None:
    """The cached unit vector of a story's embedding sum is dropped when a member joins, and a
    story whose members have no embedding has none."""
    clusterer = LanguageClusterer("en", MIXING)
    first = clusterer.assign(bodied("m0", mannheim(0), 0, near(direction(30), 31)))
    story = clusterer.stories[first.story_id]
    before = embedding_direction(story)
    assert before is not None and story.embedding_direction is before  # cached
    assert embedding_direction(story) is before
    clusterer.assign(bodied("m1", mannheim(1), 1, near(direction(32), 33)))
    assert clusterer.stories[first.story_id] is story and story.embedded == 2
    after = embedding_direction(story)
    assert after is not None and after is not before
    expected = story.embedding_sum / np.linalg.norm(story.embedding_sum)
    assert np.allclose(after, expected) and not np.allclose(after, before)
    bare = LanguageClusterer("en")
    plain = bare.stories[bare.assign(bodied("b0", bern(0), 2)).story_id]
    assert plain.embedding_sum is None and embedding_direction(plain) is None


def test_trimming_members_takes_their_codes_out_of_the_sum_as_a_reload_would() -> None:
    # Issue 15 trims a long-lived story's oldest members; the sum must follow, or a writer that
    # keeps running and one that reloads its state (which recounts from the members) disagree.
    m_dir = direction(7)
    clusterer = LanguageClusterer("en", MIXING)
    for i in range(6):
        clusterer.assign(bodied(f"m{i}", mannheim(i), 2 * i, near(m_dir, 400 + i)))
    (story,) = clusterer.stories.values()
    assert story.embedded == 6
    dropped = trim_members(story, cutoff_ms=story.members[4].seen_ms, kept_originals=2)
    assert len(dropped) == 4 and story.trimmed == 4 and story.size == 6
    live_sum, live_count = story.embedding_sum.copy(), story.embedded  # type: ignore[union-attr]
    count_embeddings(story)
    assert live_count == story.embedded == 2
    assert np.array_equal(live_sum, story.embedding_sum)  # type: ignore[arg-type]
