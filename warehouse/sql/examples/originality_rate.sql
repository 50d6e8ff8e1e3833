-- originality_rate: each publisher's originals over copies (syndicated reprints it ran).
-- inputs: story_changes, articles, publishers (views)
-- output: publisher, originals, copies, originality_rate
with assignments as (
    select
        article_id,
        copy_of
    from story_changes
    where kind in ('new_story', 'assign', 'copy')
    qualify row_number() over (partition by article_id order by "offset" desc) = 1
),

final as (
    select
        p.name as publisher,
        count(*) filter (where a.copy_of is null) as originals,
        count(*) filter (where a.copy_of is not null) as copies,
        round(count(*) filter (where a.copy_of is null) / count(*), 3) as originality_rate
    from assignments as a
    inner join articles as art using (article_id)
    inner join publishers as p using (publisher_id)
    group by p.name
)

select * from final
order by originality_rate, publisher
