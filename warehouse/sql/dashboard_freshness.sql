-- dashboard_freshness: how long articles took from publication to a page, stage by stage, per
-- publisher tier, over the 24 hours before $now (the health flow's freshness dashboard, issue 18).
-- inputs: articles, publishers, story_changes, listings (views)
-- output: stage, tier (null on the row over every tier), articles, p50_seconds, p95_seconds
-- parameters: $now (timestamptz)
-- Stages: published -> first seen (the publisher's claimed time, used only for this measurement),
-- first seen -> in a story (its first clustering decision), in a story -> on a page (the first
-- story snapshot that lists it), and the whole way, published -> on a page. An article counts in a
-- stage once both ends are known and in order.
with seen as (
    -- An article's first version opens its life, so one first seen in the window has its version 1
    -- there and no row before it: only the window's rows are read (issue 28).
    select
        article_id,
        any_value(publisher_id) as publisher_id,
        min(published_at) as published_at,
        min(first_seen_at) as first_seen_at
    from articles
    where first_seen_at > $now - interval 24 hour
    group by article_id
    having bool_or(version = 1) and min(first_seen_at) <= $now
),

-- Clustering and listing come after an article is first seen, so for the window's articles they
-- lie in the window too.
clustered as (
    select
        article_id,
        min(changed_at) as in_story_at
    from story_changes
    where
        kind in ('new_story', 'assign', 'copy')
        and changed_at > $now - interval 24 hour
        and changed_at <= $now
    group by article_id
),

listed as (
    select
        article_id,
        min(listed_at) as on_page_at
    from listings
    where listed_at > $now - interval 24 hour and listed_at <= $now
    group by article_id
),

timed as (
    select
        p.tier,
        s.published_at,
        s.first_seen_at,
        c.in_story_at,
        l.on_page_at
    from seen as s
    inner join publishers as p using (publisher_id)
    left join clustered as c using (article_id)
    left join listed as l using (article_id)
),

stages as (
    select tier, 1 as stage_order, 'published -> first seen' as stage,
        epoch(first_seen_at - published_at) as seconds
    from timed where published_at <= first_seen_at
    union all
    select tier, 2, 'first seen -> in a story', epoch(in_story_at - first_seen_at)
    from timed where in_story_at >= first_seen_at
    union all
    select tier, 3, 'in a story -> on a page', epoch(on_page_at - in_story_at)
    from timed where on_page_at >= in_story_at
    union all
    select tier, 4, 'published -> on a page', epoch(on_page_at - published_at)
    from timed where on_page_at >= published_at
),

final as (
    select
        stage,
        any_value(stage_order) as stage_order,
        tier,
        count(*) as articles,
        quantile_cont(seconds, 0.5) as p50_seconds,
        quantile_cont(seconds, 0.95) as p95_seconds
    from stages
    group by grouping sets ((stage, tier), (stage))
)

select * exclude (stage_order) from final
order by stage_order, tier nulls first
