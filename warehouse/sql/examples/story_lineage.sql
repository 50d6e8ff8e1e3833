-- story_lineage: how each story grew over time: its births, joins, copies, merges and splits.
-- inputs: story_changes (view)
-- output: story_id, kind, changes, first_at, last_at
with final as (
    select
        story_id,
        kind,
        count(*) as changes,
        min(changed_at) as first_at,
        max(changed_at) as last_at,
        list(other_story_id order by changed_at) filter (
            where other_story_id is not null
        ) as other_stories
    from story_changes
    group by story_id, kind
)

select * from final
order by story_id, first_at, kind
