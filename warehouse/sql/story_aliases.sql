-- story_aliases: merged story ids and the story that survived each merge, as of $now.
-- inputs: story_changes_log
-- output: alias_id, survivor_id
-- parameters: $now (timestamptz)
-- A merge row names the survivor in story_id and the merged story in other_story_id (issue 4).
with merges as (
    select
        other_story_id as alias_id,
        story_id as survivor_id,
        "offset"
    from story_changes_log
    where kind = 'merge' and other_story_id is not null and changed_at <= $now
),

final as (
    select
        alias_id,
        survivor_id
    from merges
    qualify row_number() over (partition by alias_id order by "offset" desc) = 1
)

select * from final
order by alias_id
