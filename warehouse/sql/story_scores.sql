-- story_scores: one row per (story, edition) with its score and the score's parts, as of $now.
-- inputs: story_changes_log, articles (view), publishers (view)
-- output: story_id, edition, language, coverage, freshness, regional_share, score, last_original_at
-- parameters: $now (timestamptz), $coverage_window_hours, $half_life_hours, $regional_weight,
--             $active_hours
-- Ranking uses first_seen_at, never the publisher's claimed date. Copies never add coverage.
with assignments as (
    select
        article_id,
        story_id,
        copy_of
    from story_changes_log
    -- merges and splits move articles: an article's latest change names its story (issue 4)
    where kind in ('new_story', 'assign', 'copy', 'merge', 'split') and changed_at <= $now
    qualify row_number() over (partition by article_id order by "offset" desc) = 1
),

members as (
    select
        a.story_id,
        a.copy_of is not null as is_copy,
        art.publisher_id,
        art.first_seen_at,
        art.language,
        p.authority,
        p.region
    from assignments as a
    inner join articles as art using (article_id)
    inner join publishers as p using (publisher_id)
    where art.first_seen_at <= $now
),

active_stories as (
    select
        story_id,
        any_value(language) as language,
        max(first_seen_at) filter (where not is_copy) as last_original_at
    from members
    group by story_id
    having max(first_seen_at) >= $now - to_seconds(cast($active_hours * 3600 as bigint))
),

recent_publishers as (
    select distinct
        story_id,
        publisher_id,
        authority,
        region
    from members
    where
        not is_copy
        and first_seen_at > $now - to_seconds(cast($coverage_window_hours * 3600 as bigint))
),

coverage as (
    select
        story_id,
        sum(authority) as authority_sum
    from recent_publishers
    group by story_id
),

regional as (
    select
        story_id,
        region,
        sum(authority) as regional_authority
    from recent_publishers
    group by story_id, region
),

editions as (
    select distinct
        language,
        region,
        language || '-' || region as edition
    from publishers
    where not is_opted_out
),

scored as (
    select
        s.story_id,
        e.edition,
        s.language,
        s.last_original_at,
        ln(1 + c.authority_sum) as coverage,
        exp(-ln(2) * epoch($now - s.last_original_at) / 3600.0 / $half_life_hours) as freshness,
        coalesce(r.regional_authority, 0) / c.authority_sum as regional_share
    from active_stories as s
    inner join editions as e on s.language = e.language
    inner join coverage as c on s.story_id = c.story_id
    left join regional as r on s.story_id = r.story_id and e.region = r.region
    where c.authority_sum > 0
),

final as (
    select
        *,
        coverage * freshness * (1 - $regional_weight + $regional_weight * regional_share) as score
    from scored
)

select * from final
order by edition, score desc, story_id
