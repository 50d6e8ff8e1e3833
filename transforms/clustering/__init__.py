"""Online story clustering, one writer per language, and the repair pass over it.

For each article, in arrival order, :class:`LanguageClusterer` decides:

1. **Syndicated copy?** MinHash LSH (``LSH_BANDS`` × ``LSH_ROWS``) over the articles of the
   active window proposes candidates; the best one whose estimated Jaccard is at least
   ``copy_jaccard`` is the original. The copy joins the original's story and ``copy_of``
   names the original (the first article of a chain of copies).
2. **Otherwise, nearest active story.** An inverted index over the terms of the centroids of
   stories active in the window gives the candidates (never a scan of every story). Each is
   scored ``cosine(article, centroid) + entity_bonus × shared-entity share
   − time_penalty_per_hour × hours since the story's last article + w × (cosine of the
   article's sentence embedding with the story's mean one − o)``, ``w`` and ``o`` larger and
   lower for an article known by its headline alone (issue 14); the best candidate at or above
   ``join_threshold`` is joined, else the article starts a story.

Term weights from :mod:`transforms.features` are reweighted by an **online IDF** kept in the
clusterer state: document frequencies of the terms (and entities) of every article seen,
decayed with a half-life of ``idf_half_life_hours`` so the state stays small and follows the
news. Nothing is fitted on evaluation data: the IDF is just what the stream has shown so far.

Everything is deterministic: no randomness, candidates are ranked by (score, story id), and
:meth:`LanguageClusterer.to_state` / :meth:`LanguageClusterer.from_state` round-trip floats
exactly through JSON, so a resumed writer makes the same decisions as an uninterrupted one.

One module per concern; each lower module knows nothing of the ones above it:

======================  ==========================================================================
``params``              :class:`ClusterParams`, the thresholds and weights
``ids``                 story ids (:func:`make_story_id`), the millisecond clock
``story``               the story, member and assignment records; how a centroid follows its members
``idf``                 the online, decayed IDF
``term_index``          the centroids' postings and the candidate search
``copies``              recent signatures in LSH buckets, copy detection
``scoring``             the score of a candidate story
``state``               the checkpoint codec (``to_state``/``from_state``)
``edits``               merges and splits, with every index kept in step
``clusterer``           :class:`LanguageClusterer`: the decision, over the parts above
``linking``             cross-language links between stories
``repair``              the repair pass (splits, adoptions, merges), and the pipeline in one pass
======================  ==========================================================================
"""

from __future__ import annotations

from transforms.clustering.clusterer import LanguageClusterer, cluster_articles
from transforms.clustering.ids import make_story_id
from transforms.clustering.linking import (
    language_neutral_tokens,
    link_languages,
    link_story_profiles,
    neutral_tokens,
)
from transforms.clustering.merges import plan_merges
from transforms.clustering.params import ClusterParams, RepairParams
from transforms.clustering.repair import (
    REPAIR_INTERVAL,
    RepairKind,
    StoryRepair,
    cluster_and_repair,
    repair_due,
    repair_stories,
    story_representative,
)
from transforms.clustering.splits import SplitCut, member_vector, split_members
from transforms.clustering.state import READABLE_STATE_VERSIONS, STATE_VERSION
from transforms.clustering.story import ENTITY_LIMIT, Assignment, Member, Story

__all__ = [
    "ENTITY_LIMIT",
    "READABLE_STATE_VERSIONS",
    "REPAIR_INTERVAL",
    "STATE_VERSION",
    "Assignment",
    "ClusterParams",
    "LanguageClusterer",
    "Member",
    "RepairKind",
    "RepairParams",
    "SplitCut",
    "Story",
    "StoryRepair",
    "cluster_and_repair",
    "cluster_articles",
    "language_neutral_tokens",
    "link_languages",
    "link_story_profiles",
    "make_story_id",
    "member_vector",
    "neutral_tokens",
    "plan_merges",
    "repair_due",
    "repair_stories",
    "split_members",
    "story_representative",
]
