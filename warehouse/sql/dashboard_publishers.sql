-- dashboard_publishers: per publisher, how fresh we are and how politely we fetch, over the 24
-- hours before $now.
-- inputs: publishers, articles, fetches, feeds (views)
-- output: publisher_id, name, tier, articles, lag_p50_seconds, lag_p95_seconds, feed_polls,
--   page_fetches, requests_per_hour, conditional_share, not_modified_share, errors,
--   throttled (429/503 answers), median_interval_seconds, backoffs (polls whose next poll was
--   pushed back by Retry-After, backoff or parking), parked_feeds
-- parameters: $now (timestamptz)
-- Freshness is publish -> first seen (the claimed publication time, used only for this measurement).
with registry as (
    select
        publisher_id,
        name,
        tier
    from publishers
    where not is_opted_out
),

fresh as (
    select
        publisher_id,
        count(*) as articles,
        quantile_cont(epoch(first_seen_at - published_at), 0.5)
            filter (where published_at <= first_seen_at) as lag_p50_seconds,
        quantile_cont(epoch(first_seen_at - published_at), 0.95)
            filter (where published_at <= first_seen_at) as lag_p95_seconds
    from articles
    where first_seen_at > $now - interval 24 hour and first_seen_at <= $now and version = 1
    group by publisher_id
),

requests as (
    -- a page never requested (no link, robots.txt said no, the host was backing off) is no request
    select
        *,
        coalesce(error_kind not in ('no_link', 'robots_disallowed', 'host_backoff'), true) as is_request
    from fetches
    where fetched_at > $now - interval 24 hour and fetched_at <= $now
),

fetched as (
    select
        publisher_id,
        count(*) filter (where kind = 'feed' and is_request) as feed_polls,
        count(*) filter (where kind = 'page' and is_request) as page_fetches,
        count(*) filter (where is_request) / 24.0 as requests_per_hour,
        avg(case when is_conditional then 1.0 else 0.0 end) filter (where kind = 'feed') as conditional_share,
        avg(case when status = 304 then 1.0 else 0.0 end) filter (where kind = 'feed') as not_modified_share,
        count(*) filter (where error_kind is not null) as errors,
        count(*) filter (where status in (429, 503)) as throttled,
        median(interval_seconds) filter (where kind = 'feed') as median_interval_seconds,
        count(*) filter (where poll_reason in ('retry_after', 'backoff', 'parked', 'gone')) as backoffs
    from requests
    group by publisher_id
),

parked as (
    select
        publisher_id,
        count(*) filter (where is_parked) as parked_feeds
    from feeds
    group by publisher_id
),

final as (
    select
        r.publisher_id,
        r.name,
        r.tier,
        coalesce(f.articles, 0) as articles,
        f.lag_p50_seconds,
        f.lag_p95_seconds,
        coalesce(x.feed_polls, 0) as feed_polls,
        coalesce(x.page_fetches, 0) as page_fetches,
        coalesce(x.requests_per_hour, 0) as requests_per_hour,
        x.conditional_share,
        x.not_modified_share,
        coalesce(x.errors, 0) as errors,
        coalesce(x.throttled, 0) as throttled,
        x.median_interval_seconds,
        coalesce(x.backoffs, 0) as backoffs,
        coalesce(p.parked_feeds, 0) as parked_feeds
    from registry as r
    left join fresh as f using (publisher_id)
    left join fetched as x using (publisher_id)
    left join parked as p using (publisher_id)
)

select * from final
order by tier, articles desc, publisher_id
