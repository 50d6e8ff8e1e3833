-- health_change_gaps: offsets missing from each language's story-change log (issue 16).
-- inputs: story_changes_log
-- output: (language, first_missing, last_missing): a run of offsets with no change row between
--         two stored ones; and, per language, one row with first_missing one past its highest
--         offset and last_missing null, which the caller compares with the writer's checkpoint.
-- Retention deletes the oldest changes first, so offsets before the lowest stored one are not
-- reported.
with changes as (
    select distinct
        language,
        "offset"
    from story_changes_log
),

steps as (
    select
        language,
        "offset",
        lag("offset") over (partition by language order by "offset") as previous
    from changes
),

gaps as (
    select
        language,
        previous + 1 as first_missing,
        "offset" - 1 as last_missing
    from steps
    where "offset" - previous > 1
),

tails as (
    select
        language,
        max("offset") + 1 as first_missing,
        cast(null as bigint) as last_missing
    from changes
    group by language
),

final as (
    select * from gaps
    union all
    select * from tails
)

select * from final
order by language, first_missing
