"""robots.txt cached across ingest runs (RFC 9309 §2.4): reused within the TTL, fetched again after it,
a 5xx kept only briefly, and a corrupt cache object ignored. Real loopback publisher, real LocalStore."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from loopback import serve

from tasks.ingest.commit import commit_ingest
from tasks.ingest.plan import plan_due_feeds
from tasks.ingest.poll import poll_shard
from tasks.ingest.robots import load_robots_cache, save_robots_cache
from tasks.registry import import_publishers
from tasks.settings import IngestSettings
from transforms.robots import ROBOTS_MAX_BYTES
from transforms.robots_cache import (
    ROBOTS_UNREACHABLE_TTL_SECONDS,
    RobotsEntry,
    is_robots_entry_fresh,
    robots_cache_from_bytes,
    robots_cache_to_bytes,
)
from warehouse import layout
from warehouse.store import LocalStore

pytestmark = pytest.mark.integration

NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
TTL = 3600
ALLOW = b"User-agent: *\nDisallow: /private\n"
DENY_PAGES = b"User-agent: *\nDisallow: /page\n"


@dataclass
class Publisher:
    """A site whose feed has one new item per poll; counts robots.txt requests."""

    robots_status: int = 200
    robots_body: bytes = ALLOW
    robots_requests: int = 0
    polls: int = 0
    base: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (stdlib name)
                status, content_type, body = site.respond(self.path)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def respond(self, path: str) -> tuple[int, str, bytes]:
        with self.lock:
            if path == "/robots.txt":
                self.robots_requests += 1
                return self.robots_status, "text/plain", self.robots_body if self.robots_status == 200 else b""
            if path == "/feed":
                self.polls += 1
                n = self.polls
                return 200, "application/rss+xml", (
                    '<?xml version="1.0"?><rss version="2.0"><channel><title>Herald</title>'
                    f"<item><guid>item-{n}</guid><title>Story {n}</title><link>{self.base}/page/{n}</link></item>"
                    "</channel></rss>").encode()
            if path.startswith("/page/"):
                text = f"Story {path} said the minister, in a long article about the budget. " * 20
                return 200, "text/html; charset=utf-8", (
                    f"<html><head><title>Story {path}</title></head><body><article><p>{text}</p></article>"
                    "</body></html>").encode()
            return 404, "text/plain", b""


@pytest.fixture
def site() -> Iterator[Publisher]:
    publisher = Publisher()
    with serve(publisher.handler()) as base:
        publisher.base = base
        yield publisher


def _settings(ttl: int = TTL) -> IngestSettings:
    return IngestSettings(  # type: ignore[call-arg]
        allow_private_addresses=True, connect_timeout_seconds=2, read_timeout_seconds=2, total_timeout_seconds=5,
        embeddings=False, host_rate_per_second=50.0, host_burst=50.0, robots_ttl_seconds=ttl,
        min_interval_seconds=60, tier1_min_interval_seconds=60, max_interval_seconds=60,
    )


def _store(tmp_path: Path, site: Publisher) -> LocalStore:
    store = LocalStore(tmp_path / "store")
    csv = tmp_path / "p.csv"
    csv.write_text("publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section\n"
                   f"herald,Herald,herald.test,US,en,1,0.5,false,false,{site.base}/feed,world\n")
    import_publishers(store, csv)
    return store


def _run(store: LocalStore, now: datetime, settings: IngestSettings) -> tuple[dict[str, Any], list[str]]:
    """One ingest run as the flow does it: cached verdicts in, fetched verdicts written back by the commit.
    Returns the summary and the page error kinds."""
    cached = load_robots_cache(store, now, settings.robots_ttl_seconds)
    shards = [poll_shard(jobs, settings, now, robots_cache=cached) for jobs in plan_due_feeds(store, now, shards=1)]
    summary = commit_ingest(store, shards, now)
    assert summary["feeds_polled"] == 1, summary
    return summary, [e.error_kind for s in shards for e in s.page_errors]


def test_robots_txt_is_fetched_once_within_the_ttl_and_again_after_it(tmp_path: Path, site: Publisher) -> None:
    store, settings = _store(tmp_path, site), _settings()
    first, _ = _run(store, NOW, settings)
    second, _ = _run(store, NOW + timedelta(minutes=5), settings)
    assert (first["new_articles"], second["new_articles"]) == (1, 1)
    assert site.robots_requests == 1
    assert (first["robots_fetched"], second["robots_fetched"]) == (1, 0)

    third, _ = _run(store, NOW + timedelta(seconds=TTL + 60), settings)
    assert third["new_articles"] == 1
    assert site.robots_requests == 2
    assert set(load_robots_cache(store, NOW + timedelta(seconds=TTL + 60), TTL)) == {site.base}


def test_a_changed_robots_txt_takes_effect_after_the_ttl(tmp_path: Path, site: Publisher) -> None:
    store, settings = _store(tmp_path, site), _settings()
    _run(store, NOW, settings)
    site.robots_body = DENY_PAGES
    within, within_errors = _run(store, NOW + timedelta(minutes=30), settings)
    assert within["new_articles"] == 1 and within_errors == []  # the cached verdict still allows /page
    after, after_errors = _run(store, NOW + timedelta(seconds=TTL + 60), settings)
    assert after["new_articles"] == 0 and after_errors == ["robots_disallowed"]
    assert site.robots_requests == 2


def test_an_unreachable_robots_txt_is_retried_after_the_short_ttl(tmp_path: Path, site: Publisher) -> None:
    store, settings = _store(tmp_path, site), _settings()
    site.robots_status = 503
    _, errors = _run(store, NOW, settings)
    assert errors == ["robots_disallowed"]  # RFC 9309 §2.3.1.4: unreachable means disallow all
    _, errors = _run(store, NOW + timedelta(minutes=5), settings)
    assert errors == ["robots_disallowed"] and site.robots_requests == 1  # kept for a short while ...

    site.robots_status = 200
    later, errors = _run(store, NOW + timedelta(seconds=ROBOTS_UNREACHABLE_TTL_SECONDS + 60), settings)
    assert errors == [] and later["new_articles"] == 1  # ... not for the hour the TTL allows
    assert site.robots_requests == 2


def test_a_zero_ttl_fetches_robots_txt_on_every_run(tmp_path: Path, site: Publisher) -> None:
    store, settings = _store(tmp_path, site), _settings(ttl=0)
    _run(store, NOW, settings)
    _run(store, NOW + timedelta(minutes=1), settings)
    assert site.robots_requests == 2


def _gz(doc: object) -> bytes:
    return gzip.compress(json.dumps(doc).encode())


def _entry(**overrides: object) -> dict[str, object]:
    return {"verdict": "allow_all", "fetched_at": NOW.isoformat(), "body": "", **overrides}


CORRUPT = {
    "not_gzip": b"garbage",
    "truncated_gzip": _gz({"version": 1, "entries": {}})[:12],
    "not_json": gzip.compress(b"{not json"),
    "not_utf8": gzip.compress(b"\xff\xfe\x00"),
    "wrong_shape": _gz([1, 2, 3]),
    "unknown_version": _gz({"version": 99, "entries": {}}),
    "entries_not_a_dict": _gz({"version": 1, "entries": ["x"]}),
    "deeply_nested": gzip.compress(b"[" * 100_000 + b"]" * 100_000),
}


@pytest.mark.parametrize("data", list(CORRUPT.values()), ids=list(CORRUPT))
def test_a_corrupt_cache_object_is_ignored_and_replaced(tmp_path: Path, site: Publisher, data: bytes) -> None:
    store, settings = _store(tmp_path, site), _settings()
    store.put(layout.ROBOTS_CACHE_KEY, data)
    assert load_robots_cache(store, NOW, TTL) == {}
    summary, errors = _run(store, NOW, settings)
    assert summary["new_articles"] == 1 and errors == [] and site.robots_requests == 1
    assert set(load_robots_cache(store, NOW, TTL)) == {site.base}  # rewritten as a good object


@pytest.mark.parametrize("bad", [
    "not a dict", _entry(verdict="maybe"), _entry(fetched_at="yesterday"), _entry(fetched_at=1),
    _entry(fetched_at="2026-12-02T06:00:00"), _entry(body=7), _entry(body="\u20ac"),
    _entry(verdict="parse", body="x" * (ROBOTS_MAX_BYTES + 2)),
], ids=["not_dict", "verdict", "date_text", "date_number", "naive_date", "body_type", "body_not_bytes", "body_too_big"])
def test_a_bad_entry_is_left_out_and_its_robots_txt_fetched(tmp_path: Path, site: Publisher, bad: object) -> None:
    store, settings = _store(tmp_path, site), _settings()
    store.put(layout.ROBOTS_CACHE_KEY, _gz({"version": 1, "entries": {site.base: bad, "https://ok.example": _entry()}}))
    assert set(load_robots_cache(store, NOW, TTL)) == {"https://ok.example"}
    _run(store, NOW, settings)
    assert site.robots_requests == 1
    assert set(load_robots_cache(store, NOW, TTL)) == {site.base, "https://ok.example"}


def test_a_stale_or_future_entry_is_not_used() -> None:
    assert is_robots_entry_fresh(RobotsEntry("parse", NOW - timedelta(seconds=TTL - 1), ALLOW), NOW, TTL)
    assert not is_robots_entry_fresh(RobotsEntry("parse", NOW - timedelta(seconds=TTL), ALLOW), NOW, TTL)
    assert not is_robots_entry_fresh(RobotsEntry("allow_all", NOW + timedelta(seconds=1)), NOW, TTL)
    # RFC 9309 §2.4: never more than 24 hours, whatever TTL is asked for.
    assert not is_robots_entry_fresh(RobotsEntry("allow_all", NOW - timedelta(days=1)), NOW, 7 * 86_400)


def test_entries_round_trip_byte_for_byte() -> None:
    body = "User-agent: *\nDisallow: /café/\n".encode() + b"\xff\x00# cut mid-li"
    entries = {"http://[::1]:8080": RobotsEntry("parse", NOW, body),
               "https://xn--bcher-kva.example": RobotsEntry("disallow_all", NOW - timedelta(minutes=3)),
               'https://we"ird\\origin/\u2028': RobotsEntry("allow_all", NOW)}
    assert robots_cache_from_bytes(robots_cache_to_bytes(entries)) == entries


def test_load_keeps_only_fresh_entries(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    save_robots_cache(store, {
        "https://a.example": RobotsEntry("parse", NOW - timedelta(minutes=59), ALLOW),
        "https://b.example": RobotsEntry("parse", NOW - timedelta(minutes=61), ALLOW),
        "https://c.example": RobotsEntry("disallow_all", NOW - timedelta(minutes=9)),
        "https://d.example": RobotsEntry("disallow_all", NOW - timedelta(minutes=11)),
    }, NOW)
    assert set(load_robots_cache(store, NOW, TTL)) == {"https://a.example", "https://c.example"}
    assert set(load_robots_cache(store, NOW, 86_400 * 7)) == {"https://a.example", "https://b.example",
                                                              "https://c.example"}


class _RacingStore(LocalStore):
    """A LocalStore where another run writes the cache just before each of this run's first ``races`` puts."""

    def __init__(self, root: Path, races: int) -> None:
        super().__init__(root)
        self.races = races

    def put(self, key: str, data: bytes, **kwargs: Any) -> str:
        if key == layout.ROBOTS_CACHE_KEY and self.races > 0:
            self.races -= 1
            other = {f"https://other{self.races}.example": RobotsEntry("allow_all", NOW)}
            LocalStore.put(self, key, robots_cache_to_bytes(other), if_match=self.head(key),
                           if_none_match=self.head(key) is None)
        return super().put(key, data, **kwargs)


def test_a_concurrent_write_is_merged_not_lost(tmp_path: Path) -> None:
    store = _RacingStore(tmp_path / "store", races=1)
    assert save_robots_cache(store, {"https://mine.example": RobotsEntry("allow_all", NOW)}, NOW)
    assert set(load_robots_cache(store, NOW, TTL)) == {"https://mine.example", "https://other0.example"}


def test_losing_every_race_gives_up_without_raising(tmp_path: Path) -> None:
    store = _RacingStore(tmp_path / "store", races=10)
    assert not save_robots_cache(store, {"https://mine.example": RobotsEntry("allow_all", NOW)}, NOW)
    assert "https://mine.example" not in load_robots_cache(store, NOW, TTL)  # only costs a fetch next run
