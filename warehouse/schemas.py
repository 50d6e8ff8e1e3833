"""Arrow schemas of every table, declared once; writers check frames against them."""

from __future__ import annotations

import pyarrow as pa

_TS = pa.timestamp("us", tz="UTC")

PUBLISHERS_SCHEMA = pa.schema(
    [
        ("publisher_id", pa.string()),
        ("name", pa.string()),
        ("domain", pa.string()),
        ("region", pa.string()),
        ("language", pa.string()),
        ("tier", pa.int8()),
        ("authority", pa.float32()),
        ("is_paywalled", pa.bool_()),
        ("is_opted_out", pa.bool_()),
    ]
)

FEEDS_SCHEMA = pa.schema(
    [
        ("feed_id", pa.string()),
        ("url", pa.string()),
        ("publisher_id", pa.string()),
        ("kind", pa.string()),  # rss | atom | json | sitemap (a hint; the parser sniffs the body)
        ("section_hint", pa.string()),
    ]
)

FEED_STATE_SCHEMA = pa.schema(
    [
        ("feed_id", pa.string()),
        ("next_poll_at", _TS),
        ("last_polled_at", _TS),
        ("last_status", pa.int16()),
        ("etag", pa.string()),
        ("last_modified", pa.string()),
        ("recent_guids", pa.list_(pa.string())),  # the last 200, newest first
        ("interval_seconds", pa.int32()),
        ("poll_reason", pa.string()),  # the rule that set next_poll_at (rate, retry_after, backoff, ...)
        ("error_streak", pa.int16()),
        ("last_error", pa.string()),
        ("last_error_kind", pa.string()),
        ("last_error_at", _TS),
        ("last_new_items", pa.int32()),
        ("rate_counts", pa.list_(pa.float32())),  # 168 decayed item counts, one per UTC hour of the week
        ("rate_observed_seconds", pa.float64()),  # decayed observed time behind rate_counts
        ("validator_miss_streak", pa.int16()),
        ("is_validators_useless", pa.bool_()),
        ("is_parked", pa.bool_()),
        ("parked_reason", pa.string()),
        ("hub_url", pa.string()),  # WebSub lease (issue 3, WebSub part): empty until subscribed
        ("topic_url", pa.string()),  # the feed's rel=self (its WebSub topic), kept for 304 polls
        ("lease_expires_at", _TS),
    ]
)

ARTICLES_SCHEMA = pa.schema(
    [
        ("article_id", pa.string()),
        ("version", pa.int32()),
        ("content_hash", pa.string()),
        ("url", pa.string()),
        ("canonical_url", pa.string()),
        ("feed_id", pa.string()),
        ("publisher_id", pa.string()),
        ("language", pa.string()),
        ("region", pa.string()),
        ("title", pa.string()),
        ("snippet", pa.string()),
        ("image_url", pa.string()),
        ("author", pa.string()),
        ("section", pa.string()),
        ("categories", pa.list_(pa.string())),
        ("is_opinion", pa.bool_()),
        ("published_at", _TS),  # what the publisher claims, when plausible; ranking never uses it
        ("first_seen_at", _TS),
        ("simhash", pa.uint64()),
        ("minhash", pa.list_(pa.uint32())),
        ("terms", pa.list_(pa.string())),
        ("term_weights", pa.list_(pa.float32())),
        ("entities", pa.list_(pa.string())),
        ("embedding", pa.list_(pa.float32())),
        ("signature_version", pa.string()),
        # The publication time the page or feed stated when it is implausible (before 1995, or more
        # than a day after first_seen_at): published_at is then null (#16). Null in segments written
        # before the column existed, which read as they were.
        ("implausible_published_at", _TS),
        # The section the title and lede suggest (tasks.sections.guess_sections), null where the
        # classifier abstained or there is no embedding; one of the article's section votes (issue 21).
        ("section_guess", pa.string()),
        # The model the embedding was made by (transforms.embedding.EMBEDDING_MODEL_ID); vectors of
        # different models are never compared. Null where there is no embedding, and in segments
        # written before the column existed, whose embeddings are the legacy model's (issue 33).
        ("embedding_model", pa.string()),
    ]
)

SNIPPET_MAX_CHARS = 200

STORY_CHANGES_SCHEMA = pa.schema(
    [
        ("change_id", pa.string()),
        ("offset", pa.int64()),
        ("language", pa.string()),
        ("kind", pa.string()),  # new_story | assign | copy | merge | split | version (same member, new text)
        ("story_id", pa.string()),
        ("article_id", pa.string()),
        ("copy_of", pa.string()),
        ("other_story_id", pa.string()),
        ("score", pa.float32()),
        ("changed_at", _TS),
    ]
)

CLICKS_SCHEMA = pa.schema(
    [
        ("click_id", pa.string()),
        ("article_id", pa.string()),
        ("story_id", pa.string()),
        ("reader_hash", pa.string()),
        ("surface", pa.string()),
        ("position", pa.int32()),
        ("clicked_at", _TS),
    ]
)

PAGES_SCHEMA = pa.schema(
    [
        ("edition", pa.string()),
        ("section", pa.string()),
        ("version", pa.int32()),
        ("key", pa.string()),
        ("is_live", pa.bool_()),
    ]
)

ARTICLE_LINKS_SCHEMA = pa.schema(
    [
        ("article_id", pa.string()),  # the id of the other URL (an AMP or print page)
        ("url", pa.string()),
        ("canonical_url", pa.string()),
        ("linked_to", pa.string()),  # the article it copies, which is stored once
        ("publisher_id", pa.string()),
        ("first_seen_at", _TS),
    ]
)

FETCHES_SCHEMA = pa.schema(
    [
        ("fetch_id", pa.string()),  # blake2b of (run instant, kind, url): a rerun of the same run repeats it
        ("fetched_at", _TS),  # the ingest run's instant
        ("kind", pa.string()),  # feed | page
        ("feed_id", pa.string()),
        ("publisher_id", pa.string()),
        ("host", pa.string()),  # the politeness key, host[:port]
        ("url", pa.string()),
        ("status", pa.int16()),  # null when no response came (timeout, refused, robots.txt)
        ("is_conditional", pa.bool_()),  # a feed poll that sent If-None-Match or If-Modified-Since
        ("error_kind", pa.string()),
        ("elapsed_ms", pa.float32()),
        ("interval_seconds", pa.int32()),  # feeds: until the next poll
        ("poll_reason", pa.string()),  # feeds: the rule that set it (rate, retry_after, backoff, ...)
    ]
)
"""One row per HTTP fetch an ingest run made (feed polls and article pages), for the health flow's
fetch, error and politeness dashboards (issue 18). Metrics only: no body, no header beyond the status."""

LISTINGS_SCHEMA = pa.schema(
    [
        ("article_id", pa.string()),
        ("story_id", pa.string()),
        ("listed_at", _TS),  # the rank cycle whose published story snapshot first held the article
    ]
)
"""When each article first reached a page (in its story's Full Coverage), for the freshness dashboard
(published -> first seen -> in a story -> on a page, issue 18)."""

# --- Story aggregates (issue 15): rank's incremental state under state/rank/ -----------------------

STORY_AGGREGATES_SCHEMA = pa.schema(
    [
        ("story_id", pa.string()),
        ("is_removed", pa.bool_()),  # a delta's tombstone: the story left (expired, merged away)
        ("language", pa.string()),
        ("first_seen_at", _TS),
        ("last_seen_at", _TS),
        ("article_count", pa.int64()),
        ("original_count", pa.int64()),
        ("titled_count", pa.int64()),
        ("first_original_at", _TS),
        ("last_original_at", _TS),
        ("older_last_at", _TS),  # the last original before the recent window
        ("publishers", pa.list_(pa.string())),  # distinct publishers of originals, sorted
        ("recent_times", pa.list_(_TS)),  # originals in the recent window, one by one
        ("recent_publishers", pa.list_(pa.string())),
        ("cov_publishers", pa.list_(pa.string())),  # publishers whose last older original still counts
        ("cov_times", pa.list_(_TS)),
        ("early_times", pa.list_(_TS)),  # originals of the story's first hour (bursts, baseline)
        ("early_publishers", pa.list_(pa.string())),
        ("section_names", pa.list_(pa.string())),  # section votes of its members
        ("section_counts", pa.list_(pa.int64())),
        ("rep_class", pa.int8()),  # the story-level representative (transforms.pages.choose_representative)
        ("rep_authority", pa.float64()),
        ("rep_article_id", pa.string()),
        ("rep_publisher_id", pa.string()),
        ("rep_title", pa.string()),
        ("rep_snippet", pa.string()),
        ("rep_image_url", pa.string()),
        ("rep_url", pa.string()),
        ("rep_first_seen_at", _TS),
        ("rep_is_copy", pa.bool_()),
        ("rep_is_opinion", pa.bool_()),
        ("rep_language", pa.string()),
    ]
)

_ROW_COLUMNS = [
    ("article_id", pa.string()),
    ("version", pa.int32()),
    ("content_hash", pa.string()),
    ("publisher_id", pa.string()),
    ("language", pa.string()),
    ("first_seen_at", _TS),
    ("title", pa.string()),
    ("snippet", pa.string()),
    ("url", pa.string()),
    ("canonical_url", pa.string()),
    ("image_url", pa.string()),
    ("section", pa.string()),
    ("categories", pa.list_(pa.string())),
    ("section_guess", pa.string()),
    ("is_opinion", pa.bool_()),
    ("terms", pa.list_(pa.string())),
    ("term_weights", pa.list_(pa.float32())),
    ("entities", pa.list_(pa.string())),
    ("embedding_q", pa.binary()),  # int8 sentence embedding (transforms.story_aggregates.quantize_embedding)
    ("embedding_scale", pa.float32()),
]

AGGREGATE_MEMBERS_SCHEMA = pa.schema(
    [
        ("story_id", pa.string()),
        ("is_removed", pa.bool_()),  # a delta's tombstone: the article left this story
        *_ROW_COLUMNS,
        ("copy_of", pa.string()),
        ("assigned_offset", pa.int64()),
        ("listed_at", _TS),  # when a published story snapshot first held it (log/listings)
    ]
)
"""A story's members as pages read them: the article row its writer acknowledged, and its story."""

PENDING_ROWS_SCHEMA = pa.schema(_ROW_COLUMNS)
"""Article rows no change has acknowledged yet (their writer has not run, or never will)."""

AGGREGATE_LEDGER_SCHEMA = pa.schema(
    [
        ("article_id", pa.string()),
        ("story_id", pa.string()),
        ("copy_of", pa.string()),
        ("assigned_offset", pa.int64()),
        ("is_member", pa.bool_()),
        ("acked", pa.list_(_TS)),  # acknowledged versions whose rows have not been read yet
        ("updated_at", _TS),
    ]
)

AGGREGATE_ALIASES_SCHEMA = pa.schema(
    [
        ("alias_id", pa.string()),
        ("survivor_id", pa.string()),
        ("offset", pa.int64()),
    ]
)
