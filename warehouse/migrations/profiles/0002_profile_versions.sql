-- 0002_profile_versions: which readers' profiles changed, so serving replicas can cache profiles (issue 29).
-- Every write to a reader's follows, hides, reads or weights sets the reader's version to the id of
-- the writing transaction (pg_current_xact_id(), as a bigint), in that transaction. A replica asks
-- for the rows whose version is at least the oldest transaction still running when it last asked
-- (pg_snapshot_xmin): every transaction that committed since has an id at least that large, so no
-- change is missed even when transactions commit out of order. A cached profile is dropped when its
-- reader's version is not the one it was read with.

create table profile_versions (
    reader_hash text primary key,
    version bigint not null
);

create index profile_versions_version on profile_versions (version);
