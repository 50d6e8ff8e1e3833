-- coverage_by_region: articles and distinct stories per publisher region and language.
-- inputs: story_changes, articles, publishers (views)
-- output: region, language, publishers, articles, stories
with assignments as (
    select
        article_id,
        story_id
    from story_changes
    where kind in ('new_story', 'assign', 'copy')
    qualify row_number() over (partition by article_id order by "offset" desc) = 1
),

final as (
    select
        p.region,
        art.language,
        count(distinct p.publisher_id) as publishers,
        count(*) as articles,
        count(distinct a.story_id) as stories
    from articles as art
    inner join publishers as p using (publisher_id)
    left join assignments as a using (article_id)
    group by p.region, art.language
)

select * from final
order by articles desc, region
