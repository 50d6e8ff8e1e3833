-- health_freshness: publish -> first-seen lag per publisher tier over the last hour.
-- inputs: articles, publishers (views)
-- output: tier (null on the row over every tier), articles, lag_p50_seconds, lag_p95_seconds
-- parameters: $now (timestamptz)
-- The claimed publication time is used only here, to measure how fast we saw an article.
with recent as (
    select
        p.tier,
        epoch(a.first_seen_at - a.published_at) as lag_seconds
    from articles as a
    inner join publishers as p using (publisher_id)
    where
        a.first_seen_at > $now - interval 1 hour
        and a.first_seen_at <= $now
        and a.published_at is not null
        and a.published_at <= a.first_seen_at
),

final as (
    select
        tier,
        count(*) as articles,
        quantile_cont(lag_seconds, 0.5) as lag_p50_seconds,
        quantile_cont(lag_seconds, 0.95) as lag_p95_seconds
    from recent
    group by grouping sets ((tier), ())
)

select * from final
order by tier nulls first
