-- story_lineage_changes: the change rows naming one story, on either side (`newsroom explain`).
-- inputs: story_changes (view)
-- output: changed_at, offset, kind, story_id, other_story_id, article_id, score
-- parameters: $story_id (varchar)
-- Two filtered scans instead of one `or` across two columns, so each predicate reaches the
-- segments' statistics (issue 28): story ids sort by creation, so segments older than the story
-- are skipped.
with as_survivor as (
    select
        changed_at,
        "offset",
        kind,
        story_id,
        other_story_id,
        article_id,
        score
    from story_changes
    where story_id = $story_id
),

as_other as (
    select
        changed_at,
        "offset",
        kind,
        story_id,
        other_story_id,
        article_id,
        score
    from story_changes
    where other_story_id = $story_id and story_id is distinct from $story_id
),

final as (
    select * from as_survivor
    union all
    select * from as_other
)

select * from final
