"""The clicks log (serving/clicks.py): batched per replica (issue 19), one segment per interval,
nothing lost on SIGTERM, at most one interval on SIGKILL, every reader of the clicks log takes old
and new segments alike; and a store outage never holds up a reader's redirect (the serving
review's D8)."""

from __future__ import annotations

import http.client
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    FIRST_ARTICLE,
    HMAC_KEY,
    FlakyStore,
    clicks_in,
    flush_clicks,
    publish_fixture,
    settings_for,
)
from fastapi import FastAPI
from fastapi.testclient import TestClient

from serving.app import create_app
from serving.clicks import BufferedClickLog
from serving.signing import ClickPayload, Signer
from tasks.profiles import fold_clicks
from warehouse import layout
from warehouse.duck import connect
from warehouse.maintenance import compact_logs, is_compacted
from warehouse.schemas import CLICKS_SCHEMA
from warehouse.store import LocalStore, ObjectStore
from warehouse.tables import list_segments, read_segments, rows_to_table, write_segment

REPO = Path(__file__).resolve().parents[2]


def _signer() -> Signer:
    return Signer(HMAC_KEY.encode(), click_ttl_seconds=86400, session_ttl_seconds=86400)


def _clicks(n: int, reader_hash: str = "") -> list[ClickPayload]:
    s = _signer()
    return [s.verify_click(s.issue_click(article_id=f"a{i}", story_id="s1", url=f"https://pub.example/{i}",
                                         reader_hash=reader_hash, surface="top", position=i % 10))
            for i in range(n)]


def _ids_in(store: ObjectStore) -> list[str]:
    keys = list_segments(store, layout.CLICKS_PREFIX)
    return sorted(read_segments(store, keys, CLICKS_SCHEMA).column("click_id").to_pylist()) if keys else []


# -- the buffer, in process --------------------------------------------------------------------------


def test_one_segment_per_interval_per_day_and_a_reload_is_one_click(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    log = BufferedClickLog(store, flush_seconds=3600)
    clicks = _clicks(1000)
    midnight = datetime(2026, 3, 1, tzinfo=UTC)
    for i, click in enumerate(clicks):  # the interval straddles midnight UTC
        assert log.append(click, midnight + timedelta(seconds=i - 500))
    assert not log.append(clicks[0], midnight)  # a reload: the same click
    assert log.flush() == 1000
    keys = list_segments(store, layout.CLICKS_PREFIX)
    assert [layout.partition_day(k) for k in keys] == ["2026-02-28", "2026-03-01"]
    assert all(layout.is_click_batch(k) for k in keys)
    assert _ids_in(store) == sorted(c.click_id for c in clicks)
    assert not log.append(clicks[1], midnight)  # written already: still a reload
    assert log.flush() == 0 and len(list_segments(store, layout.CLICKS_PREFIX)) == 2


def test_the_flusher_writes_every_interval_without_a_request_waiting(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    log = BufferedClickLog(store, flush_seconds=0.1)
    log.start()
    try:
        for click in _clicks(5):
            log.append(click, datetime.now(UTC))
        deadline = time.monotonic() + 30
        while len(_ids_in(store)) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_ids_in(store)) == 5
    finally:
        log.close()


def test_a_redirect_never_waits_for_a_slow_store(tmp_path: Path) -> None:
    """The store hangs mid-flush; clicks arriving meanwhile are accepted at once and written after."""
    inner = LocalStore(tmp_path / "store")
    release = threading.Event()

    class HangingStore(FlakyStore):
        def put(self, key: str, data: bytes, **kwargs: Any) -> str:
            release.wait(30)
            return super().put(key, data, **kwargs)

    log = BufferedClickLog(HangingStore(inner), flush_seconds=3600)
    first, *rest = _clicks(4)
    log.append(first, datetime.now(UTC))
    flusher = threading.Thread(target=log.flush)
    flusher.start()
    time.sleep(0.2)  # the flush is now stuck in put
    for click in rest:
        assert log.append(click, datetime.now(UTC))  # returns while the store hangs
    assert log.buffered == 3
    release.set()
    flusher.join(30)
    assert log.flush() == 3
    assert len(_ids_in(inner)) == 4


# -- readers of the clicks log: old one-click segments and batches ------------------------------------


def _row(click_id: str, at: datetime, reader: str = "r1") -> dict[str, Any]:
    return {"click_id": click_id, "article_id": "a1", "story_id": "s1", "reader_hash": reader, "surface": "top",
            "position": 1, "clicked_at": at}


def test_sql_view_fold_and_compaction_read_old_and_batched_segments(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    day = datetime(2026, 1, 1, 10, tzinfo=UTC)
    for i in range(3):  # before batching: one object per click, named by its id
        write_segment(store, layout.click_segment_key(day, f"old{i}"),
                      rows_to_table([_row(f"old{i}", day + timedelta(minutes=i))], CLICKS_SCHEMA), CLICKS_SCHEMA)
    batch = [_row(f"new{i}", day + timedelta(hours=1, seconds=i)) for i in range(50)]
    batch.append(_row("old0", day + timedelta(hours=1)))  # a reload of an old click, on another replica
    table = rows_to_table(batch, CLICKS_SCHEMA)
    write_segment(store, layout.click_batch_key(day, "feed01"), table, CLICKS_SCHEMA)

    def view_count() -> int:
        con = connect(store)
        try:
            return int(con.execute("select count(*) from clicks").fetchall()[0][0])
        finally:
            con.close()

    assert view_count() == 53
    profiles = str(tmp_path / "p.sqlite3")
    assert fold_clicks(store, profiles, day + timedelta(days=1), 24.0)["clicks"] == 53
    report = compact_logs(store, day + timedelta(days=1), min_segments=2)
    assert report.compacted_segments == 4
    keys = list_segments(store, layout.CLICKS_PREFIX)
    assert len(keys) == 1 and is_compacted(keys[0])
    assert view_count() == 53
    assert fold_clicks(store, profiles, day + timedelta(days=1, minutes=1), 24.0) == \
        {"segments": 1, "clicks": 0, "readers": 0}


# -- a real replica, stopped by a signal -----------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_replica(tmp_path: Path, flush_seconds: float) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    env = {**os.environ,
           "NEWSROOM_WAREHOUSE_ROOT": str(tmp_path / "store"),
           "NEWSROOM_SERVING_HMAC_KEY": HMAC_KEY,
           "NEWSROOM_SERVING_PROFILES_PATH": str(tmp_path / "profiles.sqlite3"),
           "NEWSROOM_SERVING_CLICK_FLUSH_SECONDS": str(flush_seconds),
           "NEWSROOM_SERVING_REFRESH_SECONDS": "3600"}
    process = subprocess.Popen([sys.executable, "-m", "serving", "--port", str(port), "--log-level", "warning"],
                               cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/v1/editions")
            if conn.getresponse().status == 200:
                return process, port
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"replica did not start: {process.stderr.read().decode()[-2000:] if process.stderr else ''}")
        time.sleep(0.1)


def _follow(port: int, clicks: list[ClickPayload], tokens: dict[str, str]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for click in clicks:
        conn.request("GET", f"/r/{tokens[click.click_id]}")
        response = conn.getresponse()
        response.read()
        assert response.status == 302 and response.getheader("X-Click-Logged") == "buffered"
    conn.close()


def _minted(n: int, offset: int = 0) -> tuple[list[ClickPayload], dict[str, str]]:
    s = _signer()
    tokens = [s.issue_click(article_id=f"a{offset + i}", story_id="s1", url=f"https://pub.example/{offset + i}",
                            reader_hash="", surface="top", position=0) for i in range(n)]
    clicks = [s.verify_click(t) for t in tokens]
    return clicks, {c.click_id: t for c, t in zip(clicks, tokens, strict=True)}


@pytest.mark.slow
@pytest.mark.integration
def test_sigterm_writes_every_buffered_click(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    publish_fixture(store)
    process, port = _start_replica(tmp_path, flush_seconds=300)  # no interval passes: only shutdown writes
    try:
        clicks, tokens = _minted(200)
        _follow(port, clicks, tokens)
        assert _ids_in(store) == []  # all still in the replica's buffer
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after its shutdown
    finally:
        if process.poll() is None:
            process.kill()
    assert _ids_in(store) == sorted(c.click_id for c in clicks)
    assert len(list_segments(store, layout.CLICKS_PREFIX)) == 1


@pytest.mark.slow
@pytest.mark.integration
def test_sigkill_loses_at_most_the_last_interval(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    publish_fixture(store)
    interval = 0.5
    process, port = _start_replica(tmp_path, flush_seconds=interval)
    try:
        older, older_tokens = _minted(100)
        _follow(port, older, older_tokens)
        time.sleep(6 * interval)  # more than one interval ago (wide margin on a busy machine)
        newest, newest_tokens = _minted(100, offset=100)
        _follow(port, newest, newest_tokens)
        process.kill()  # SIGKILL: no shutdown runs
        process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
    written = set(_ids_in(store))
    assert {c.click_id for c in older} <= written  # clicks older than an interval are all in the store
    assert written - {c.click_id for c in older} <= {c.click_id for c in newest}


# -- D8: a store outage never holds up the reader; the buffer keeps the clicks until it is back ----


def _app_over_a_flaky_store(tmp_path: Path, **settings: object) -> tuple[LocalStore, FlakyStore, FastAPI]:
    """The fixture published to a local store, and an app over it through a store that can be made to fail."""
    inner = LocalStore(tmp_path / "store")
    publish_fixture(inner)
    flaky = FlakyStore(inner)
    return inner, flaky, create_app(flaky, settings_for(tmp_path, **settings))


def test_click_during_store_outage_redirects_at_once_and_is_written_when_the_store_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    inner, flaky, app = _app_over_a_flaky_store(tmp_path)
    with TestClient(app) as client:
        minted = client.post("/v1/click-token", json={"article_id": FIRST_ARTICLE}).json()
        flaky.failing = True
        response = client.get(minted["click_url"], follow_redirects=False)
        assert response.status_code == 302
        assert response.headers["location"] == "https://harbor-times.example/news/0196f1c2a3b40001-a0"
        assert response.headers["x-click-logged"] == "buffered"
        assert response.headers["cache-control"] == "no-store"
        with caplog.at_level(logging.WARNING, logger="serving.clicks"):
            assert flush_clicks(client) == 0  # the interval's write fails: the click stays buffered
        assert any("clicks_not_flushed clicks=1" in r.getMessage() for r in caplog.records)
        assert client.app.state.click_log.buffered == 1  # type: ignore[attr-defined]

        flaky.failing = False  # the store is back: the next interval writes it, once
        assert flush_clicks(client) == 1
        assert client.get(minted["click_url"], follow_redirects=False).headers["x-click-logged"] == "buffered"
    assert [r["article_id"] for r in clicks_in(inner)] == [FIRST_ARTICLE]


def test_click_beyond_a_full_buffer_still_redirects_and_logs_the_lost_click(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    inner, flaky, app = _app_over_a_flaky_store(tmp_path, click_buffer_max=1)
    with TestClient(app) as client:
        first, second = (client.post("/v1/click-token", json={"article_id": FIRST_ARTICLE}).json()
                         for _ in range(2))
        flaky.failing = True
        assert client.get(first["click_url"], follow_redirects=False).headers["x-click-logged"] == "buffered"
        flush_clicks(client)  # fails: the buffer stays full
        with caplog.at_level(logging.WARNING, logger="serving.clicks"):
            response = client.get(second["click_url"], follow_redirects=False)
        assert response.status_code == 302
        assert response.headers["location"] == "https://harbor-times.example/news/0196f1c2a3b40001-a0"
        assert response.headers["x-click-logged"] == "false"
        assert any("click_not_logged" in r.getMessage() and FIRST_ARTICLE in r.getMessage() for r in caplog.records)

        flaky.failing = False  # the store is back: the buffered click is written; the refused one was not kept
        assert flush_clicks(client) == 1
        assert client.get(second["click_url"], follow_redirects=False).headers["x-click-logged"] == "buffered"
    assert len(clicks_in(inner)) == 2  # the second link, followed again, is logged this time (at shutdown)
