-- syndication_chains: for each original that was reprinted, who reprinted it and how long after.
-- inputs: story_changes, articles, publishers (views)
-- output: original publisher and title, reprinting publisher, minutes after the original
with copies as (
    select
        article_id,
        copy_of
    from story_changes
    where kind = 'copy'
),

final as (
    select
        po.name as original_publisher,
        o.title as original_title,
        pc.name as reprinted_by,
        c.title as reprint_title,
        round(epoch(c.first_seen_at - o.first_seen_at) / 60.0, 1) as minutes_after
    from copies as k
    inner join articles as c on k.article_id = c.article_id
    inner join articles as o on k.copy_of = o.article_id
    inner join publishers as pc on c.publisher_id = pc.publisher_id
    inner join publishers as po on o.publisher_id = po.publisher_id
)

select * from final
order by original_publisher, original_title, minutes_after
