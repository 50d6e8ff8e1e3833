-- story_members: every article of every story, as of $now, with its publisher, for page assembly.
-- inputs: story_changes_log, articles_as_of (views.sql), publishers (view)
-- output: one row per article: story_id, article fields (with terms and entities), publisher fields,
--         is_copy
-- parameters: $now (timestamptz)
-- Articles of opted-out publishers are left out: never listed, never a representative.
with assignments as (
    -- each article's story as of $now (views.sql)
    select
        article_id,
        story_id,
        copy_of
    from story_assignments_as_of($now)
),

final as (
    select
        a.story_id,
        a.copy_of,
        a.copy_of is not null as is_copy,
        art.article_id,
        art.title,
        art.snippet,
        art.url,
        art.canonical_url,
        art.image_url,
        art.section,
        art.categories,
        art.section_guess,
        art.terms,
        art.term_weights,
        art.entities,
        art.is_opinion,
        art.language,
        art.first_seen_at,
        art.publisher_id,
        p.name as publisher,
        p.region,
        p.authority,
        p.is_paywalled
    from assignments as a
    inner join articles_as_of($now) as art using (article_id)
    inner join publishers as p using (publisher_id)
    where not p.is_opted_out
)

select * from final
order by story_id, first_seen_at, article_id
