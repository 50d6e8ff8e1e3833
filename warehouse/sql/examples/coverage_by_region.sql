-- coverage_by_region: articles and distinct stories per publisher region and language.
-- inputs: story_assignments, articles, publishers (views)
-- output: region, language, publishers, articles, stories
with final as (
    select
        p.region,
        art.language,
        count(distinct p.publisher_id) as publishers,
        count(*) as articles,
        count(distinct a.story_id) as stories
    from articles as art
    inner join publishers as p using (publisher_id)
    left join story_assignments as a using (article_id)
    group by p.region, art.language
)

select * from final
order by articles desc, region
