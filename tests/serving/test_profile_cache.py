"""A replica's profile cache (serving/profile_cache.py, issue 29): answers from memory, and never
longer than the store's versions allow.

Over real SQLite files; a second store on the same file stands for another replica or the profiles
fold. ``CountingStore`` counts the reads that reach the store and can hold one load in flight.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import HMAC_KEY, publish_fixture

from serving.errors import ProfileStoreError
from serving.profile_cache import STALE_POLLS, ProfileCache
from serving.profiles import FollowKind, HideKind, Profile, ProfileChanges, SqliteProfileStore
from warehouse.profile_db import open_fold_store
from warehouse.store import LocalStore

TECH_STORY = "0196f1c2a3b40005"


class CountingStore:
    """A ProfileStore around a real one: counts loads, and holds a load open while ``hold`` is set."""

    def __init__(self, inner: SqliteProfileStore) -> None:
        self.inner = inner
        self.loads = 0
        self.hold: threading.Event | None = None
        self.loading = threading.Event()

    def load(self, reader_hash: str) -> Profile:
        self.loads += 1
        profile = self.inner.load(reader_hash)
        if self.hold is not None:  # the rows are read; the answer is late
            self.loading.set()
            assert self.hold.wait(10)
        return profile

    def changed_since(self, mark: int | None) -> ProfileChanges:
        return self.inner.changed_since(mark)

    def follow(self, reader_hash: str, kind: FollowKind, target_id: str) -> None:
        self.inner.follow(reader_hash, kind, target_id)

    def unfollow(self, reader_hash: str, kind: FollowKind, target_id: str) -> None:
        self.inner.unfollow(reader_hash, kind, target_id)

    def hide(self, reader_hash: str, kind: HideKind, target_id: str) -> None:
        self.inner.hide(reader_hash, kind, target_id)

    def record_read(self, reader_hash: str, story_id: str, read_at: float) -> None:
        self.inner.record_read(reader_hash, story_id, read_at)

    def close(self) -> None:
        self.inner.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "profiles.sqlite3")


@pytest.fixture
def store(path: str) -> Iterator[CountingStore]:
    counting = CountingStore(SqliteProfileStore(path))
    yield counting
    counting.close()


@pytest.fixture
def other(path: str) -> Iterator[SqliteProfileStore]:
    """Another replica's store over the same database."""
    replica = SqliteProfileStore(path)
    yield replica
    replica.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache(store: CountingStore, clock: Clock) -> ProfileCache:
    cache = ProfileCache(store, size=100, poll_seconds=1.0, clock=clock)
    cache.poll()  # as the replica's poller does first
    return cache


def test_a_held_profile_is_answered_without_the_store(cache: ProfileCache, store: CountingStore) -> None:
    store.follow("r1", "topic", "world")
    first = cache.load("r1")
    assert first.followed_topics == {"world"} and store.loads == 1
    assert cache.cached("r1") is first
    assert cache.load("r1") is first and store.loads == 1
    assert cache.poll() == 1  # the follow, at the version the profile was read with: kept
    assert cache.poll() == 0
    assert cache.load("r1") is first and store.loads == 1


def test_this_replicas_write_shows_on_its_next_request(cache: ProfileCache, store: CountingStore) -> None:
    cache.load("r1")
    cache.follow("r1", "topic", "science")
    assert cache.cached("r1") is None
    assert cache.load("r1").followed_topics == {"science"}
    cache.hide("r1", "source", "valley-post")
    assert cache.load("r1").hidden_sources == {"valley-post"}
    cache.record_read("r1", "s1", 5.0)
    assert cache.load("r1").reads == {"s1": 5.0}
    cache.unfollow("r1", "topic", "science")
    assert cache.load("r1").followed_topics == frozenset()


def test_another_replicas_write_shows_after_the_next_poll(
    cache: ProfileCache, store: CountingStore, other: SqliteProfileStore
) -> None:
    cache.load("r1")
    cache.load("r2")
    other.follow("r1", "topic", "sports")
    assert cache.load("r1").followed_topics == frozenset()  # until the poll: the bound is one interval
    assert cache.poll() == 1
    assert cache.cached("r1") is None and cache.cached("r2") is not None  # only the reader who changed
    assert cache.load("r1").followed_topics == {"sports"}


def test_a_fold_of_weights_moves_the_readers_version(cache: ProfileCache, path: str) -> None:
    assert cache.load("r1").topic_weights == {}
    fold = open_fold_store(path)
    try:
        with fold.transaction() as tx:
            tx.replace_weights("r1", [("topic", "technology", 1.0, 1.0)])
    finally:
        fold.close()
    cache.poll()
    assert cache.load("r1").topic_weights == {"technology": 1.0}


def test_a_load_under_way_when_this_replica_writes_is_not_kept(cache: ProfileCache, store: CountingStore) -> None:
    hold = threading.Event()
    store.hold, got = hold, []
    reader = threading.Thread(target=lambda: got.append(cache.load("r1")))
    reader.start()
    assert store.loading.wait(10)  # the load has read the old rows ...
    cache.follow("r1", "topic", "world")  # ... when the write lands
    hold.set()
    reader.join(10)
    store.hold = None
    assert got[0].followed_topics == frozenset()  # that request saw the profile before the write
    assert cache.cached("r1") is None  # but it is not kept: the next request reads the follow
    assert cache.load("r1").followed_topics == {"world"}


def test_a_load_overlapping_a_poll_that_names_its_reader_is_not_kept(
    cache: ProfileCache, store: CountingStore, other: SqliteProfileStore
) -> None:
    hold = threading.Event()
    store.hold, got = hold, []
    reader = threading.Thread(target=lambda: got.append(cache.load("r1")))
    reader.start()
    assert store.loading.wait(10)
    other.follow("r1", "topic", "health")  # another replica writes after the rows were read
    assert cache.poll() == 1  # the poll names r1 before the load is kept
    hold.set()
    reader.join(10)
    store.hold = None
    assert got[0].followed_topics == frozenset()
    assert cache.cached("r1") is None
    assert cache.load("r1").followed_topics == {"health"}


def test_without_a_recent_poll_every_read_goes_to_the_store(
    cache: ProfileCache, store: CountingStore, other: SqliteProfileStore, clock: Clock
) -> None:
    cache.load("r1")
    other.follow("r1", "topic", "culture")  # a change this replica cannot learn of: its polls fail
    clock.now += STALE_POLLS * cache.poll_seconds + 0.1
    assert cache.cached("r1") is None
    assert cache.load("r1").followed_topics == {"culture"} and store.loads == 2
    cache.poll()
    assert cache.load("r1").followed_topics == {"culture"} and store.loads == 2  # fresh again: answered from memory


def test_a_failing_poll_raises_and_then_the_cache_stands_aside(tmp_path: Path, clock: Clock) -> None:
    broken = SqliteProfileStore(tmp_path / "p.sqlite3")
    cache = ProfileCache(broken, size=10, poll_seconds=1.0, clock=clock)
    cache.poll()
    cache.load("r1")
    broken.close()
    with pytest.raises(ProfileStoreError):
        cache.poll()
    assert cache.cached("r1") is not None  # within the bound
    clock.now += STALE_POLLS + 0.1
    assert cache.cached("r1") is None
    with pytest.raises(ProfileStoreError):
        cache.load("r1")


def test_nothing_is_kept_before_the_first_poll_and_the_oldest_go_first(store: CountingStore, clock: Clock) -> None:
    cache = ProfileCache(store, size=2, poll_seconds=1.0, clock=clock)
    cache.load("r1")
    assert cache.stats()["held"] == 0  # no mark yet that a later poll would cover it from
    cache.poll()
    for reader in ("r1", "r2", "r1", "r3"):
        cache.load(reader)
    assert cache.cached("r2") is None and cache.cached("r1") is not None and cache.cached("r3") is not None


def test_size_zero_is_no_cache(store: CountingStore, clock: Clock) -> None:
    cache = ProfileCache(store, size=0, poll_seconds=1.0, clock=clock)
    cache.poll()
    cache.load("r1")
    cache.load("r1")
    assert store.loads == 2 and cache.cached("r1") is None
    cache.start()  # nothing to poll for
    assert cache.stats()["held"] == 0
    cache.stop()


# -- two replicas, two processes, one PostgreSQL ---------------------------------------------------------


def _start_replica(tmp_path: Path, profiles_url: str, name: str) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {**os.environ,
           "NEWSROOM_WAREHOUSE_ROOT": str(tmp_path / "store"),
           "NEWSROOM_SERVING_HMAC_KEY": HMAC_KEY,
           "NEWSROOM_SERVING_PROFILES_URL": profiles_url,
           "NEWSROOM_SERVING_REFRESH_SECONDS": "3600"}
    env.pop("NEWSROOM_SERVING_PROFILE_CACHE_POLL_SECONDS", None)  # the default interval
    (tmp_path / name).mkdir()
    process = subprocess.Popen([sys.executable, "-m", "serving", "--port", str(port), "--log-level", "warning"],
                               cwd=tmp_path / name, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/editions", timeout=2).status_code == 200:
                return process, port
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"replica did not start: {process.stderr.read().decode()[-2000:] if process.stderr else ''}")
        time.sleep(0.1)


def _feed(port: int, headers: dict[str, str]) -> dict[str, Any]:
    response = httpx.get(f"http://127.0.0.1:{port}/v1/feed", headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _seconds_until(check: Callable[[], bool], limit: float) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < limit, f"not within {limit} s"
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.mark.slow
@pytest.mark.integration
def test_a_follow_on_one_replica_shapes_for_you_on_another_within_5_seconds(tmp_path: Path, postgres_url: str) -> None:
    store = LocalStore(tmp_path / "store")
    publish_fixture(store)
    a, port_a = _start_replica(tmp_path, postgres_url, "a")
    b, port_b = _start_replica(tmp_path, postgres_url, "b")
    try:
        token = httpx.post(f"http://127.0.0.1:{port_a}/v1/session", json={"reader": "dana"}, timeout=10).json()["token"]
        dana = {"Authorization": f"Bearer {token}"}
        for _ in range(3):  # b reads dana's (empty) profile, and keeps it
            assert _feed(port_b, dana)["mode"] == "top_stories"
            time.sleep(0.2)

        follow = httpx.put(f"http://127.0.0.1:{port_a}/v1/me/follows/topic/technology", headers=dana, timeout=10)
        assert follow.status_code == 200
        assert _reason(_feed(port_a, dana)) == "Because you follow Technology"  # a: its very next request
        waited = _seconds_until(lambda: _feed(port_b, dana)["mode"] == "for_you", limit=5.0)
        assert _reason(_feed(port_b, dana)) == "Because you follow Technology"

        # And back: a hide on b leaves a's For you within the bound too.
        assert httpx.post(f"http://127.0.0.1:{port_b}/v1/me/hide", json={"story": TECH_STORY}, headers=dana,
                          timeout=10).status_code == 200
        assert TECH_STORY not in {s["story_id"] for s in _feed(port_b, dana)["stories"]}
        waited_back = _seconds_until(
            lambda: TECH_STORY not in {s["story_id"] for s in _feed(port_a, dana)["stories"]}, limit=5.0)
        print(f"seen on the other replica after {waited:.2f} s and {waited_back:.2f} s")  # noqa: T201
    finally:
        for process in (a, b):
            process.terminate()
            process.wait(30)


def _reason(feed: dict[str, Any]) -> str:
    return str(next(s["reason"] for s in feed["stories"] if s["story_id"] == TECH_STORY))
