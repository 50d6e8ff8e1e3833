"""What the checkpoint codec, merges and splits touch of a writer's clusterer, as a protocol.

``state`` and ``edits`` sit below :mod:`transforms.clustering.clusterer` and must not import it
(a lower module knows nothing of the ones above it; the import-linter contract on cycles checks
this, type-checking imports included). They take anything with these parts instead;
:class:`~transforms.clustering.clusterer.LanguageClusterer` is one.
"""

from __future__ import annotations

from typing import Protocol

from transforms.clustering.copies import CopyIndex
from transforms.clustering.idf import OnlineIdf
from transforms.clustering.params import ClusterParams
from transforms.clustering.story import Story
from transforms.clustering.term_index import TermIndex


class ClustererParts(Protocol):
    """A language writer's stories and the indexes kept in step with them."""

    language: str
    params: ClusterParams
    stories: dict[str, Story]
    story_of_member: dict[str, str]
    term_index: TermIndex
    copies: CopyIndex
    online_idf: OnlineIdf
    clock_ms: int | None
    decayed_ms: int | None
    embedding_model: str

    def __init__(self, language: str, params: ClusterParams | None = None) -> None: ...

    def drop_story(self, story: Story) -> None:
        """Forget a story: its postings, its slot, and its members' entries."""

    def free_story_id(self, candidate: str) -> str:
        """``candidate``, bumped past the ids of this writer's active stories."""
