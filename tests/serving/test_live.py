"""Live updates over Server-Sent Events (issue 30), with two replicas over one store.

Two real uvicorn servers share the store and the profile database (SQLite, WAL) as replicas do;
streams are read by httpx clients. Events come from what the pipeline writes: a new page version
(``publish_page``), a Breaking story (``tasks.live.record_live_breaking``, as rank writes it) and a
new search index version (``publish_search``, as rank publishes it).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import uvicorn
from conftest import HMAC_KEY, accept, page_payload, publish_fixture, publish_search
from fastapi import FastAPI

from serving.app import create_app
from serving.settings import ServingSettings
from tasks.live import record_live_breaking
from warehouse.snapshots import publish_page
from warehouse.store import LocalStore

pytestmark = pytest.mark.integration

SEAWALL = "0196f1c2a3b40001"
RAIL = "0196f1c2a3b40002"


@dataclass
class Replica:
    app: FastAPI
    server: uvicorn.Server
    thread: threading.Thread
    url: str

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)


def start_replica(store: LocalStore, tmp_path: Path, **extra: object) -> Replica:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    settings = ServingSettings(refresh_seconds=0.1, live_poll_seconds=0.1, profile_cache_poll_seconds=0.2,  # type: ignore[arg-type]
                               profiles_path=str(tmp_path / "profiles.sqlite3"), hmac_key=HMAC_KEY, **extra)
    app = create_app(store, settings)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    return Replica(app, server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}")


@dataclass
class Stream:
    """One SSE connection read on a thread: its events ``(event, id, data)`` and comment lines."""

    events: list[tuple[str, str, dict[str, object]]] = field(default_factory=list)
    comments: int = 0
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)

    def last_id(self) -> str:
        return self.events[-1][1]

    def wait_for(self, test: Callable[[list[tuple[str, str, dict[str, object]]]], bool], seconds: float = 10) -> None:
        deadline = time.monotonic() + seconds
        while not test(self.events):
            assert time.monotonic() < deadline, f"no such event: {self.events}"
            time.sleep(0.05)


def open_stream(url: str, headers: dict[str, str] | None = None) -> Stream:
    stream = Stream()

    def read() -> None:
        try:
            with httpx.stream("GET", url, headers=headers or {}, timeout=httpx.Timeout(5, read=30)) as response:
                stream.status, stream.headers = response.status_code, dict(response.headers)
                kind, event_id, data = "message", "", ""
                for line in response.iter_lines():
                    if line.startswith(":"):
                        stream.comments += 1
                    elif line.startswith("event: "):
                        kind = line[7:]
                    elif line.startswith("id: "):
                        event_id = line[4:]
                    elif line.startswith("data: "):
                        data = line[6:]
                    elif line == "" and data:
                        stream.events.append((kind, event_id, json.loads(data)))
                        kind, event_id, data = "message", "", ""
        except httpx.HTTPError:
            pass
        finally:
            stream.done.set()

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 10
    while stream.status is None and not stream.done.is_set():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return stream


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[LocalStore, Replica, Replica, dict[str, object]]]:
    store = LocalStore(tmp_path / "store")
    fixture = publish_fixture(store)
    publish_search(store, {k: v for k, v in fixture.stories_snapshot["stories"].items() if k != RAIL})
    a, b = start_replica(store, tmp_path), start_replica(store, tmp_path)
    try:
        yield store, a, b, fixture.stories_snapshot["stories"]
    finally:
        a.stop()
        b.stop()


def session(replica: Replica, reader: str) -> dict[str, str]:
    token = httpx.post(f"{replica.url}/v1/session", json={"reader": reader}).json()["token"]
    return {"Authorization": f"Bearer {token}"}


def new_front_page(store: LocalStore, minutes: int) -> int:
    now = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=minutes)
    from conftest import make_stories

    stories = make_stories(now)
    result = publish_page(store, "en-US", "top", page_payload("en-US", "top", stories[minutes % 3:], now), now=now,
                          validate=accept)
    assert result.published
    return result.version


def breaking(store: LocalStore, story_id: str, title: str) -> None:
    """As rank writes it: keyed by the cycle's instant (the live pages' newest ``published_at``)."""
    pointer = json.loads(store.get("pages/en-US/top/latest.json").data)
    at = datetime.strptime(pointer["published_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    record_live_breaking(store, [{"story_id": story_id, "breaking_since": pointer["published_at"],
                                  "editions": ["en-US"]}], at, {story_id: {"title": title, "language": "en"}})


def test_the_shared_stream_tells_every_reader_of_new_pages_and_nothing_personal(
        site: tuple[LocalStore, Replica, Replica, dict[str, object]]) -> None:
    store, a, _b, _ = site
    stream = open_stream(f"{a.url}/v1/live/en-US", {"Authorization": session(a, "alice")["Authorization"]})
    assert stream.status == 200 and stream.headers["content-type"].startswith("text/event-stream")
    assert stream.headers["cache-control"] == "no-store"
    time.sleep(0.3)
    version = new_front_page(store, 1)
    stream.wait_for(lambda es: any(e[0] == "pages" for e in es))
    kind, _, data = stream.events[0]
    assert data["edition"] == "en-US" and data["pages"] == [  # type: ignore[comparison-overlap]
        {"section": "top", "version": version, "as_of": data["pages"][0]["as_of"]}]  # type: ignore[index]
    breaking(store, SEAWALL, "Sea walls: a deal")
    time.sleep(1.0)
    assert [e[0] for e in stream.events] == ["pages"]  # a shared stream carries no alert, even with a session sent


def test_a_signed_in_reader_gets_breaking_and_keyword_alerts_and_a_reconnect_repeats_nothing(
        site: tuple[LocalStore, Replica, Replica, dict[str, object]]) -> None:
    store, a, b, stories = site
    alice = session(a, "alice")
    assert httpx.put(f"{a.url}/v1/me/alerts/breaking", headers=alice).json()["breaking_alerts"] is True
    assert httpx.post(f"{a.url}/v1/me/keywords", json={"query": "battery trains"}, headers=alice).status_code == 200
    bob = session(a, "bob")  # neither opted in nor following anything
    on_a = open_stream(f"{a.url}/v1/me/live?edition=en-US", alice)
    bobs = open_stream(f"{a.url}/v1/me/live?edition=en-US", bob)
    assert on_a.headers["cache-control"] == "private, no-store"
    time.sleep(0.3)
    breaking(store, SEAWALL, "Sea walls: a deal")
    on_a.wait_for(lambda es: any(e[0] == "breaking" for e in es))
    assert on_a.events[-1][2]["story_id"] == SEAWALL and on_a.events[-1][2]["title"] == "Sea walls: a deal"
    publish_search(store, stories)  # type: ignore[arg-type]  # the rail story enters the index
    on_a.wait_for(lambda es: any(e[0] == "keyword" for e in es))
    keyword = [e for e in on_a.events if e[0] == "keyword"]
    assert [(e[2]["keyword"], e[2]["story"]["story_id"]) for e in keyword] == [("battery trains", RAIL)]  # type: ignore[index]
    cursor = on_a.last_id()

    # Replica a goes away; the reader reconnects to b with the last id. Meanwhile: a new page,
    # another Breaking story.
    a.stop()
    version = new_front_page(store, 2)
    breaking(store, RAIL, "Rail: a record order")
    again = open_stream(f"{b.url}/v1/me/live?edition=en-US", {**alice, "Last-Event-ID": cursor})
    again.wait_for(lambda es: any(e[0] == "breaking" for e in es) and any(e[0] == "pages" for e in es))
    time.sleep(0.5)
    kinds = [(e[0], e[2].get("story_id") or e[2].get("pages")) for e in again.events]
    assert ("breaking", RAIL) in kinds and ("breaking", SEAWALL) not in kinds  # the missed one; never one sent
    assert not any(e[0] == "keyword" for e in again.events)
    pages = [e[2]["pages"] for e in again.events if e[0] == "pages"]
    assert pages == [[{"section": "top", "version": version, "as_of": pages[0][0]["as_of"]}]]  # type: ignore[index]
    # A second reconnect with the newest id is owed nothing.
    third = open_stream(f"{b.url}/v1/me/live?edition=en-US", {**alice, "Last-Event-ID": again.last_id()})
    time.sleep(0.8)
    assert third.events == []
    assert [e[0] for e in bobs.events if e[0] != "pages"] == []  # bob asked for no alert


def test_streams_are_capped_per_replica_and_send_heartbeats(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    publish_fixture(store)
    replica = start_replica(store, tmp_path, live_max_connections=1, live_heartbeat_seconds=0.2)
    try:
        first = open_stream(f"{replica.url}/v1/live/en-US")
        second = httpx.get(f"{replica.url}/v1/live/en-US", timeout=5)
        assert second.status_code == 503 and second.headers["retry-after"]
        first.wait_for(lambda _: first.comments >= 2, seconds=5)
        head = httpx.head(f"{replica.url}/v1/live/en-US", timeout=5)
        assert head.status_code == 200 and head.headers["content-type"].startswith("text/event-stream")
        assert httpx.get(f"{replica.url}/v1/me/live", timeout=5).status_code == 401
    finally:
        replica.stop()


def test_newsroom_serve_ends_open_streams_when_told_to_stop(tmp_path: Path) -> None:
    """SIGTERM with a live stream open: the stream ends at once (the reader reconnects elsewhere) and
    the server exits well inside its grace period, instead of waiting it out for the stream."""
    import os
    import signal
    import subprocess
    import sys

    store = LocalStore(tmp_path / "store")
    publish_fixture(store)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, NEWSROOM_WAREHOUSE_ROOT=str(tmp_path / "store"), NEWSROOM_SERVING_HMAC_KEY=HMAC_KEY,
               NEWSROOM_SERVING_PROFILES_PATH=str(tmp_path / "p.sqlite3"))
    server = subprocess.Popen([sys.executable, "-m", "serving", "--port", str(port), "--log-level", "warning"], env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and server.poll() is None, "the server did not start"
            time.sleep(0.2)
        stream = open_stream(f"http://127.0.0.1:{port}/v1/live/en-US")
        assert stream.status == 200 and not stream.done.is_set()
        started = time.monotonic()
        server.send_signal(signal.SIGTERM)
        # uvicorn shuts down cleanly (the clicks written), then raises the signal again: -SIGTERM.
        assert server.wait(30) in (0, -signal.SIGTERM)
        assert stream.done.wait(5)
        assert time.monotonic() - started < 4  # the grace period is 5 s: no stream held it up
    finally:
        if server.poll() is None:
            server.kill()
