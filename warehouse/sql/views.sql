-- views: the analyst-facing tables over the stored Parquet, registered by warehouse.duck.connect.
-- inputs: <log>_settled and <log>_fresh for each log (articles, story_changes, clicks, article_links,
--         fetches, listings): pyarrow datasets over its segments (warehouse.catalog; settled files
--         hold no row twice, fresh ones are the segments no compaction folded yet, about the
--         last hour); publishers_raw, feed_registry, feed_state, pages_raw
-- output: views <log>_log (every stored row), articles, story_changes, story_assignments, stories,
--         feeds, publishers, pages, clicks, article_links, fetches, listings
-- Settled files are scanned as they lie, so a predicate on a column reaches their statistics and
-- skips whole files and row groups; only fresh files (about the last hour) go through the window
-- that counts a row stored twice once (a click reloaded, a rerun after a crash).
create or replace view articles_log as
select * from articles_settled
union all
select * from articles_fresh;

create or replace view story_changes_log as
select * from story_changes_settled
union all
select * from story_changes_fresh;

create or replace view clicks_log as
select * from clicks_settled
union all
select * from clicks_fresh;

create or replace view article_links_log as
select * from article_links_settled
union all
select * from article_links_fresh;

create or replace view fetches_log as
select * from fetches_settled
union all
select * from fetches_fresh;

create or replace view listings_log as
select * from listings_settled
union all
select * from listings_fresh;

-- An article is its first-seen row per (article_id, version); a rerun after a crash may have
-- appended the same row twice, and the views count it once.
create or replace view articles as
select * from articles_settled
union all
select * exclude (rn)
from (
    select
        *,
        row_number() over (
            partition by article_id, version order by first_seen_at, content_hash
        ) as rn
    from articles_fresh
)
where rn = 1;

-- articles_as_of(t): one row per article, its latest version seen by t (a corrected headline or
-- snippet), first seen when its first version was. Stories count an article once, whatever
-- its versions (a new version stays the same member, kind 'version' in story_changes).
create or replace macro articles_as_of(as_of) as table
select * replace (min(first_seen_at) over (partition by article_id) as first_seen_at)
from articles
where first_seen_at <= as_of
qualify row_number() over (partition by article_id order by version desc, first_seen_at desc) = 1;

-- Story changes are unique by construction: a segment's key is its writer's offset, and a
-- segment a compaction holds is left out of the log (warehouse.catalog).
create or replace view story_changes as
select * from story_changes_log;

create or replace view publishers as
select * from publishers_raw;

create or replace view feeds as
select
    r.*,
    s.* exclude (feed_id)
from feed_registry as r
left join feed_state as s using (feed_id);

-- A click is its first row per click_id: a reload of the same link, or a compaction that died
-- between writing its segment and deleting the sources, may have stored it twice.
create or replace view clicks as
select * from clicks_settled
union all
select * exclude (rn)
from (
    select
        *,
        row_number() over (partition by click_id order by clicked_at, surface, position) as rn
    from clicks_fresh
)
where rn = 1;

create or replace view article_links as
select * from article_links_log;

create or replace view pages as
select * from pages_raw;

-- fetches: every HTTP fetch of an ingest run (feed polls, article pages), once per fetch_id (a rerun
-- of a run after a crash may have written it twice).
create or replace view fetches as
select * from fetches_settled
union all
select * exclude (rn)
from (
    select
        *,
        row_number() over (partition by fetch_id order by fetched_at) as rn
    from fetches_fresh
)
where rn = 1;

-- listings: when each article first reached a page (its story's Full Coverage in a published story
-- snapshot); one row per article.
create or replace view listings as
select * from listings_settled
union all
select * exclude (rn)
from (
    select
        *,
        row_number() over (partition by article_id order by listed_at, story_id) as rn
    from listings_fresh
)
where rn = 1;

-- story_assignments_as_of(t): each article's story as of t (its latest change at or before t);
-- merges and splits move articles, so an article's latest change names its story (issue 4).
-- The rank job's SQL reads it at $now, so `newsroom rank --as-of` sees the past exactly.
create or replace macro story_assignments_as_of(as_of) as table
select
    article_id,
    story_id,
    language,
    copy_of,
    changed_at,
    "offset"
from story_changes_log
where kind in ('new_story', 'assign', 'copy', 'merge', 'split') and changed_at <= as_of
qualify row_number() over (partition by article_id order by "offset" desc) = 1;

create or replace view story_assignments as
select * from story_assignments_as_of('infinity'::timestamptz);

create or replace view stories as
with members as (
    select
        a.story_id,
        a.language,
        a.copy_of,
        art.publisher_id,
        art.first_seen_at
    from story_assignments as a
    inner join articles_as_of('infinity'::timestamptz) as art using (article_id)
),

final as (
    select
        story_id,
        any_value(language) as language,
        count(*) as article_count,
        count(*) filter (where copy_of is null) as original_count,
        count(distinct publisher_id) as publisher_count,
        min(first_seen_at) as first_seen_at,
        max(first_seen_at) as last_seen_at
    from members
    group by story_id
)

select * from final;
