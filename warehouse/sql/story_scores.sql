-- story_scores: one row per active story with the raw parts of its score at the last few rank
-- cycles (lag 0 = $now, lag k = $now - k * $cycle_seconds), its coverage by region, and the
-- candidate bursts that may make it Breaking. Ranking itself (weights, smoothing, the Poisson test,
-- editions) happens in transforms/ranking.py.
-- inputs: story_changes_log, articles_as_of (views.sql), publishers (view)
-- output: story_id, language, first_seen_at, last_original_at, original_count,
--         coverage / velocity / freshness (lists indexed by lag), regions + region_shares (lag 0),
--         burst_at / burst_originals / burst_publishers (lists: every burst window of a story still
--         young enough to be Breaking, the first one included), baseline_rate (originals per burst
--         window expected of a new story in that language), first_hour_rate (the same from this
--         story's own first hour; null while the story is younger than an hour)
-- parameters: $now (timestamptz), $coverage_window_hours, $half_life_hours, $active_hours,
--             $velocity_window_minutes, $cycle_seconds, $smoothing_cycles, $burst_window_minutes,
--             $burst_min_articles, $burst_min_publishers, $burst_authority_floor, $breaking_hours,
--             $breaking_new_story_minutes
-- Ranking uses first_seen_at, never the publisher's claimed date. Copies never add coverage.
-- Articles of opted-out publishers are left out entirely (no coverage, no burst, no story).
with assignments as (
    -- each article's story as of $now (views.sql)
    select
        article_id,
        story_id,
        copy_of
    from story_assignments_as_of($now)
),

members as (
    select
        a.story_id,
        a.article_id,
        a.copy_of is not null as is_copy,
        art.publisher_id,
        art.first_seen_at,
        art.language,
        p.authority,
        p.region
    from assignments as a
    inner join articles_as_of($now) as art using (article_id)
    inner join publishers as p using (publisher_id)
    -- an opted-out publisher is never listed, so it never counts for a story either
    where not p.is_opted_out
),

active_stories as (
    select
        story_id,
        any_value(language) as language,
        min(first_seen_at) as first_seen_at,
        max(first_seen_at) filter (where not is_copy) as last_original_at,
        count(*) filter (where not is_copy) as original_count
    from members
    group by story_id
    having
        max(first_seen_at) >= $now - to_seconds(cast($active_hours * 3600 as bigint))
        and count(*) filter (where not is_copy) > 0
),

originals as (
    select m.*
    from members as m
    inner join active_stories as s using (story_id)
    where not m.is_copy
),

lags as (
    select
        range as lag,
        $now - to_seconds(range * $cycle_seconds) as lag_at
    from range(cast($smoothing_cycles as bigint))
),

lagged_members as (
    select
        o.*,
        l.lag,
        l.lag_at
    from originals as o
    inner join lags as l on o.first_seen_at <= l.lag_at
),

lagged_publishers as (
    select distinct
        story_id,
        lag,
        publisher_id,
        authority
    from lagged_members
    where first_seen_at > lag_at - to_seconds(cast($coverage_window_hours * 3600 as bigint))
),

lagged_coverage as (
    select
        story_id,
        lag,
        ln(1 + sum(authority)) as coverage
    from lagged_publishers
    group by story_id, lag
),

lagged_activity as (
    select
        story_id,
        lag,
        any_value(lag_at) as lag_at,
        min(first_seen_at) as first_original_at,
        max(first_seen_at) as last_original_at,
        count(*) filter (
            where first_seen_at > lag_at - to_seconds(cast($velocity_window_minutes * 60 as bigint))
        ) as recent_originals,
        count(*) filter (
            where first_seen_at <= lag_at - to_seconds(cast($velocity_window_minutes * 60 as bigint))
        ) as earlier_originals
    from lagged_members
    group by story_id, lag
),

lagged_parts as (
    select
        a.story_id,
        a.lag,
        coalesce(c.coverage, 0) as coverage,
        greatest(
            0,
            ln(
                (1 + a.recent_originals)
                / (
                    1 + a.earlier_originals * ($velocity_window_minutes / 60.0)
                    / greatest(
                        epoch(a.lag_at - a.first_original_at) / 3600.0 - $velocity_window_minutes / 60.0,
                        1.0
                    )
                )
            )
        ) as velocity,
        exp(-ln(2) * epoch(a.lag_at - a.last_original_at) / 3600.0 / $half_life_hours) as freshness
    from lagged_activity as a
    left join lagged_coverage as c on a.story_id = c.story_id and a.lag = c.lag
),

lag_lists as (
    select
        s.story_id,
        list(coalesce(p.coverage, 0) order by l.lag) as coverage,
        list(coalesce(p.velocity, 0) order by l.lag) as velocity,
        list(coalesce(p.freshness, 0) order by l.lag) as freshness
    from active_stories as s
    cross join lags as l
    left join lagged_parts as p on s.story_id = p.story_id and l.lag = p.lag
    group by s.story_id
),

region_authority as (
    select
        story_id,
        region,
        sum(authority) as authority_sum
    from lagged_publishers
    inner join (select distinct publisher_id, region from originals) using (publisher_id)
    where lag = 0
    group by story_id, region
),

region_share as (
    select
        story_id,
        region,
        -- null, not 0/0 = NaN, when every publisher of the story has authority 0
        authority_sum / nullif(sum(authority_sum) over (partition by story_id), 0) as share
    from region_authority
),

regions as (
    select
        story_id,
        list(region order by region) as regions,
        list(share order by region) as region_shares
    from region_share
    group by story_id
),

burst_windows as (
    select
        story_id,
        language,
        first_seen_at,
        count(*) over w as window_originals,
        count(distinct publisher_id) filter (where authority >= $burst_authority_floor) over w
            as window_publishers
    from originals
    window w as (
        partition by story_id order by first_seen_at
        range between to_seconds(cast($burst_window_minutes * 60 as bigint)) preceding and current row
    )
),

bursts as (
    select
        b.story_id,
        list(b.first_seen_at order by b.first_seen_at) as burst_at,
        list(b.window_originals order by b.first_seen_at) as burst_originals,
        list(b.window_publishers order by b.first_seen_at) as burst_publishers
    from burst_windows as b
    inner join active_stories as s using (story_id)
    where
        b.window_originals >= $burst_min_articles
        and b.window_publishers >= $burst_min_publishers
        -- every burst of the story, not only the recent ones: Breaking lasts $breaking_hours from
        -- the FIRST burst, so a later burst must not restart it. Bursts only happen in a story's
        -- first minutes, so only stories young enough to still be Breaking are looked at.
        and b.first_seen_at <= s.first_seen_at + to_seconds(cast($breaking_new_story_minutes * 60 as bigint))
        and s.first_seen_at > $now - to_seconds(
            cast($breaking_hours * 3600 + $breaking_new_story_minutes * 60 as bigint)
        )
    group by b.story_id
),

first_hours as (
    -- how many originals each settled story gathered in its first hour
    select
        s.story_id,
        s.language,
        count(o.article_id) as first_hour_originals
    from active_stories as s
    left join originals as o
        on
            s.story_id = o.story_id
            and o.first_seen_at < s.first_seen_at + interval 1 hour
    where s.first_seen_at < $now - interval 1 hour
    group by s.story_id, s.language
),

early_counts as (
    -- the baseline for a new story of a language; transforms/ranking.py narrows it to the topic
    select
        language,
        avg(first_hour_originals) as first_hour_originals
    from first_hours
    group by language
),

final as (
    select
        s.story_id,
        s.language,
        s.first_seen_at,
        s.last_original_at,
        s.original_count,
        l.coverage,
        l.velocity,
        l.freshness,
        coalesce(r.regions, []) as regions,
        coalesce(r.region_shares, []) as region_shares,
        coalesce(b.burst_at, []) as burst_at,
        coalesce(b.burst_originals, []) as burst_originals,
        coalesce(b.burst_publishers, []) as burst_publishers,
        coalesce(e.first_hour_originals * $burst_window_minutes / 60.0, 0) as baseline_rate,
        f.first_hour_originals * $burst_window_minutes / 60.0 as first_hour_rate
    from active_stories as s
    inner join lag_lists as l using (story_id)
    left join regions as r using (story_id)
    left join bursts as b using (story_id)
    left join early_counts as e using (language)
    left join first_hours as f using (story_id)
)

select * from final
order by story_id
