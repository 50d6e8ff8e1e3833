-- listed_articles: the articles a published story snapshot already held before $now.
-- inputs: listings (view)
-- output: article_id
-- parameters: $now (timestamptz)
-- The rank job lists, each cycle, only the articles of its story snapshot that are not here.
with final as (
    select article_id
    from listings
    where listed_at < $now
)

select * from final
