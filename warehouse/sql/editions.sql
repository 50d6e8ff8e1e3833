-- editions: every edition (language + region) that has a publisher we may list.
-- inputs: publishers (view)
-- output: edition, language, region
-- parameters: none
with publishers_in as (
    select
        language,
        region
    from publishers
    where not is_opted_out
),

final as (
    select distinct
        language,
        region,
        language || '-' || region as edition
    from publishers_in
)

select * from final
order by edition
