-- dashboard_errors: fetch errors by kind and by host over the 24 hours before $now.
-- inputs: fetches (view)
-- output: error_kind, host, fetch_kind (feed or page), errors, last_status, last_error_at
-- parameters: $now (timestamptz)
with failed as (
    select
        error_kind,
        host,
        kind,
        status,
        fetched_at
    from fetches
    where error_kind is not null and fetched_at > $now - interval 24 hour and fetched_at <= $now
),

final as (
    select
        error_kind,
        host,
        kind as fetch_kind,
        count(*) as errors,
        arg_max(status, fetched_at) as last_status,
        max(fetched_at) as last_error_at
    from failed
    group by error_kind, host, kind
)

select * from final
order by errors desc, error_kind, host, fetch_kind
