"""The reader-profile database's tables (SQLite), and the keys of its ``term`` weights, defined once.

Serving writes follows (topics, sources, keywords, alerts), hides, reads and subscriptions (the sources
a reader asked for, issue 30); the profiles flow writes ``weights``, ``clicks_consumed``
(segment keys read) and ``clicks_folded`` (click ids counted: compaction moves clicks to new keys).
Every write to a reader's follows, hides, reads or weights also moves that reader's row in
``profile_versions`` (issue 29), in the same transaction: each serving replica keeps recently used
profiles in memory and asks for the versions that moved since it last asked, every second or so.
Both create the tables with this one definition, and both key ``term`` weights by
:func:`title_terms`: the profiles flow when it learns them from clicks, serving when it matches
them against a story's title.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W\d_]{4,}")
_STOPWORDS = frozenset(
    "about after again against also amid among before being below between could during each from "
    "have into more most other over says said some such than that their them then there these they "
    "this those through under until very were what when where which while will with would your".split()
)


def title_terms(title: str) -> tuple[str, ...]:
    """Distinct lower-cased words of four or more letters, minus stopwords, in first-seen order.

    >>> title_terms("Rail operator orders 40 battery trains for the rail network")
    ('rail', 'operator', 'orders', 'battery', 'trains', 'network')
    """
    seen: dict[str, None] = {}
    for word in _WORD.findall(title.lower()):
        if word not in _STOPWORDS:
            seen.setdefault(word, None)
    return tuple(seen)


PROFILE_TABLES_SQL = """
create table if not exists follows (
    reader_hash text not null, kind text not null, target_id text not null, created_at real not null,
    primary key (reader_hash, kind, target_id));
create table if not exists hides (
    reader_hash text not null, kind text not null, target_id text not null, created_at real not null,
    primary key (reader_hash, kind, target_id));
create table if not exists reads (
    reader_hash text not null, story_id text not null, read_at real not null,
    primary key (reader_hash, story_id));
create table if not exists weights (
    reader_hash text not null, kind text not null, key text not null, weight real not null,
    as_of real not null, primary key (reader_hash, kind, key));
create table if not exists clicks_consumed (segment_key text primary key, consumed_at real not null);
create table if not exists clicks_folded (click_id text primary key, day text not null, folded_at real not null);
create table if not exists profile_versions (reader_hash text primary key, version integer not null);
create index if not exists profile_versions_version on profile_versions (version);
create table if not exists subscriptions (
    reader_hash text not null, feed_id text not null, feed_url text not null, site_url text not null,
    title text not null, created_at real not null, primary key (reader_hash, feed_id));
create index if not exists subscriptions_reader_created on subscriptions (reader_hash, created_at);
"""

TOUCH_PROFILE_SQLITE = (
    "insert into profile_versions (reader_hash, version) "
    "values (?, (select coalesce(max(version), 0) + 1 from profile_versions)) "
    "on conflict (reader_hash) do update set version = excluded.version"
)
"""Move a reader's version past every other, inside the write transaction that changed the reader.

SQLite has one writer at a time, so versions are handed out in commit order: a replica that has
seen every version up to ``v`` asks only for ``version > v``."""
