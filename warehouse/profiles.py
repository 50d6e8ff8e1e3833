"""The reader-profile database's tables (SQLite), defined once.

Serving writes follows, hides and reads; the profiles flow writes ``weights`` and ``clicks_consumed``.
Both create the tables with this one definition.
"""

from __future__ import annotations

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
"""
