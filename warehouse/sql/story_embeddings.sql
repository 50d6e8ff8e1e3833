-- story_embeddings: the sentence embeddings of the original articles of some stories, as of $now,
-- for cross-language links (issue 4). Kept apart from story_members: 512 floats an article are
-- read only for the stories a snapshot lists.
-- inputs: story_changes_log, articles (view)
-- output: story_id, embedding (one row per original article that has one)
-- parameters: $now (timestamptz), $story_ids (varchar[])
with assignments as (
    select
        article_id,
        story_id,
        copy_of
    from story_changes_log
    where kind in ('new_story', 'assign', 'copy', 'merge', 'split') and changed_at <= $now
    qualify row_number() over (partition by article_id order by "offset" desc) = 1
),

final as (
    select
        a.story_id,
        art.embedding
    from assignments as a
    inner join articles as art using (article_id)
    where
        a.copy_of is null
        and art.embedding is not null
        and art.first_seen_at <= $now
        and a.story_id in (select unnest($story_ids))
)

select * from final
order by story_id
