-- story_lineage_of: one story's history, event by event (`newsroom explain`, issue 18).
-- inputs: lineage_changes (story_lineage_changes.sql's rows), lineage_articles (the article rows
--         they name, looked up by id: warehouse.duck.article_rows)
-- output: changed_at, kind, direction, article_id, publisher_id, title, other_story_id, score
-- parameters: $story_id (varchar)
-- Kinds: new_story (its birth), assign (an article joined), copy (a syndicated copy joined),
-- version (a member's new version), merge and split. direction says which side the story was on:
-- for a merge, 'absorbed' (it is the survivor; other_story_id merged into it) or 'merged into'
-- (it was merged away into other_story_id); for a split, 'split off' (it is the new half, taken
-- from other_story_id) or 'lost' (other_story_id split off from it).
with directed as (
    select
        changed_at,
        "offset",
        kind,
        case
            when kind = 'merge' and story_id = $story_id then 'absorbed'
            when kind = 'merge' then 'merged into'
            when kind = 'split' and story_id = $story_id then 'split off'
            when kind = 'split' then 'lost'
            else ''
        end as direction,
        article_id,
        case when story_id = $story_id then other_story_id else story_id end as other_story_id,
        score
    from lineage_changes
),

titles as (
    select
        article_id,
        arg_max(title, version) as title,
        any_value(publisher_id) as publisher_id
    from lineage_articles
    group by article_id
),

final as (
    select
        d.changed_at,
        d.kind,
        d.direction,
        d.article_id,
        t.publisher_id,
        t.title,
        d.other_story_id,
        d.score,
        d."offset"
    from directed as d
    left join titles as t using (article_id)
)

select * exclude ("offset") from final
order by changed_at, "offset", article_id
