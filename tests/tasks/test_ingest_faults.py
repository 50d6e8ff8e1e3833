"""The fault matrix: each replay fault against the real ingest functions, over loopback HTTP.

For every fault: a readable error (or warning) in the feed state and the ingest summary, the next
interval the fault calls for, no effect on the other feeds of the cycle, and no lost item once the
fault clears: what was published during the fault is ingested in the cycle after it clears.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from corpus_paths import CLUSTERING_CORPORA

from replay.site import RETRY_AFTER_429_SECONDS, RETRY_AFTER_503_SECONDS, Fault, ReplaySite
from tasks.http import make_client
from tasks.ingest.commit import commit_ingest
from tasks.ingest.plan import FeedJob, load_feed_states, plan_due_feeds
from tasks.ingest.poll import poll_feed, poll_shard
from tasks.registry import feed_id_for, import_publishers
from tasks.replay_control import download_publishers_csv
from tasks.settings import IngestSettings
from transforms.polling import PARK_AFTER_FAILURES, PARK_REPROBE_SECONDS
from transforms.records import FeedState
from warehouse.store import LocalStore, ObjectStore
from warehouse.tables import parquet_bytes_to_table

pytestmark = pytest.mark.integration

CORPORA = CLUSTERING_CORPORA
START = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)

# fault -> (error kind recorded, is it a hard error?)
EXPECTED: dict[Fault, tuple[str, bool]] = {
    "timeout": ("timeout", True),
    "slow_drip": ("timeout", True),
    "http_500": ("http_status", True),
    "http_503": ("http_status", True),
    "http_429": ("http_status", True),
    "redirect_loop": ("too_many_redirects", True),
    "gzip_bomb": ("too_large", True),
    "billion_laughs": ("rejected", True),
    "huge_feed": ("too_large", True),
    "wrong_charset": ("malformed", False),  # usable: items ingested, problem recorded
    "garbage_dates": ("bad_dates", False),
}


def _settings() -> IngestSettings:
    return IngestSettings(  # type: ignore[call-arg]
        # The hang (30 s) and the drip (80 bytes/s) outlast these by far; a healthy fetch on a
        # loaded 2-core machine must not (the total is a deadline for the whole fetch).
        allow_private_addresses=True, connect_timeout_seconds=3.0, read_timeout_seconds=3.0,
        total_timeout_seconds=10.0, host_rate_per_second=50.0, host_burst=50.0, max_workers=16,
    )


def _cycle(store: ObjectStore, settings: IngestSettings, now: datetime) -> dict[str, Any]:
    shards = [poll_shard(jobs, settings, now) for jobs in plan_due_feeds(store, now, shards=4)]
    return commit_ingest(store, shards, now)


def _ingested_urls(store: ObjectStore) -> dict[str, set[str]]:
    by_publisher: dict[str, set[str]] = {}
    for key in store.list("log/articles/"):
        for row in parquet_bytes_to_table(store.get(key).data).to_pylist():
            by_publisher.setdefault(row["publisher_id"], set()).add(row["canonical_url"])
    return by_publisher


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[ReplaySite, ObjectStore]]:
    site = ReplaySite.from_corpora(CORPORA, seed=7, start=START, limit=300, span_hours=1.0)
    site.start(port=0)
    store = LocalStore(tmp_path / "store")
    import_publishers(store, download_publishers_csv(site.control_url, tmp_path / "publishers.csv"))
    try:
        yield site, store
    finally:
        site.stop()


@dataclass(frozen=True)
class MatrixRun:
    """Three cycles over the whole site: healthy, one fault per publisher, the faults cleared."""

    site: ReplaySite
    faulted: dict[str, Fault]
    feed_of: dict[str, str]
    t2: datetime
    during: dict[str, FeedState]
    """States after the cycle with the faults on, by publisher."""
    summary: dict[str, Any]
    reported: dict[str, dict[str, Any]]
    ingested_during: dict[str, set[str]]
    published_during_fault: dict[str, set[str]]
    after: dict[str, FeedState]
    after_summary: dict[str, Any]
    ingested_after: dict[str, set[str]]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MatrixRun]:
    """One run of every fault at once, each on its own publisher, so the cost is three cycles; each
    fault's checks are their own test, so one failing hides none of the others."""
    tmp_path = tmp_path_factory.mktemp("matrix")
    site = ReplaySite.from_corpora(CORPORA, seed=7, start=START, limit=300, span_hours=1.0)
    site.start(port=0)
    try:
        store = LocalStore(tmp_path / "store")
        import_publishers(store, download_publishers_csv(site.control_url, tmp_path / "publishers.csv"))
        settings = _settings()
        english = [p for p in site.publishers if p.language == "en"]
        assert len(english) >= len(EXPECTED)
        faulted = {p.publisher_id: fault for p, fault in zip(english, EXPECTED, strict=False)}
        feed_of = {p.publisher_id: feed_id_for(p.rss_url) for p in site.publishers}

        # Cycle 1: everything healthy.
        t1 = START + timedelta(minutes=20)
        site.set_clock(t1)
        first = _cycle(store, settings, t1)
        assert first["feeds_polled"] == len(site.publishers) and not first["errors"], first

        # Cycle 2: the faults are on while the publishers keep publishing.
        site.set_faults(faulted)  # type: ignore[arg-type]
        states, _ = load_feed_states(store)
        t2 = max(s.next_poll_at for s in states.values() if s.next_poll_at is not None)
        site.set_clock(t2)
        summary = _cycle(store, settings, t2)
        during, _ = load_feed_states(store)
        ingested_during = _ingested_urls(store)
        published = {pid: {a.url for a in site.released(pid, t2) if a.published_at > t1} for pid in faulted}

        # The faults clear; at the next due time every item published during the fault is ingested.
        site.set_faults(dict.fromkeys(faulted))
        hard = [pid for pid, fault in faulted.items() if EXPECTED[fault][1]]
        t3 = max(t for pid in hard if (t := during[feed_of[pid]].next_poll_at) is not None)
        site.set_clock(t3)
        after_summary = _cycle(store, settings, t3)
        after, _ = load_feed_states(store)
        yield MatrixRun(site, faulted, feed_of, t2, {pid: during[f] for pid, f in feed_of.items()}, summary,
                        {f["feed_id"]: f for f in summary["failures"]}, ingested_during, published,
                        {pid: after[f] for pid, f in feed_of.items()}, after_summary, _ingested_urls(store))
    finally:
        site.stop()


def _publisher_of(run: MatrixRun, fault: Fault) -> str:
    return next(pid for pid, f in run.faulted.items() if f == fault)


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(EXPECTED))
def test_a_fault_is_recorded_by_name_and_sets_the_next_poll(matrix: MatrixRun, fault: Fault) -> None:
    """The feed state and the run report name the fault; a hard error backs off (Retry-After
    honoured), a usable feed with a flaw keeps its normal interval."""
    kind, is_error = EXPECTED[fault]
    pid = _publisher_of(matrix, fault)
    state, report = matrix.during[pid], matrix.reported[matrix.feed_of[pid]]
    assert state.last_error_kind == kind, state.last_error
    assert state.last_error and report["kind"] == kind and report["is_error"] is is_error
    floor = 60 if next(p for p in matrix.site.publishers if p.publisher_id == pid).tier == 1 else 300
    if is_error:
        expected_interval = {"http_429": max(2 * floor, RETRY_AFTER_429_SECONDS),
                             "http_503": max(2 * floor, RETRY_AFTER_503_SECONDS)}.get(fault, 2 * floor)
        assert (state.error_streak, state.interval_seconds) == (1, expected_interval), state
        assert state.next_poll_at == matrix.t2 + timedelta(seconds=expected_interval)
    else:
        assert state.error_streak == 0 and state.poll_reason in ("rate", "new_items", "ttl"), state
    if fault == "http_429":
        assert "HTTP 429 (Retry-After: 600)" in report["error"]


@pytest.mark.slow
@pytest.mark.parametrize("fault", [f for f, (_, is_error) in EXPECTED.items() if is_error])
def test_what_a_fault_hid_is_ingested_once_it_clears(matrix: MatrixRun, fault: Fault) -> None:
    pid = _publisher_of(matrix, fault)
    published = matrix.published_during_fault[pid]
    assert published, "the publisher published during the fault"
    assert not published & matrix.ingested_during.get(pid, set())
    assert published <= matrix.ingested_after.get(pid, set()), published - matrix.ingested_after.get(pid, set())
    assert matrix.after[pid].error_streak == 0


@pytest.mark.slow
def test_the_other_feeds_of_a_faulty_cycle_are_untouched(matrix: MatrixRun) -> None:
    for publisher in matrix.site.publishers:
        pid = publisher.publisher_id
        if matrix.faulted.get(pid) in (None, "wrong_charset", "garbage_dates"):
            assert matrix.during[pid].error_streak == 0, pid
            assert matrix.ingested_during.get(pid, set()) == {a.url for a in matrix.site.released(pid, matrix.t2)}, pid


@pytest.mark.slow
def test_a_faulty_cycle_counts_each_fault_once(matrix: MatrixRun) -> None:
    hard = sum(1 for is_error in (e for _, e in EXPECTED.values()) if is_error)
    assert matrix.summary["errors"].get("http_status") == 3
    assert matrix.summary["warnings"] == {"bad_dates": 1, "malformed": 1}
    assert sum(matrix.summary["errors"].values()) == hard, matrix.summary["errors"]
    assert not matrix.after_summary["errors"], matrix.after_summary["errors"]


def test_repeated_failures_park_the_feed_and_a_success_unparks_it(world: tuple[ReplaySite, ObjectStore]) -> None:
    site, _ = world
    settings = _settings()
    publisher = site.publishers[0]
    site.set_clock(START + timedelta(minutes=30))
    site.set_faults({publisher.publisher_id: "http_500"})
    state = FeedState(feed_id_for(publisher.rss_url), error_streak=PARK_AFTER_FAILURES - 1)
    job = FeedJob(state.feed_id, publisher.rss_url, publisher.publisher_id, "en", "US", "", state, publisher.tier)
    now = START + timedelta(minutes=30)
    with make_client(settings) as client:
        outcome = poll_feed(job, client, settings, now)
        parked, report = outcome.state, outcome.report
        assert parked.is_parked and report.is_parked and report.poll_reason == "parked"
        assert parked.parked_reason == f"{PARK_AFTER_FAILURES} failures in a row"
        assert parked.interval_seconds == PARK_REPROBE_SECONDS
        site.set_faults({publisher.publisher_id: None})
        later = now + timedelta(seconds=PARK_REPROBE_SECONDS)
        site.set_clock(later)
        job = FeedJob(job.feed_id, job.url, job.publisher_id, "en", "US", "", parked, publisher.tier)
        outcome = poll_feed(job, client, settings, later)
        healthy, items, report = outcome.state, outcome.new_items, outcome.report
    assert not healthy.is_parked and healthy.error_streak == 0 and items and report.error_kind is None
    assert healthy.last_error_kind == "http_status"  # the history stays readable


def test_pages_failing_for_now_are_taken_again_on_the_next_poll(world: tuple[ReplaySite, ObjectStore]) -> None:
    site, store = world
    settings = _settings()
    publisher = max(site.publishers, key=lambda p: len(site.released(p.publisher_id, START + timedelta(minutes=30))))
    site.set_faults({publisher.publisher_id: "pages_503"})
    t1 = START + timedelta(minutes=30)
    site.set_clock(t1)
    summary = _cycle(store, settings, t1)
    released = {a.url for a in site.released(publisher.publisher_id, t1)}
    # A few 503s trip the host: its other pages are skipped this run rather than crawled at a crawl.
    assert released and sum(summary["errors"].values()) == len(released), summary["errors"]
    assert set(summary["errors"]) <= {"page_http_status", "page_host_backoff"}
    assert not _ingested_urls(store).get(publisher.publisher_id)
    state = load_feed_states(store)[0][feed_id_for(publisher.rss_url)]
    assert state.etag is None and not state.recent_guids, "a 304 must not hide the items to retry"

    site.set_faults({publisher.publisher_id: None})
    t2 = state.next_poll_at
    site.set_clock(t2)
    after = _cycle(store, settings, t2)
    assert not after["errors"], after["errors"]
    assert released <= _ingested_urls(store)[publisher.publisher_id]


def test_a_bug_on_one_feed_is_recorded_and_the_shard_goes_on(world: tuple[ReplaySite, ObjectStore]) -> None:
    site, _ = world
    site.set_clock(START + timedelta(minutes=40))
    jobs = []
    for p in site.publishers[:3]:
        state = FeedState(feed_id_for(p.rss_url))
        jobs.append(FeedJob(state.feed_id, p.rss_url, p.publisher_id, p.language, p.region, "", state, p.tier))
    broken = replace(jobs[0].state, recent_guids=5)  # state no code path should ever produce
    jobs[0] = FeedJob(jobs[0].feed_id, jobs[0].url, jobs[0].publisher_id, "en", "US", "", broken, 1)
    result = poll_shard(jobs, _settings(), START + timedelta(minutes=40))
    by_feed = {r.feed_id: r for r in result.reports}
    assert by_feed[jobs[0].feed_id].error_kind == "internal"
    assert "TypeError" in (by_feed[jobs[0].feed_id].error or "")
    assert all(by_feed[j.feed_id].error_kind is None for j in jobs[1:])
    assert result.articles


class _RotatingEtag(BaseHTTPRequestHandler):
    """A feed whose ETag changes on every request though its items never do."""

    requests: list[dict[str, str]] = []
    BODY = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>T</title>'
            b"<item><guid>a</guid><title>A</title><link>http://127.0.0.1/a</link></item></channel></rss>")

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        _RotatingEtag.requests.append({k.lower(): v for k, v in self.headers.items()})
        self.send_response(200)
        self.send_header("ETag", f'"{len(_RotatingEtag.requests)}"')
        self.send_header("Content-Length", str(len(self.BODY)))
        self.end_headers()
        self.wfile.write(self.BODY)


def test_validators_that_change_on_every_poll_stop_being_sent() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RotatingEtag)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings = _settings()
    url = f"http://127.0.0.1:{server.server_address[1]}/feed"
    state = FeedState("f")
    now = START
    try:
        with make_client(settings) as client:
            for _ in range(5):
                job = FeedJob("f", url, "p", "en", "US", "", state, 1)
                state = poll_feed(job, client, settings, now).state
                now += timedelta(minutes=5)
    finally:
        server.shutdown()
    sent = ["if-none-match" in h for h in _RotatingEtag.requests]
    assert sent == [False, True, True, True, False]
    assert state.is_validators_useless


@pytest.mark.slow
def test_a_fault_through_the_prefect_flow(prefect_harness: None, tmp_path: Path) -> None:
    """The flow's summary carries the readable failure; the other feeds of the run are untouched."""
    from pipeline_harness import local_env, pipeline_env

    from flows.ingest import ingest_feeds

    site = ReplaySite.from_corpora(CORPORA, seed=7, start=START, limit=120, span_hours=1.0)
    site.start(port=0)
    try:
        with pipeline_env(local_env(tmp_path / "store")) as store:
            import_publishers(store, download_publishers_csv(site.control_url, tmp_path / "publishers.csv"))
            throttled = site.publishers[0]
            site.set_faults({throttled.publisher_id: "http_429"})
            now = START + timedelta(minutes=40)
            site.set_clock(now)
            summary = ingest_feeds(now=now.isoformat())
    finally:
        site.stop()
    assert summary["feeds_polled"] == len(site.publishers) and summary["errors"] == {"http_status": 1}
    (failure,) = summary["failures"]
    assert failure["url"] == throttled.rss_url and failure["error"].startswith("HTTP 429 (Retry-After: 600)")
    assert failure["interval_seconds"] == RETRY_AFTER_429_SECONDS and failure["reason"] == "retry_after"
    assert summary["new_articles"] > 0


def test_a_state_file_from_before_the_new_columns_still_loads(tmp_path: Path) -> None:
    import pyarrow as pa

    from warehouse import layout
    from warehouse.tables import table_to_parquet_bytes

    store = LocalStore(tmp_path / "store")
    old = pa.table({"feed_id": ["f"], "next_poll_at": pa.array([START], pa.timestamp("us", tz="UTC")),
                    "etag": ['"v1"'], "recent_guids": [["a", "b"]], "error_streak": pa.array([2], pa.int16())})
    store.put(layout.FEED_STATE_KEY, table_to_parquet_bytes(old))
    states, etag = load_feed_states(store)
    assert etag is not None
    assert states["f"].etag == '"v1"' and states["f"].recent_guids == ("a", "b")
    assert states["f"].error_streak == 2 and states["f"].is_parked is False and states["f"].rate_counts == ()
