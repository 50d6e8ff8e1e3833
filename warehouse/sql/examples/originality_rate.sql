-- originality_rate: each publisher's originals over copies (syndicated reprints it ran).
-- inputs: story_assignments, articles, publishers (views)
-- output: publisher, originals, copies, originality_rate
with final as (
    select
        p.name as publisher,
        count(*) filter (where a.copy_of is null) as originals,
        count(*) filter (where a.copy_of is not null) as copies,
        round(count(*) filter (where a.copy_of is null) / count(*), 3) as originality_rate
    from story_assignments as a
    inner join articles as art using (article_id)
    inner join publishers as p using (publisher_id)
    group by p.name
)

select * from final
order by originality_rate, publisher
