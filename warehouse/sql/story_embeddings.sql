-- story_embeddings: the sentence embeddings of the original articles of some stories, as of $now,
-- for cross-language links (issue 4). Kept apart from story_members: 512 floats an article are
-- read only for the stories a snapshot lists.
-- inputs: story_assignments_as_of, articles_as_of (views.sql)
-- output: story_id, embedding (one row per original article that has one)
-- parameters: $now (timestamptz), $story_ids (varchar[])
select
    a.story_id,
    art.embedding
from story_assignments_as_of($now) as a
inner join articles_as_of($now) as art using (article_id)
where
    a.copy_of is null
    and art.embedding is not null
    and a.story_id in (select unnest($story_ids))
order by a.story_id, art.first_seen_at, art.article_id
