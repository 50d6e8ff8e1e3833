-- 0003_keywords_alerts_subscriptions: keyword follows, alert opt-ins and a reader's own sources (issue 30).
-- A follow of kind 'keyword' holds a query in its one spelling (warehouse.search_index.SearchQuery.text);
-- one of kind 'alert' an alert the reader opted in to ('breaking'). A subscription is a source the
-- reader asked for (POST /v1/subscriptions): it counts towards the reader's limits and is shown to
-- that reader only; the source itself waits in the object store (pending/sources/) until an
-- operator imports it into the registry. Every write also moves the reader's profile_versions row.

alter table follows drop constraint follows_kind_check;
alter table follows add constraint follows_kind_check check (kind in ('topic', 'source', 'keyword', 'alert'));

create table subscriptions (
    reader_hash text not null,
    feed_id text not null,
    feed_url text not null,
    site_url text not null,
    title text not null,
    created_at double precision not null,
    primary key (reader_hash, feed_id)
);

-- The limits count a reader's subscriptions of the last day.
create index subscriptions_reader_created on subscriptions (reader_hash, created_at);
