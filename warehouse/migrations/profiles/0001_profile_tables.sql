-- 0001_profile_tables: reader profiles on PostgreSQL (issue 19).
-- The same tables and columns as the embedded SQLite store (warehouse/profiles.py,
-- PROFILE_TABLES_SQL), so both backends hold the same values. Instants are UNIX seconds
-- (double precision), as in SQLite: the fold and For you compare them with time.time().
-- Written by serving (follows, hides, reads) and by the profiles fold (weights, clicks_consumed,
-- clicks_folded). Applied once, under warehouse.profile_db.migrate_profiles's advisory lock.

create table follows (
    reader_hash text not null,
    kind text not null check (kind in ('topic', 'source')),
    target_id text not null,
    created_at double precision not null,
    primary key (reader_hash, kind, target_id)
);

create table hides (
    reader_hash text not null,
    kind text not null check (kind in ('source', 'story')),
    target_id text not null,
    created_at double precision not null,
    primary key (reader_hash, kind, target_id)
);

create table reads (
    reader_hash text not null,
    story_id text not null,
    read_at double precision not null,
    primary key (reader_hash, story_id)
);

create table weights (
    reader_hash text not null,
    kind text not null check (kind in ('topic', 'source', 'term')),
    key text not null,
    weight double precision not null,
    as_of double precision not null,
    primary key (reader_hash, kind, key)
);

create table clicks_consumed (
    segment_key text primary key,
    consumed_at double precision not null
);

create table clicks_folded (
    click_id text primary key,
    day text not null,
    folded_at double precision not null
);

-- Retention forgets folded ids by day.
create index clicks_folded_day on clicks_folded (day);
