"""The language writer's clusterer: the decision for each article, over the parts that hold the window.

For each article, in arrival order, :meth:`LanguageClusterer.assign` decides:

1. **Syndicated copy?** The copy index (:mod:`transforms.clustering.copies`) proposes the recent
   article it copies; the copy joins the original's story.
2. **Otherwise, nearest active story.** The term index (:mod:`transforms.clustering.term_index`)
   gives the candidate stories, :mod:`transforms.clustering.scoring` scores them (terms, names,
   time, and the sentence embedding, which carries an article known by its headline alone); the
   best at or above ``join_threshold`` is joined, else the article starts a story.

Term weights are reweighted by the online IDF (:mod:`transforms.clustering.idf`). The clusterer
owns the stories (:mod:`transforms.clustering.story`) and keeps the three indexes in step with
them; merges and splits live in :mod:`transforms.clustering.edits`, the checkpoint codec in
:mod:`transforms.clustering.state`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np

from transforms.clustering.copies import CopyIndex
from transforms.clustering.edits import merge_stories, split_story
from transforms.clustering.idf import Idf, OnlineIdf
from transforms.clustering.ids import free_story_id, make_story_id, ms_to_datetime, to_ms
from transforms.clustering.params import ClusterParams
from transforms.clustering.scoring import (
    best_candidate,
    complete_dots,
    entity_weights,
    least_joinable_cosine,
    shortlist,
    story_norms,
    weighted_vector,
)
from transforms.clustering.state import clusterer_from_state, clusterer_to_state
from transforms.clustering.story import (
    EMBEDDING_CODE_SCALE,
    Assignment,
    Journal,
    Member,
    Story,
    add_copy,
    add_original,
    code_vector,
    entity_words,
    has_body,
    make_member,
    replace_version,
    start_story,
    trim_members,
)
from transforms.clustering.term_index import TermIndex
from transforms.embedding import EMBEDDING_MODEL_ID, LEGACY_EMBEDDING_MODEL_ID
from transforms.features import ArticleFeatures
from transforms.signatures import SIGNATURE_VERSION, estimate_jaccard

HOUR_MS = 3_600_000
EXPIRY_EVERY_MS = HOUR_MS
COPY_PROBE_MEMBERS = 32
"""Members of the story an article would join whose signatures are compared with its own when
LSH proposed no original (issue 33)."""
"""Idle stories and old articles are dropped (and the IDF decayed) about once an hour of stream time."""


class LanguageClusterer:
    """Online copy detection and story clustering for the articles of one language.

    Attributes:
        language: The writer's language.
        params: Thresholds and weights.
        stories: Story id → active :class:`~transforms.clustering.story.Story`.
        story_of_member: Article id → the active story holding it as a member (derived; not in
            the checkpoint).
        term_index: The centroids' inverted index (candidate search).
        copies: The recent articles' signatures (copy detection).
        online_idf: The decayed document frequencies.
        clock_ms: The latest first-seen time seen (stream time, ms), or None.
        decayed_ms: Stream time of the last expiry (and IDF decay), or None.
        journal: What the writer's last commit stored of it (see
            :mod:`transforms.clustering.columns`), or None if it was never stored as columns.
        embedding_model: The model of the embeddings it holds and compares
            (:data:`transforms.embedding.EMBEDDING_MODEL_ID`); an article embedded by another is
            placed as one without an embedding (issue 33).
        foreign_embeddings: Articles whose embedding was left out for that since this object was
            built (for the run's summary; not in the checkpoint).
    """

    # Class-level too: a writer pickled by a release before these existed loads with them.
    embedding_model: str = EMBEDDING_MODEL_ID
    foreign_embeddings: int = 0

    def __init__(self, language: str, params: ClusterParams | None = None) -> None:
        self.language = language
        self.params = params or ClusterParams()
        self.stories: dict[str, Story] = {}
        self.story_of_member: dict[str, str] = {}
        self.term_index = TermIndex()
        self.copies = CopyIndex(self.params.lsh_bands, self.params.lsh_rows)
        self.online_idf = OnlineIdf(self.params.idf_prior_docs, self.params.idf_half_life_hours)
        self.clock_ms: int | None = None
        self.decayed_ms: int | None = None
        self.journal: Journal | None = None
        self.embedding_model = EMBEDDING_MODEL_ID
        self.foreign_embeddings = 0

    # ---------------------------------------------------------------- the decision

    def copy_keys(self, batch: Sequence[ArticleFeatures]) -> list[list[int] | None]:
        """The LSH keys of a batch of articles' signatures, computed together, for
        :meth:`assign` (``lsh_keys``): a writer asks for a minute's at once."""
        return self.copies.keys_of_many([features.minhash for features in batch])

    def assign(self, features: ArticleFeatures, lsh_keys: list[int] | None = None) -> Assignment:
        """Place one article: copy of a recent article, member of an active story, or new story.

        An article id this clusterer already holds (a member of an active story) is a new
        version of that article: it stays the same member of its story, with its features
        (centroid share, entities, signature) replaced in place, and is never a copy of
        itself (see :class:`Assignment`). An article whose story has expired is placed as new.

        Args:
            features: The article's features; its language must be this clusterer's.
            lsh_keys: Its signature's LSH keys from :meth:`copy_keys`, if computed ahead.

        Returns:
            The assignment.

        Raises:
            ValueError: If the language or signature version does not match.
        """
        if features.language != self.language:
            raise ValueError(f"article {features.article_id} is {features.language!r}, clusterer is {self.language!r}")
        if features.signature_version != SIGNATURE_VERSION:
            raise ValueError(
                f"article {features.article_id} has signature version {features.signature_version!r}, "
                f"expected {SIGNATURE_VERSION!r}"
            )
        now_ms = to_ms(features.first_seen_at)
        if self.clock_ms is None or now_ms > self.clock_ms:
            self.clock_ms = now_ms
        if self.decayed_ms is None or self.clock_ms - self.decayed_ms >= EXPIRY_EVERY_MS:
            self.expire(datetime.fromtimestamp(self.clock_ms / 1000, tz=UTC))

        if features.embedding is not None and (features.embedding_model or LEGACY_EMBEDDING_MODEL_ID) != self.embedding_model:
            # Another model's vector means nothing next to this one's: scored as without one.
            features = replace(features, embedding=None, embedding_model=None)
            self.foreign_embeddings += 1
        if lsh_keys is not None:
            self.copies.know_keys(features.minhash, lsh_keys)
        if features.article_id in self.story_of_member:
            version = self._update_version(features, now_ms)
            if version is not None:
                return version

        idf = self.online_idf.function()
        vector = weighted_vector(features.terms, features.term_weights, idf)
        entities = entity_weights(entity_words(features.entities), idf)

        copy, best = self._copy_or_best(features, vector, entities, idf, now_ms)
        if copy is not None:
            original_id, story_id, jaccard = copy
            story = self.stories[story_id]
            add_copy(story, self._member(features, now_ms, original_id), now_ms)
            self.story_of_member[features.article_id] = story.story_id
            self._remember(features, story.story_id, original_id, now_ms)
            self._count_document(features)
            return Assignment(features.article_id, story.story_id, original_id, False, jaccard)

        if best is not None and best[1] >= self.params.join_threshold:
            story, score = best
            self._update_story(story, features, now_ms)
            is_new = False
        else:
            story = self._new_story(features, now_ms)
            score = best[1] if best is not None else 0.0
            is_new = True
        self._remember(features, story.story_id, features.article_id, now_ms)
        self._count_document(features)
        return Assignment(features.article_id, story.story_id, None, is_new, score)

    def find_copy(self, features: ArticleFeatures, among: Iterable[str] | None = None
                  ) -> tuple[str, str, float] | None:
        """The original an article would be named a copy of, without assigning it (see
        :meth:`transforms.clustering.copies.CopyIndex.find_copy`): an LSH candidate, or one of
        ``among`` (recent article ids) when given.

        Returns:
            ``(original_id, story_id, jaccard with the match)``, or None if it is no copy.
        """
        return self.copies.find_copy(features.article_id, features.minhash, self.stories,
                                     self.params.copy_jaccard, self.params.copy_chain_jaccard, among)

    def copy_decision(self, features: ArticleFeatures) -> tuple[str, str, float] | None:
        """The original :meth:`assign` would name the article a copy of (both ways of finding it,
        see :meth:`_copy_or_best`), without assigning it.

        Returns:
            ``(original_id, story_id, jaccard with the match)``, or None if it is no copy.
        """
        idf = self.online_idf.function()
        vector = weighted_vector(features.terms, features.term_weights, idf)
        entities = entity_weights(entity_words(features.entities), idf)
        now_ms = to_ms(features.first_seen_at)
        return self._copy_or_best(features, vector, entities, idf, now_ms)[0]

    def _copy_or_best(self, features: ArticleFeatures, vector: Mapping[str, float], entities: Mapping[str, float],
                      idf: Idf, now_ms: int) -> tuple[tuple[str, str, float] | None, tuple[Story, float] | None]:
        """``(the copy decision, the best story)``: an LSH candidate is looked for first; when
        there is none, the story the article would join is searched too (its best story then
        comes along, for the join)."""
        copy = self.find_copy(features)
        if copy is not None:
            return copy, None
        best = self._best_story(features.terms, vector, entities, features.embedding, has_body(features),
                                idf, now_ms)
        if best is not None:
            # LSH misses a copy now and then (a short text under many edits, a Jaccard near 0.65,
            # finds no band in about 1 of 500; issue 33): the story the article would join is
            # searched for it too, its latest members' signatures compared with the article's.
            copy = self.find_copy(features, among=self._probe_members(best[0]))
        return copy, best

    def _probe_members(self, story: Story) -> list[str]:
        """The latest members of a story whose signatures a copy check compares directly."""
        return [m.article_id for m in story.members[-COPY_PROBE_MEMBERS:]]

    def expire(self, now: datetime) -> int:
        """Drop stories idle longer than the active window and articles older than it, and trim
        members older than it from long-running stories
        (:func:`transforms.clustering.story.trim_members`).

        Also decays the online IDF's document frequencies to ``now``.

        Args:
            now: The current stream time (timezone-aware).

        Returns:
            How many stories were dropped.
        """
        now_ms = to_ms(now)
        window_ms = int(self.params.active_window_hours * HOUR_MS)
        cutoff = now_ms - window_ms
        dropped = [s for s in self.stories.values() if s.last_seen_ms < cutoff]
        for story in dropped:
            self.drop_story(story)
        for story in self.stories.values():
            if story.first_seen_ms < cutoff:
                for member in trim_members(story, cutoff):
                    if self.story_of_member.get(member.article_id) == story.story_id:
                        del self.story_of_member[member.article_id]
        self.copies.expire(cutoff)
        if self.decayed_ms is not None and now_ms > self.decayed_ms:
            self.online_idf.decay((now_ms - self.decayed_ms) / HOUR_MS)
        if self.decayed_ms is None or now_ms > self.decayed_ms:
            self.decayed_ms = now_ms
        return len(dropped)

    # ---------------------------------------------------------------- checkpoint

    def to_state(self) -> dict[str, object]:
        """A JSON-serialisable checkpoint; :meth:`from_state` resumes from it exactly
        (see :mod:`transforms.clustering.state`)."""
        return clusterer_to_state(self)

    @classmethod
    def from_state(cls, state: Mapping[str, object]) -> LanguageClusterer:
        """Rebuild a clusterer from :meth:`to_state` output (indexes are rebuilt, not stored).

        Building a large checkpoint makes millions of small long-lived objects: callers that load
        one (the writer task) pause the cyclic garbage collector around this call.

        Raises:
            ValueError: If the state was written by another state or signature version.
        """
        return clusterer_from_state(state, cls)

    # ---------------------------------------------------------------- reading the window

    @property
    def clock(self) -> datetime | None:
        """The latest first-seen time this clusterer has seen (its stream time)."""
        return None if self.clock_ms is None else ms_to_datetime(self.clock_ms)

    def story_size_counts(self) -> dict[int, int]:
        """How many active stories have each number of members (for the run's size distribution)."""
        sizes: dict[int, int] = {}
        for story in self.stories.values():
            sizes[len(story.members)] = sizes.get(len(story.members), 0) + 1
        return dict(sorted(sizes.items()))

    @property
    def active_story_count(self) -> int:
        """Stories currently in memory."""
        return len(self.stories)

    def story_members(self, story_id: str) -> list[Member]:
        """The members of an active story, oldest first (a copy names its original)."""
        return list(self.stories[story_id].members)

    def story_ids(self) -> list[str]:
        """Ids of the active stories, sorted."""
        return sorted(self.stories)

    def story_times(self, story_id: str) -> tuple[int, int, int | None]:
        """``(first_seen_ms, last_seen_ms, repaired_ms)`` of an active story."""
        story = self.stories[story_id]
        return story.first_seen_ms, story.last_seen_ms, story.repaired_ms

    def story_first_article(self, story_id: str) -> str:
        """The article that started a story (its default representative)."""
        return self.stories[story_id].first_article_id

    def idf(self) -> Idf:
        """The current online IDF (``e:<word>`` for entity words)."""
        return self.online_idf.function()

    def centroid_vector(self, story_id: str, idf: Idf | None = None) -> dict[str, float]:
        """A story's centroid weighted by the current IDF (``idf``: the current :meth:`idf`,
        passed in by a caller weighting many centroids), L2-normalised."""
        story = self.stories[story_id]
        idf = self.online_idf.function() if idf is None else idf
        return weighted_vector(tuple(story.centroid), tuple(story.centroid.values()), idf)

    def warm_story_norms(self) -> None:
        """Compute every story's cached norms now, as a writer that has been running leaves them
        (benchmarks start from synthetic checkpoints that hold none)."""
        idf = self.online_idf.function()
        for sid in sorted(self.stories):
            story_norms(self.stories[sid], idf, self.online_idf.n_docs, self.params.norm_tolerance)

    # ---------------------------------------------------------------- merges and splits

    def apply_merge(self, survivor_id: str, merged_id: str, now: datetime) -> list[Member]:
        """Move every member of ``merged_id`` into ``survivor_id`` and drop ``merged_id``
        (see :func:`transforms.clustering.edits.merge_stories`).

        Returns:
            The moved members.
        """
        return merge_stories(self, survivor_id, merged_id, now)

    def apply_split(self, story_id: str, moved_ids: Iterable[str], now: datetime) -> tuple[str, list[Member]]:
        """Move ``moved_ids`` (and copies of them) out of ``story_id`` into a new story
        (see :func:`transforms.clustering.edits.split_story`).

        Returns:
            The new story's id and its members.
        """
        return split_story(self, story_id, moved_ids, now)

    # ---------------------------------------------------------------- keeping the parts in step

    def add_story(self, story: Story) -> None:
        """Hold a new story: its members and its centroid's postings."""
        self.stories[story.story_id] = story
        for member in story.members:
            self.story_of_member[member.article_id] = story.story_id
        self.term_index.add(story.story_id, story.centroid)

    def drop_story(self, story: Story) -> None:
        """Forget a story: its postings, its slot, and its members' entries."""
        self.term_index.release(story.story_id, story.centroid)
        del self.stories[story.story_id]
        for member in story.members:
            if self.story_of_member.get(member.article_id) == story.story_id:
                del self.story_of_member[member.article_id]

    def free_story_id(self, candidate: str) -> str:
        """``candidate``, bumped past the ids of this writer's active stories."""
        return free_story_id(candidate, self.stories)

    # ---------------------------------------------------------------- internals

    def best_story_for_member(self, member: Member, exclude: str, now: datetime,
                              idf: Idf | None = None) -> tuple[str, float] | None:
        """The story other than ``exclude`` that a held member would join now, by the online score
        (its story id and score; None when no story is a candidate). The repair pass asks it of
        the one article of a story: the story it belongs to may have grown, and the IDF settled,
        since it was placed (issue 14). ``idf``: the current :meth:`idf`, passed in by a caller
        asking for many members."""
        idf = self.online_idf.function() if idf is None else idf
        vector = weighted_vector(member.terms, member.weights, idf)
        entities = entity_weights(member.entities, idf)
        embedding = None if member.embedding is None else code_vector(member.embedding) / EMBEDDING_CODE_SCALE
        best = self._best_story(member.terms, vector, entities,
                                None if embedding is None else embedding.tolist(), member.has_body, idf,
                                to_ms(now), exclude=exclude)
        return None if best is None else (best[0].story_id, best[1])

    def _candidate_dots(self, vector: Mapping[str, float], idf: Idf, has_body: bool, has_embedding: bool
                        ) -> tuple[dict[str, float], list[tuple[str, float]]]:
        """Candidate stories and their dots with the article (see
        :meth:`transforms.clustering.term_index.TermIndex.candidate_dots`)."""
        p = self.params
        bar = least_joinable_cosine(p, has_body, has_embedding)
        return self.term_index.candidate_dots(vector, idf, bar, p.max_postings, p.max_candidates)

    def _best_story(
        self,
        terms: Sequence[str],
        vector: Mapping[str, float],
        entity_weights: Mapping[str, float],
        embedding: Sequence[float] | None,
        body: bool,
        idf: Idf,
        now_ms: int,
        exclude: str | None = None,
    ) -> tuple[Story, float] | None:
        dots, rest = self._candidate_dots(vector, idf, body, bool(embedding))
        dots.pop(exclude or "", None)
        if not dots:
            return None
        candidates = shortlist(dots, self.params.max_candidates)
        complete_dots(dots, self.stories, candidates, rest)
        stories = self.stories
        return best_candidate([stories[sid] for sid in candidates], dots, terms, vector, entity_weights,
                              idf, self.online_idf.n_docs, now_ms, self.params, embedding, body)

    def _member(self, features: ArticleFeatures, now_ms: int, copy_of: str | None) -> Member:
        return make_member(features, now_ms, copy_of, self.params.member_terms)

    def _new_story(self, features: ArticleFeatures, now_ms: int) -> Story:
        story_id = self.free_story_id(make_story_id(features.first_seen_at, features.article_id, self.language))
        story = start_story(story_id, features, self._member(features, now_ms, None), now_ms)
        self.add_story(story)
        return story

    def _update_story(self, story: Story, features: ArticleFeatures, now_ms: int) -> None:
        self.term_index.remove(story.story_id, story.centroid)
        add_original(story, features, self._member(features, now_ms, None), now_ms,
                     self.params.centroid_min_weight, self.params.centroid_terms)
        self.story_of_member[features.article_id] = story.story_id
        self.term_index.add(story.story_id, story.centroid)

    def _update_version(self, features: ArticleFeatures, now_ms: int) -> Assignment | None:
        """Replace a held article's features with those of its new version, in place (None,
        and the article is placed as new, if its story no longer lists it).

        The member keeps its place, first-seen time and ``copy_of``, and its share of the centroid
        moves to its new terms (:func:`transforms.clustering.story.replace_version`). Its
        signature replaces the old one in the copy index. The IDF is not counted again: it
        counts articles, not versions.
        """
        story = self.stories.get(self.story_of_member[features.article_id])
        index = None if story is None else next(
            (i for i, m in enumerate(story.members) if m.article_id == features.article_id), None)
        if story is None or index is None:
            del self.story_of_member[features.article_id]
            return None
        old = story.members[index]
        if old.copy_of is None:
            self.term_index.remove(story.story_id, story.centroid)
        replace_version(story, index, self._member(features, old.seen_ms, old.copy_of), features,
                        self.params.centroid_terms)
        if old.copy_of is None:
            self.term_index.add(story.story_id, story.centroid)
        previous = self.copies.recent.get(features.article_id)
        jaccard = 0.0
        if previous is not None:
            jaccard = estimate_jaccard(np.asarray(features.minhash, dtype=np.uint32), previous.minhash)
        root = previous.root_id if previous is not None else (old.copy_of or old.article_id)
        self._remember(features, story.story_id, root, now_ms)
        return Assignment(features.article_id, story.story_id, old.copy_of, False, jaccard, is_new_version=True)

    def _remember(self, features: ArticleFeatures, story_id: str, root_id: str, now_ms: int) -> None:
        self.copies.remember(features.article_id, story_id, root_id, now_ms, features.minhash)

    def _count_document(self, features: ArticleFeatures) -> None:
        self.online_idf.count(features.terms, entity_words(features.entities))


def cluster_articles(articles: Iterable[ArticleFeatures], params: ClusterParams | None = None) -> list[Assignment]:
    """Cluster articles online, one :class:`LanguageClusterer` per language, in the given order.

    Args:
        articles: Features in arrival order.
        params: Clusterer parameters; the tuned defaults if omitted.

    Returns:
        One assignment per article, in input order.
    """
    params = params or ClusterParams()
    clusterers: dict[str, LanguageClusterer] = {}
    out: list[Assignment] = []
    for features in articles:
        clusterer = clusterers.get(features.language)
        if clusterer is None:
            clusterer = clusterers[features.language] = LanguageClusterer(features.language, params)
        out.append(clusterer.assign(features))
    return out
