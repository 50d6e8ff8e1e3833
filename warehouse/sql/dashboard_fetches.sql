-- dashboard_fetches: feed polls per hour over the 24 hours before $now, and how they answered.
-- inputs: fetches (view)
-- output: hour, polls, not_modified, ok, errors, not_modified_share, conditional_share
-- parameters: $now (timestamptz)
-- A 304 is the cheapest answer a publisher can give; its share shows how well conditional GET
-- (ETag / Last-Modified, RFC 9110 section 13) works across the registry.
with polls as (
    select
        fetched_at,
        status,
        error_kind,
        is_conditional
    from fetches
    where kind = 'feed' and fetched_at > $now - interval 24 hour and fetched_at <= $now
),

final as (
    select
        date_trunc('hour', fetched_at) as hour,
        count(*) as polls,
        count(*) filter (where status = 304) as not_modified,
        count(*) filter (where error_kind is null and status between 200 and 299) as ok,
        count(*) filter (where error_kind is not null) as errors,
        count(*) filter (where status = 304) / count(*) as not_modified_share,
        count(*) filter (where is_conditional) / count(*) as conditional_share
    from polls
    group by 1
)

select * from final
order by hour
