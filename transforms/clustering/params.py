"""The online clusterer's thresholds and weights (:class:`ClusterParams`), checked up front."""

from __future__ import annotations

from dataclasses import dataclass

from transforms.signatures import LSH_BANDS, LSH_ROWS, NUM_PERM


@dataclass(frozen=True, slots=True)
class ClusterParams:
    """Thresholds and weights of the online clusterer; the defaults are the tuned values.

    Attributes:
        join_threshold: Least score for an article to join an existing story.
        copy_jaccard: Least estimated MinHash Jaccard for an article to be a copy.
        copy_chain_jaccard: Least estimated Jaccard with the first article of a chain of copies
            for a new copy to name that article rather than the one it matched (see
            :meth:`LanguageClusterer.find_copy`).
        entity_bonus: Weight of the IDF-weighted share of the article's entities that the
            story has already seen.
        year_conflict_penalty: Subtracted when the article names years and none of them is a
            year the story names (and the story names some): same kind of event, other year.
        date_conflict_penalty: Subtracted when the article's dateline year (the pseudo-term
            ``date:<year>``) is not among the dateline years of the story's articles.
        time_penalty_per_hour: Subtracted per hour since the story's last article.
        active_window_hours: Stories idle longer than this are dropped; articles older than
            this are no longer copy candidates.
        centroid_min_weight: The newest article's weight in the centroid is
            ``max(1 / originals, centroid_min_weight)``, ``originals`` counting the story's
            members that are no copies (a copy leaves the centroid as it is): a plain mean for
            small stories, an exponential moving average for large ones, so a story follows its
            latest news.
        centroid_terms: Most terms kept in a centroid.
        max_candidates: Most stories scored in full per article.
        idf_half_life_hours: Half-life of the document frequencies of the online IDF.
        idf_prior_docs: Pseudo-documents of the IDF, so that early on every term weighs alike.
        lsh_bands: MinHash LSH bands.
        lsh_rows: MinHash LSH rows per band.
        link_threshold: Least IDF-weighted cosine of the language-neutral profiles (names,
            acronyms, numbers) of two stories of different languages for them to be linked.
        link_embedding_threshold: Least cosine of the mean sentence embeddings of two stories of
            different languages, each the other's best match, for them to be linked.
        link_token_weight: Weight of the IDF-weighted cosine of two stories' language-neutral
            tokens (names, acronyms, numbers) added to their embeddings' cosine, the score a
            cross-language link is chosen and decided on (issue 33).
        link_score_threshold: Least such score for a link: a pair whose cosine alone is below it
            needs shared names or numbers to make it up.
        link_min_shared: Least number of shared language-neutral tokens for a link.
        link_same_language_threshold: If set, stories of one language are also linked at this
            cosine (a merge the online pass missed); off by default, it did not help on dev.
        member_weight: Share of the score that comes from the article's mean cosine to the
            story's latest members (the rest from the centroid cosine). A second-order check:
            a centroid mixed by one stray article still looks close to both events, the
            members of the right event do not (issue 4).
        member_sample: Most recent original members compared in full per candidate story.
        young_story_size: Stories with at most this many members are "young".
        young_story_margin: Added to ``join_threshold`` for young stories: the 2nd and 3rd
            article decide what a story is about, so they must clear a stricter bar.
        member_terms: Terms kept per member (for the member check and the repair pass).
        max_postings: Most term-index postings read per article to find candidate stories.
        embedding_weight: Weight of the sentence embedding in the score of an article with a
            body: ``embedding_weight × (cosine(article, story's mean embedding) −
            embedding_offset)`` is added, evidence for the story above the offset and against it
            below (issue 14).
        embedding_offset: The embedding cosine at which an article with a body is neutral.
        headline_embedding_weight: The same weight for an article known by its headline alone
            (no body of its own): its few words say less than its embedding, which ranks
            same-story headline pairs far better (ROC AUC 0.956 against 0.898 on Google News
            dev; python -m bench.story_signals --pairs). 1.75 since issue 33
            (1.5 before): more recall with Google News dev precision kept, within 0.005 on
            both halves of a split by story and the same on the whole file (docs/measurements.md).
        headline_embedding_offset: The cosine at which a headline is neutral: lower than for a
            title and lede, as a headline's embedding meets its story's at lower cosines.
        norm_tolerance: A story's cached IDF-weighted norms are recomputed when the IDF's
            document count has moved by more than this share since they were computed (0:
            recomputed for every article, as exact as before the cache).
    """

    join_threshold: float = 0.30
    copy_jaccard: float = 0.5
    copy_chain_jaccard: float = 0.6
    entity_bonus: float = 0.10
    year_conflict_penalty: float = 0.10
    date_conflict_penalty: float = 0.30
    time_penalty_per_hour: float = 0.002
    active_window_hours: float = 48.0
    centroid_min_weight: float = 0.1
    centroid_terms: int = 100
    max_candidates: int = 15
    idf_half_life_hours: float = 24.0 * 7
    idf_prior_docs: float = 10.0
    lsh_bands: int = LSH_BANDS
    lsh_rows: int = LSH_ROWS
    link_threshold: float = 0.15
    link_embedding_threshold: float = 0.5
    link_min_shared: int = 2
    link_same_language_threshold: float | None = None
    member_weight: float = 0.0
    member_sample: int = 16
    young_story_size: int = 2
    young_story_margin: float = 0.0
    member_terms: int = 40
    norm_tolerance: float = 0.02
    max_postings: int = 3000
    embedding_weight: float = 0.25
    embedding_offset: float = 0.6
    headline_embedding_weight: float = 1.75
    headline_embedding_offset: float = 0.3
    # Fields added later go last: a pickled writer of an earlier release (the A/B benches) reads
    # its parameters back by position.
    link_token_weight: float = 0.5
    link_score_threshold: float = 0.55

    def __post_init__(self) -> None:
        for name in ("join_threshold", "copy_jaccard", "copy_chain_jaccard", "centroid_min_weight", "link_threshold",
                     "member_weight", "link_embedding_threshold", "embedding_offset", "headline_embedding_offset"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        for name in ("link_token_weight", "link_score_threshold", "norm_tolerance", "entity_bonus", "year_conflict_penalty", "date_conflict_penalty", "time_penalty_per_hour",
                     "idf_prior_docs", "embedding_weight", "headline_embedding_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.active_window_hours <= 0 or self.idf_half_life_hours <= 0:
            raise ValueError("active_window_hours and idf_half_life_hours must be > 0")
        if min(self.centroid_terms, self.max_candidates, self.member_sample, self.member_terms, self.max_postings) < 1:
            raise ValueError("centroid_terms, max_candidates, member_sample, member_terms, max_postings must be >= 1")
        if self.lsh_bands < 1 or self.lsh_rows < 1 or self.lsh_bands * self.lsh_rows > NUM_PERM:
            raise ValueError(f"lsh {self.lsh_bands}x{self.lsh_rows} does not fit {NUM_PERM} permutations")

    def embedding_terms(self, has_body: bool) -> tuple[float, float]:
        """``(weight, offset)`` of the embedding in the score of an article with or without a body."""
        if has_body:
            return self.embedding_weight, self.embedding_offset
        return self.headline_embedding_weight, self.headline_embedding_offset


@dataclass(frozen=True, slots=True)
class RepairParams:
    """Bars of the repair pass.

    Attributes:
        lookback_hours: Only stories with an article in this window are looked at.
        cooldown_minutes: A story repaired less than this long ago is left alone.
        merge_threshold: Least mean cross-story member cosine for a merge.
        merge_low_threshold: A pair below ``merge_threshold`` but at or above this is merged
            when a second signal agrees: the cosine of the two groups' summed member embeddings is
            at least ``merge_embedding_threshold`` (issue 33: fragments of one event told in other
            words; None: words alone decide).
        merge_embedding_threshold: See ``merge_low_threshold``.
        merge_min_shared_entities: Least entity words the two stories share.
        merge_gap_hours: Most hours between the two stories' spans.
        split_margin: Least (within-half mean cosine − across mean cosine) for a split.
        split_min_separation: Least such difference in standard errors (Welch's t over the
            within-half and across pair cosines) for a split: a few pairs apart by chance are no
            two events; many pairs apart by a little are (issue 14).
        split_max_across: Most mean across cosine for a split.
        split_min_sources: Least sources (publishers; articles when unknown) per half.
        max_split_members: Stories larger than this are split on their latest members only.
        adopt: Whether a story of one article is merged into the larger story its article would
            now join by the online rule.
    """

    lookback_hours: float = 6.0
    cooldown_minutes: float = 30.0
    merge_threshold: float = 0.30
    merge_min_shared_entities: int = 1
    merge_gap_hours: float = 6.0
    split_margin: float = 0.05
    split_min_separation: float = 6.0
    split_max_across: float = 0.40
    split_min_sources: int = 4
    max_split_members: int = 200
    adopt: bool = True
    merge_low_threshold: float | None = 0.15
    merge_embedding_threshold: float = 0.75

    def __post_init__(self) -> None:
        if self.merge_low_threshold is not None and not 0.0 <= self.merge_low_threshold <= 1.0:
            raise ValueError(f"merge_low_threshold must be in [0, 1], got {self.merge_low_threshold}")
        for name in ("merge_threshold", "split_margin", "split_max_across", "merge_embedding_threshold"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if self.lookback_hours <= 0 or self.cooldown_minutes < 0 or self.merge_gap_hours < 0 or self.split_min_separation < 0:
            raise ValueError("lookback_hours must be > 0, cooldown_minutes, merge_gap_hours and split_min_separation >= 0")
        if self.split_min_sources < 1 or self.merge_min_shared_entities < 0 or self.max_split_members < 4:
            raise ValueError("split_min_sources >= 1, merge_min_shared_entities >= 0, max_split_members >= 4")
