-- health_silent_publishers: tier-1 publishers silent for more than twice their usual gap.
-- inputs: articles, publishers (views)
-- output: publisher_id, last_seen_at, usual_gap_seconds, silent_seconds
-- parameters: $now (timestamptz)
-- The usual gap is the 90th percentile of the gaps between a publisher's articles over the last 7
-- days (news arrives in bursts, so a median would call every lull a silence); at least 5 articles
-- are needed before a publisher can be called silent.
with seen as (
    select
        a.publisher_id,
        a.first_seen_at,
        epoch(
            a.first_seen_at
            - lag(a.first_seen_at) over (partition by a.publisher_id order by a.first_seen_at)
        ) as gap_seconds
    from articles as a
    inner join publishers as p using (publisher_id)
    where
        p.tier = 1
        and not p.is_opted_out
        and a.first_seen_at > $now - interval 7 day
        and a.first_seen_at <= $now
),

usual as (
    select
        publisher_id,
        max(first_seen_at) as last_seen_at,
        quantile_cont(gap_seconds, 0.9) filter (where gap_seconds > 0) as usual_gap_seconds,
        count(*) as articles
    from seen
    group by publisher_id
),

final as (
    select
        publisher_id,
        last_seen_at,
        usual_gap_seconds,
        epoch($now - last_seen_at) as silent_seconds
    from usual
    where articles >= 5 and epoch($now - last_seen_at) > 2 * usual_gap_seconds
)

select * from final
order by silent_seconds desc
