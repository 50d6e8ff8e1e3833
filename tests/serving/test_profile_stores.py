"""Both profile stores, SQLite (embedded) and PostgreSQL (replicas), pass this one module (issue 19).

Every test in the first part takes ``profiles_at``: a SQLite file, then a fresh database on a real
PostgreSQL server the tests start (tests/pgserver.py). The tests at the end are PostgreSQL's own:
migrations, a replica whose database is down or restarts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import HMAC_KEY, publish_fixture
from fastapi.testclient import TestClient
from pgserver import run_postgres

from serving.app import create_app
from serving.errors import ProfileStoreError
from serving.profiles import MAX_READS, MAX_TERMS, ProfileStore, SqliteProfileStore, Subscription
from serving.profiles_postgres import PostgresProfileStore
from serving.settings import ServingSettings
from tasks.profiles import fold_clicks
from warehouse import layout
from warehouse.errors import ProfileDbError
from warehouse.profile_db import (
    TOUCH_PROFILE_POSTGRES,
    Migration,
    connect_postgres,
    migrate_profiles,
    open_fold_store,
    profile_migrations,
)
from warehouse.schemas import CLICKS_SCHEMA
from warehouse.store import LocalStore, ObjectStore
from warehouse.tables import rows_to_table, write_segment

TECH_STORY = "0196f1c2a3b40005"
TECH_ARTICLE = "0196f1c2a3b40005-a0"
WORLD_STORY = "0196f1c2a3b40001"
WORLD_ARTICLE = "0196f1c2a3b40001-a0"
HALF_LIFE = 72.0
PASSWORD = "hunter2-not-for-logs"


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"),
                        pytest.param("postgres", id="postgres", marks=pytest.mark.integration)])
def profiles_at(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a profile store lives, once per backend: a SQLite path, or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "profiles.sqlite3")
    url: str = request.getfixturevalue("postgres_url")
    return url


def open_store(profiles_at: str, *, timeout_seconds: float = 5.0) -> ProfileStore:
    if profiles_at.startswith("postgresql://"):
        return PostgresProfileStore(profiles_at, timeout_seconds=timeout_seconds)
    return SqliteProfileStore(profiles_at)


@pytest.fixture
def profiles(profiles_at: str) -> Iterator[ProfileStore]:
    store = open_store(profiles_at)
    yield store
    store.close()


def settings_at(profiles_at: str, tmp_path: Path) -> ServingSettings:
    if profiles_at.startswith("postgresql://"):
        return ServingSettings(refresh_seconds=3600, hmac_key=HMAC_KEY, profiles_url=profiles_at,  # type: ignore[arg-type]
                               profiles_path=str(tmp_path / "unused.sqlite3"))
    return ServingSettings(refresh_seconds=3600, hmac_key=HMAC_KEY, profiles_path=profiles_at)  # type: ignore[arg-type]


def sign_in(client: TestClient, reader: str) -> dict[str, str]:
    return {"Authorization": "Bearer " + client.post("/v1/session", json={"reader": reader}).json()["token"]}


# -- follows, hides, reads, weights ------------------------------------------------------------------


def test_follows_and_hides_round_trip_per_reader(profiles: ProfileStore) -> None:
    assert profiles.load("r1").is_empty
    profiles.follow("r1", "topic", "technology")
    profiles.follow("r1", "topic", "technology")  # twice is once
    profiles.follow("r1", "source", "tech-dispatch")
    profiles.hide("r1", "source", "valley-post")
    profiles.hide("r1", "story", WORLD_STORY)
    profiles.hide("r1", "story", WORLD_STORY)
    profiles.follow("r2", "topic", "sports")

    one = profiles.load("r1")
    assert (one.followed_topics, one.followed_sources) == ({"technology"}, {"tech-dispatch"})
    assert (one.hidden_sources, one.hidden_stories) == ({"valley-post"}, {WORLD_STORY})
    assert profiles.load("r2").followed_topics == {"sports"}

    profiles.unfollow("r1", "topic", "technology")
    profiles.unfollow("r1", "topic", "never-followed")
    assert profiles.load("r1").followed_topics == frozenset()
    assert profiles.load("r1").followed_sources == {"tech-dispatch"}


def test_keyword_follows_and_alert_opt_ins_round_trip(profiles: ProfileStore) -> None:
    """Issue 30: two new follow kinds; on PostgreSQL, migration 0003 lets the check constraint take them."""
    before = profiles.load("r1").version
    profiles.follow("r1", "keyword", 'sea wall -"opinion piece"')
    profiles.follow("r1", "alert", "breaking")
    one = profiles.load("r1")
    assert one.followed_keywords == {'sea wall -"opinion piece"'} and one.breaking_alerts
    assert not one.is_empty and one.version != before
    profiles.unfollow("r1", "alert", "breaking")
    assert not profiles.load("r1").breaking_alerts and profiles.load("r2").followed_keywords == frozenset()


def test_subscriptions_are_counted_and_limited_per_reader(profiles: ProfileStore) -> None:
    def sub(i: int, at: float) -> Subscription:
        return Subscription(f"p{i:018d}", f"https://s{i}.example/feed", f"https://s{i}.example/", f"Site {i}", at)

    now = 1_800_000_000.0
    assert profiles.subscription_counts("r1", now) == (0, 0)
    outcomes = [profiles.add_subscription("r1", sub(i, now - 100_000 * (3 - i)), per_day=1, in_all=4) for i in range(3)]
    assert outcomes == ["added"] * 3  # each more than a day after the one before: one a day is allowed
    assert [profiles.add_subscription("r1", sub(i, now + i), per_day=2, in_all=4) for i in (3, 4)] == \
        ["added", "over_total_limit"]
    assert profiles.add_subscription("r1", sub(3, now + 9), per_day=2, in_all=9) == "exists"
    assert profiles.add_subscription("r1", sub(5, now + 9), per_day=1, in_all=9) == "over_daily_limit"
    assert profiles.subscription_counts("r1", now + 10) == (1, 4)
    assert [s.feed_id for s in profiles.subscriptions("r1")][0] == sub(3, 0).feed_id  # newest first
    profiles.remove_subscription("r1", sub(3, 0).feed_id)
    assert profiles.subscription_counts("r1", now + 10) == (0, 3) and profiles.subscriptions("r2") == []


def test_reads_keep_the_latest_instant_and_only_the_newest(profiles: ProfileStore) -> None:
    profiles.record_read("r1", "s-a", 2000.0)
    profiles.record_read("r1", "s-a", 1000.0)  # an older read never moves it back
    assert profiles.load("r1").reads == {"s-a": 2000.0}
    for i in range(MAX_READS + 5):
        profiles.record_read("r1", f"s{i:04d}", 3000.0 + i)
    reads = profiles.load("r1").reads
    assert len(reads) == MAX_READS
    assert "s-a" not in reads and "s0004" not in reads and f"s{MAX_READS + 4:04d}" in reads
    assert profiles.load("r2").reads == {}


def test_only_the_strongest_terms_enter_the_profile(profiles_at: str, profiles: ProfileStore) -> None:
    fold = open_fold_store(profiles_at)
    try:
        with fold.transaction() as tx:
            rows = [("term", f"t{i:03d}", float(i), 1.0) for i in range(MAX_TERMS + 20)]
            rows += [("term", "tie-b", 21.0, 1.0), ("term", "tie-a", 21.0, 1.0)]  # ties at the cut go by key
            rows += [("topic", "technology", 0.5, 1.0), ("source", "tech-dispatch", 2.0, 1.0)]
            tx.replace_weights("r1", rows)
    finally:
        fold.close()
    profile = profiles.load("r1")
    assert len(profile.term_weights) == MAX_TERMS
    # The strongest: t083..t022 (62), then of the three at 21.0 the first two by key.
    assert min(profile.term_weights.values()) == 21.0
    assert {"t083", "t022", "t021", "tie-a"} <= set(profile.term_weights)
    assert "tie-b" not in profile.term_weights and "t020" not in profile.term_weights
    assert profile.topic_weights == {"technology": 0.5}
    assert profile.source_weights == {"tech-dispatch": 2.0}


def test_changed_since_names_every_reader_written_after_the_mark(profiles_at: str, profiles: ProfileStore) -> None:
    """What replicas poll (issue 29): every write and every fold moves the reader's version."""
    profiles.follow("r0", "topic", "world")  # before the mark: never listed
    start = profiles.changed_since(None)
    assert start.changed == ()
    profiles.follow("r1", "topic", "world")
    profiles.hide("r2", "story", WORLD_STORY)
    profiles.record_read("r3", WORLD_STORY, 1.0)
    profiles.unfollow("r4", "topic", "never-followed")  # a no-op still counts: harmless
    fold = open_fold_store(profiles_at)
    try:
        with fold.transaction() as tx:
            tx.replace_weights("r5", [("topic", "technology", 1.0, 1.0)])
    finally:
        fold.close()
    changes = profiles.changed_since(start.mark)
    latest = dict(changes.changed)
    assert set(latest) == {"r1", "r2", "r3", "r4", "r5"}
    for reader, version in latest.items():
        assert profiles.load(reader).version == version  # a load reads the version with the rows
    assert profiles.load("nobody").version == 0

    profiles.follow("r1", "source", "tech-dispatch")
    again = profiles.changed_since(changes.mark)
    assert "r1" in dict(again.changed) and dict(again.changed)["r1"] != latest["r1"]
    assert "r0" not in dict(again.changed)
    if not profiles_at.startswith("postgresql://"):  # PostgreSQL may list a recent change again: harmless
        assert profiles.changed_since(again.mark).changed == ()


# -- the profiles fold ---------------------------------------------------------------------------------


def _click(click_id: str, article_id: str, story_id: str, reader: str, at: datetime) -> dict[str, Any]:
    return {"click_id": click_id, "article_id": article_id, "story_id": story_id, "reader_hash": reader,
            "surface": "for_you", "position": 0, "clicked_at": at}


def _write_clicks(store: ObjectStore, key: str, clicks: list[dict[str, Any]]) -> None:
    assert write_segment(store, key, rows_to_table(clicks, CLICKS_SCHEMA), CLICKS_SCHEMA)


@pytest.fixture
def click_store(tmp_path: Path) -> ObjectStore:
    """A store with the fixture's live stories and three clicks by reader r1: one click in a segment of
    its own (the layout before batches), then two batches, one holding a reload of that click."""
    store = LocalStore(tmp_path / "store")
    now = datetime.now(UTC).replace(microsecond=0)
    publish_fixture(store, now=now)
    first = _click("c-legacy", TECH_ARTICLE, TECH_STORY, "r1", now - timedelta(minutes=3))
    _write_clicks(store, layout.click_segment_key(now, "c-legacy"), [first])
    _write_clicks(store, layout.click_batch_key(now, "aaaa"),
                  [_click("c-2", TECH_ARTICLE, TECH_STORY, "r1", now - timedelta(minutes=2))])
    _write_clicks(store, layout.click_batch_key(now, "bbbb"),  # another replica served a reload of the first
                  [dict(first, clicked_at=now - timedelta(minutes=1)),
                   _click("c-3", WORLD_ARTICLE, WORLD_STORY, "", now - timedelta(minutes=1))])
    return store


def test_fold_counts_each_click_once_across_old_segments_batches_and_reruns(
    profiles_at: str, profiles: ProfileStore, click_store: ObjectStore
) -> None:
    now = datetime.now(UTC)
    assert fold_clicks(click_store, profiles_at, now, HALF_LIFE) == {"segments": 3, "clicks": 3, "readers": 1}
    assert fold_clicks(click_store, profiles_at, now, HALF_LIFE) == {"segments": 0, "clicks": 0, "readers": 0}
    profile = profiles.load("r1")
    assert set(profile.topic_weights) == {"technology"}
    assert profile.source_weights == {"tech-dispatch": pytest.approx(2.0, rel=1e-3)}  # two clicks, not three
    assert profiles.load("").is_empty  # the anonymous click feeds no profile

    # A later batch repeating a folded click (a reload, much later, on a replica that forgot it).
    later = datetime.now(UTC)
    _write_clicks(click_store, layout.click_batch_key(later, "cccc"),
                  [_click("c-2", TECH_ARTICLE, TECH_STORY, "r1", later)])
    assert fold_clicks(click_store, profiles_at, now, HALF_LIFE) == {"segments": 1, "clicks": 0, "readers": 0}


def test_two_folds_at_once_count_each_click_once(
    profiles_at: str, profiles: ProfileStore, click_store: ObjectStore
) -> None:
    now = datetime.now(UTC)
    open_fold_store(profiles_at).close()  # the tables exist before the race
    results: list[dict[str, int] | Exception] = []
    start = threading.Barrier(2)

    def fold() -> None:
        start.wait()
        try:
            results.append(fold_clicks(click_store, profiles_at, now, HALF_LIFE))
        except ProfileDbError as e:  # lost the race: nothing written, the next run redoes it
            results.append(e)

    threads = [threading.Thread(target=fold) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    counted = sum(r["clicks"] for r in results if isinstance(r, dict))
    assert counted == 3
    assert profiles.load("r1").source_weights == {"tech-dispatch": pytest.approx(2.0, rel=1e-3)}


# -- through the app --------------------------------------------------------------------------------


def test_a_follow_made_through_one_app_is_seen_by_another(profiles_at: str, tmp_path: Path) -> None:
    """Two app instances (two replicas) over one profile store and one HMAC key.

    Each replica keeps the profiles it read in memory (issue 29): its own writes show on its next
    request, another replica's within its next poll of the store (1 s here; the bound is 5 s).
    """
    store = LocalStore(tmp_path / "store")
    publish_fixture(store)
    with TestClient(create_app(store, settings_at(profiles_at, tmp_path))) as a, \
            TestClient(create_app(store, settings_at(profiles_at, tmp_path))) as b:
        dana = sign_in(a, "dana")  # a session is a signed token: any replica with the key accepts it
        b.app.state.profiles.poll()  # type: ignore[attr-defined]  # as b's poller does when it starts
        before = b.get("/v1/feed", headers=dana).json()
        assert before["mode"] == "top_stories"
        assert b.app.state.profiles.stats()["held"] == 1  # type: ignore[attr-defined]  # b keeps dana's profile

        assert a.put("/v1/me/follows/topic/technology", headers=dana).status_code == 200
        assert a.get("/v1/feed", headers=dana).json()["mode"] == "for_you"  # a: on its next request
        assert _eventually(lambda: b.get("/v1/feed", headers=dana).json()["mode"] == "for_you", seconds=5)
        after = b.get("/v1/feed", headers=dana).json()
        order = [s["story_id"] for s in after["stories"]]
        assert order.index(TECH_STORY) < [s["story_id"] for s in before["stories"]].index(TECH_STORY)
        assert after["stories"][order.index(TECH_STORY)]["reason"] == "Because you follow Technology"

        assert b.post("/v1/me/hide", json={"story": TECH_STORY}, headers=dana).status_code == 200
        assert TECH_STORY not in {s["story_id"] for s in b.get("/v1/feed", headers=dana).json()["stories"]}
        assert _eventually(
            lambda: TECH_STORY not in {s["story_id"] for s in a.get("/v1/feed", headers=dana).json()["stories"]},
            seconds=5)
        assert a.get("/v1/me", headers=dana).json()["follows"]["topic"] == ["technology"]


# -- failures ----------------------------------------------------------------------------------------


def _failing_store(profiles_at: str, tmp_path: Path) -> ProfileStore:
    """A store whose every call fails: SQLite closed under it; PostgreSQL on a port nobody listens on."""
    if profiles_at.startswith("postgresql://"):
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        return PostgresProfileStore(f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/nowhere",
                                    timeout_seconds=0.5)
    store = SqliteProfileStore(profiles_at)
    store.close()
    return store


CALLS: dict[str, Callable[[ProfileStore], object]] = {
    "load": lambda p: p.load("r1"),
    "follow": lambda p: p.follow("r1", "topic", "world"),
    "unfollow": lambda p: p.unfollow("r1", "topic", "world"),
    "hide": lambda p: p.hide("r1", "story", WORLD_STORY),
    "record_read": lambda p: p.record_read("r1", WORLD_STORY, 1.0),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_a_failing_store_raises_profile_store_error(profiles_at: str, tmp_path: Path, call: str) -> None:
    store = _failing_store(profiles_at, tmp_path)
    try:
        with pytest.raises(ProfileStoreError) as caught:
            CALLS[call](store)
        assert PASSWORD not in str(caught.value)
    finally:
        if profiles_at.startswith("postgresql://"):
            store.close()


def test_a_failing_store_leaves_shared_pages_and_a_labelled_for_you(profiles_at: str, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    publish_fixture(store)
    failing = _failing_store(profiles_at, tmp_path)
    try:
        with TestClient(create_app(store, settings_at(profiles_at, tmp_path), profiles=failing)) as client:
            assert client.get("/v1/editions/en-US/top").status_code == 200
            dana = sign_in(client, "dana")
            feed = client.get("/v1/feed", headers=dana)
            assert feed.status_code == 200 and feed.json()["mode"] == "top_stories_fallback"
            follow = client.put("/v1/me/follows/topic/world", headers=dana)
            assert follow.status_code == 503 and follow.headers["retry-after"]
    finally:
        if profiles_at.startswith("postgresql://"):
            failing.close()


# -- PostgreSQL's own: migrations, a database down at start, a restart ----------------------------


def _columns(conn: Any) -> dict[str, list[str]]:
    rows = conn.execute("select table_name, column_name from information_schema.columns "
                        "where table_schema = 'public' and table_name <> 'profile_schema_migrations' "
                        "order by table_name, ordinal_position").fetchall()
    out: dict[str, list[str]] = {}
    for table, column in rows:
        out.setdefault(table, []).append(column)
    return out


@pytest.mark.integration
def test_postgres_holds_the_sqlite_tables_and_columns(postgres_url: str, tmp_path: Path) -> None:
    import sqlite3

    open_fold_store(str(tmp_path / "p.sqlite3")).close()
    with sqlite3.connect(tmp_path / "p.sqlite3") as db:
        tables = [t for (t,) in db.execute("select name from sqlite_master where type = 'table' order by name")]
        sqlite_columns = {t: [c[1] for c in db.execute(f"pragma table_info({t})")] for t in tables}
    conn = connect_postgres(postgres_url)
    try:
        assert _columns(conn) == sqlite_columns
    finally:
        conn.close()


@pytest.mark.integration
def test_two_replicas_migrating_at_once_apply_each_migration_once(postgres_url: str) -> None:
    import psycopg

    applied: list[list[int]] = []
    start = threading.Barrier(4)

    def replica() -> None:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            start.wait()
            applied.append(migrate_profiles(conn))

    threads = [threading.Thread(target=replica) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    versions = [m.version for m in profile_migrations()]
    assert sorted(applied) == [[], [], [], versions]  # one replica migrated; the others waited, then found it done
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("select version from profile_schema_migrations order by 1").fetchall() == \
            [(v,) for v in versions]


@pytest.mark.integration
def test_a_migration_edited_after_it_was_applied_is_refused(postgres_url: str) -> None:
    conn = connect_postgres(postgres_url)
    try:
        first = profile_migrations()[0]
        edited = Migration(first.version, first.name, first.sql + "\n-- edited\n", "0" * 64)
        with pytest.raises(ProfileDbError, match="changed after it was applied"):
            migrate_profiles(conn, [edited])
        later = Migration(9999, "later", "create table later_one (x int);", "1" * 64)
        assert migrate_profiles(conn, [first, later]) == [9999]
        assert migrate_profiles(conn, [first, later]) == []
    finally:
        conn.close()


@pytest.mark.integration
def test_a_write_that_commits_after_a_later_one_is_still_listed(postgres_url: str) -> None:
    """Transactions commit out of order: a poll must not step past one still open (migration 0002)."""
    import psycopg

    store = PostgresProfileStore(postgres_url)
    try:
        mark = store.changed_since(None).mark  # also migrates
        slow = psycopg.connect(postgres_url)  # a transaction: begun first, committed last
        try:
            slow.execute("insert into follows values ('late', 'topic', 'world', 0)")
            slow.execute(TOUCH_PROFILE_POSTGRES, {"r": "late"})  # its id is the smaller one
            store.follow("early", "topic", "world")  # begun and committed after it
            first = store.changed_since(mark)
            assert dict(first.changed).keys() == {"early"}
            slow.commit()
        finally:
            slow.close()
        second = store.changed_since(first.mark)
        assert "late" in dict(second.changed)  # a mark at the highest version seen would have missed it
        assert store.load("late").version == dict(second.changed)["late"]
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.integration
def test_a_replica_starts_without_its_database_and_rides_out_a_restart(tmp_path: Path) -> None:
    """Its own server: stopped while the app starts, started, then restarted under open connections."""
    store = LocalStore(tmp_path / "store")
    publish_fixture(store)
    with run_postgres() as server:
        url = server.create_database("profiles")
        server.stop()
        profiles = PostgresProfileStore(url, timeout_seconds=1.0)
        with TestClient(create_app(store, settings_at(url, tmp_path), profiles=profiles)) as client:
            assert client.get("/v1/editions/en-US/top").status_code == 200  # shared pages never wait on it
            dana = sign_in(client, "dana")
            assert client.get("/v1/feed", headers=dana).json()["mode"] == "top_stories_fallback"
            assert client.put("/v1/me/follows/topic/technology", headers=dana).status_code == 503

            server.start()  # back: the first call migrates, and the follow goes through
            assert _eventually(lambda: client.put("/v1/me/follows/topic/technology", headers=dana).status_code == 200)
            assert _reason(client.get("/v1/feed", headers=dana).json()) == "Because you follow Technology"

            server.stop()
            server.start()  # every pooled connection is now dead: no reader sees it
            for _ in range(3):
                feed = client.get("/v1/feed", headers=dana).json()
                assert feed["mode"] == "for_you" and _reason(feed) == "Because you follow Technology"
            assert client.put("/v1/me/follows/source/tech-dispatch", headers=dana).status_code == 200
        profiles.close()


def _reason(feed: dict[str, Any]) -> str:
    """The reason For you gives for the technology story."""
    return str(next(s["reason"] for s in feed["stories"] if s["story_id"] == TECH_STORY))


def _eventually(check: Callable[[], bool], seconds: float = 20.0) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


# -- settings ------------------------------------------------------------------------------------------


def test_one_url_switches_serving_and_the_profiles_fold_to_postgres(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from tasks.settings import ProfilesSettings

    url = f"postgresql://newsroom:{PASSWORD}@db.internal:5432/newsroom"
    monkeypatch.setenv("NEWSROOM_SERVING_PROFILES_URL", url)
    monkeypatch.setenv("NEWSROOM_SERVING_PROFILES_PATH", "var/p.sqlite3")
    serving = ServingSettings()
    assert serving.profiles_url is not None and serving.profiles_url.get_secret_value() == url
    assert PASSWORD not in repr(serving)
    assert ProfilesSettings().profiles_at == url
    monkeypatch.delenv("NEWSROOM_SERVING_PROFILES_URL")
    assert ProfilesSettings().profiles_at == "var/p.sqlite3"
    monkeypatch.setenv("NEWSROOM_SERVING_PROFILES_URL", "mysql://db/newsroom")
    with pytest.raises(ValidationError):
        ServingSettings()
    with pytest.raises(ValidationError):
        ProfilesSettings()
