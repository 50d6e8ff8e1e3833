"""Merges and splits of a writer's stories (what the repair pass applies), keeping every index in step.

A merge moves every member of one story into another and drops it (the merged id becomes an
alias); a split moves some members into a new story. Both recompute the stories touched from
their member rows (:func:`transforms.clustering.story.rebuild_story`), re-index their centroids
and point the moved articles' copy signatures at their new story.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from transforms.clustering.ids import make_story_id, to_ms
from transforms.clustering.parts import ClustererParts
from transforms.clustering.story import Member, Story, rebuild_story


def _rebuild(clusterer: ClustererParts, story: Story, members: Sequence[Member], now_ms: int) -> None:
    clusterer.term_index.remove(story.story_id, story.centroid)
    rebuild_story(story, members, now_ms, clusterer.params.centroid_terms)
    for member in story.members:
        clusterer.story_of_member[member.article_id] = story.story_id
    clusterer.term_index.add(story.story_id, story.centroid)


def merge_stories(clusterer: ClustererParts, survivor_id: str, merged_id: str, now: datetime) -> list[Member]:
    """Move every member of ``merged_id`` into ``survivor_id`` and drop ``merged_id``.

    Returns:
        The moved members.

    Raises:
        ValueError: If the two ids are the same.
    """
    if survivor_id == merged_id:
        raise ValueError("a story cannot be merged into itself")
    survivor = clusterer.stories[survivor_id]
    merged = clusterer.stories[merged_id]
    clusterer.drop_story(merged)
    moved = list(merged.members)
    _rebuild(clusterer, survivor, survivor.members + moved, to_ms(now))
    clusterer.copies.restory((m.article_id for m in moved), survivor_id)
    return moved


def split_story(clusterer: ClustererParts, story_id: str, moved_ids: Iterable[str],
                now: datetime) -> tuple[str, list[Member]]:
    """Move ``moved_ids`` (and copies of them) out of ``story_id`` into a new story.

    The new story's id is made from its first article's first-seen second and a hash salted
    with the split (``story_id`` and ``now``), bumped past the active ids.

    Returns:
        The new story's id and its members.

    Raises:
        ValueError: If the split would leave either side empty.
    """
    story = clusterer.stories[story_id]
    moving = set(moved_ids)
    moved = [m for m in story.members if m.article_id in moving or (m.copy_of in moving)]
    kept = [m for m in story.members if m not in moved]
    if not moved or not kept:
        raise ValueError(f"a split of {story_id} must leave members on both sides")
    first = min(moved, key=lambda m: (m.seen_ms, m.article_id))
    first_at = datetime.fromtimestamp(first.seen_ms / 1000, tz=UTC)
    now_ms = to_ms(now)
    # Salted with the split: derived from the first article alone, the id could be the one
    # that article's story had before it was merged away, an alias that must never live again.
    new_id = clusterer.free_story_id(make_story_id(first_at, first.article_id, clusterer.language,
                                                   salt=f"split:{story_id}:{now_ms}"))
    _rebuild(clusterer, story, kept, now_ms)
    new = Story(new_id, first.article_id, first.seen_ms, first.seen_ms, 0, {}, {}, [])
    clusterer.stories[new_id] = new
    _rebuild(clusterer, new, moved, now_ms)
    clusterer.copies.restory((m.article_id for m in moved), new_id)
    return new_id, moved
