-- first_reporter: who reported each story first (by first_seen_at, never a claimed date).
-- inputs: stories, story_assignments, articles, publishers (views)
-- output: story_id, publisher, first_seen_at, article_count, publisher_count
with firsts as (
    select
        a.story_id,
        p.name as publisher,
        art.title,
        art.first_seen_at
    from story_assignments as a
    inner join articles as art using (article_id)
    inner join publishers as p using (publisher_id)
    qualify row_number() over (
        partition by a.story_id order by art.first_seen_at, art.article_id
    ) = 1
),

final as (
    select
        f.story_id,
        f.publisher,
        f.title,
        f.first_seen_at,
        s.article_count,
        s.publisher_count
    from firsts as f
    inner join stories as s using (story_id)
)

select * from final
order by publisher_count desc, first_seen_at, story_id
