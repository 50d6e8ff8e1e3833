"""Event-driven hand-offs under a real Prefect server (issue 31): when events and schedules fire
together there is no double publish, no skipped change and no second pass beside the first.

The rank passes here run on the real clock, as the deployments run them, over articles first seen
minutes ago; the Prefect events go through the test server's event stream.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from corpus_paths import CLUSTERING_CORPORA
from repair_corpus import PUBLISHERS, bern, mannheim

from flows.rank import rank_and_publish, rank_service
from tasks.rank.publish import publish_all
from tasks.registry import import_publishers
from tasks.services import LIMIT_NAMES, one_pass_at_a_time, request_stop, write_heartbeat
from tasks.settings import FreshnessSettings, current_settings, get_rank_settings, use_settings
from tasks.storage import configured_store
from tasks.writer.run import cluster_language
from transforms.features import features_from_text, features_to_row
from warehouse import layout
from warehouse.schemas import ARTICLES_SCHEMA
from warehouse.snapshots import read_live_stories
from warehouse.store import ObjectStore
from warehouse.tables import rows_to_table, write_segment

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _register(store: ObjectStore, tmp_path: Path) -> None:
    csv = tmp_path / "publishers.csv"
    csv.write_text("publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section\n"
                   + "".join(f"{p},{p.upper()},{p}.test,US,en,1,{0.9 - 0.1 * i:.1f},false,false,"
                             f"http://{p}.test/feed,sport\n" for i, p in enumerate(PUBLISHERS)), encoding="utf-8")
    import_publishers(store, csv)


def write_articles(store: ObjectStore, articles: list[tuple[str, str, str]], seen: datetime) -> None:
    """One article segment per (article_id, text, publisher), first seen at ``seen``, as ingest writes them."""
    for article_id, text, publisher in articles:
        features = features_from_text(article_id, text.split(". ")[0][:80], text, "en", seen, publisher)
        row = {**features_to_row(features), "version": 1,
               "content_hash": hashlib.sha1(text.encode()).hexdigest(), "url": f"http://{publisher}.test/{article_id}",
               "canonical_url": f"http://{publisher}.test/{article_id}", "feed_id": f"feed-{publisher}",
               "region": "US", "snippet": text[:120], "image_url": None, "author": None, "section": "sport",
               "categories": [], "is_opinion": False, "published_at": seen - timedelta(seconds=30)}
        write_segment(store, layout.article_segment_key(seen, article_id), rows_to_table([row], ARTICLES_SCHEMA),
                      ARTICLES_SCHEMA)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ObjectStore]:
    """A store with eight US publishers and one story clustered a few minutes ago, under the
    event-driven settings."""
    settings = current_settings().with_store(str(tmp_path / "store"))
    settings = replace(settings, freshness=FreshnessSettings(mode="events", rank_debounce_seconds=0.2))
    with use_settings(settings):
        store = configured_store()
        _register(store, tmp_path)
        seen = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
        write_articles(store, [(f"m{i}", mannheim(i), PUBLISHERS[i]) for i in range(4)], seen)
        cluster_language(store, "en", seen + timedelta(seconds=30))
        yield store


def _live_articles(store: ObjectStore) -> set[str]:
    snapshot = json.loads(read_live_stories(store).data)
    return {s["article_id"] for story in snapshot["stories"].values() for s in story["sources"]}


def _page_versions(store: ObjectStore) -> dict[str, list[dict[str, Any]]]:
    """Every published version of every page and of the story snapshot, oldest first."""
    out: dict[str, list[dict[str, Any]]] = {}
    for key in sorted(store.list("pages/")):
        name = key.rsplit("/", 1)[-1]
        if name.startswith("v") and name.endswith(".json"):
            out.setdefault(key.rsplit("/", 1)[0], []).append(json.loads(store.get(key).data))
    return {k: sorted(v, key=lambda p: p["version"]) for k, v in out.items()}


def _assert_no_double_publish(store: ObjectStore) -> None:
    """No version repeats its predecessor's content, and no version number was skipped or raced."""
    for page, versions in _page_versions(store).items():
        assert [v["version"] for v in versions] == list(range(1, len(versions) + 1)), page
        bodies = [json.dumps(dict(v, version=None, as_of=None), sort_keys=True) for v in versions]
        assert all(a != b for a, b in zip(bodies, bodies[1:], strict=False)), f"{page} published twice"
    for page in {k.rsplit("/", 1)[0] for k in store.list("pages/") if k.endswith("latest.json")}:
        pointer = json.loads(store.get(f"{page}/latest.json").data)
        assert not pointer.get("orphans"), f"{page}: a racing pass wrote {pointer['orphans']}"


def _listed(store: ObjectStore) -> list[str]:
    from warehouse.duck import connect

    con = connect(store)
    try:
        return [r[0] for r in con.sql("select article_id from listings").fetchall()]
    finally:
        con.close()


def _backlog(store: ObjectStore, count: int) -> set[str]:
    """``count`` English corpus articles first seen over the last two hours, clustered: enough
    stories that a rank pass takes a few seconds, so two passes started together would overlap."""
    rows = [json.loads(line) for line in CLUSTERING_CORPORA[0].read_text(encoding="utf-8").splitlines() if line]
    now = datetime.now(UTC).replace(microsecond=0)
    for i, row in enumerate(rows[:count]):
        write_articles(store, [(f"c{i}", f"{row['title']}. {row['text']}"[:3000], PUBLISHERS[i % len(PUBLISHERS)])],
                       now - timedelta(minutes=120 - 110 * i // count))
    cluster_language(store, "en", now - timedelta(minutes=5))
    return {f"c{i}" for i in range(count)}


def test_rank_triggered_twice_at_once_runs_one_pass_after_the_other(store: ObjectStore) -> None:
    # A writer's commit event and the minute schedule fire together: each starts a rank pass on the
    # real clock, as the long-running rank and rank_and_publish run it (the step's slot, then the pass
    # at the instant it got it).
    backlog = _backlog(store, 150)
    barrier = threading.Barrier(2)
    intervals: list[tuple[float, float]] = []
    settings = current_settings()

    def trigger() -> None:
        with use_settings(settings):
            barrier.wait()
            with one_pass_at_a_time("rank"):
                began = time.monotonic()
                publish_all(store, datetime.now(UTC).replace(microsecond=0), get_rank_settings())
                intervals.append((began, time.monotonic()))

    threads = [threading.Thread(target=trigger) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (_, first_end), (second_start, _) = sorted(intervals)
    assert second_start >= first_end, f"two rank passes ran side by side: {sorted(intervals)}"
    _assert_no_double_publish(store)
    assert {f"m{i}" for i in range(4)} <= _live_articles(store) and backlog & _live_articles(store)
    listed = _listed(store)
    assert sorted(listed) == sorted(set(listed)), "an article was listed twice"


def test_a_writer_commit_during_a_scheduled_rank_is_published_by_the_next_pass(store: ObjectStore) -> None:
    settings = current_settings()
    service: dict[str, Any] = {}

    def serve() -> None:
        with use_settings(settings):
            service["totals"] = rank_service(run_minutes=0.75)

    thread = threading.Thread(target=serve)
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not store.list(layout.service_heartbeat_key("rank")):
        time.sleep(0.2)  # the service's first pass is done
    assert {f"m{i}" for i in range(4)} <= _live_articles(store)
    time.sleep(2)  # its event subscription is up

    # A scheduled pass holds rank's slot; a writer commits while it runs.
    with one_pass_at_a_time("rank"):
        publish_all(store, datetime.now(UTC).replace(microsecond=0), get_rank_settings())
        seen = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=20)
        write_articles(store, [("m4", mannheim(4), PUBLISHERS[4]), ("b0", bern(0), PUBLISHERS[5])], seen)
        assert cluster_language(store, "en", seen + timedelta(seconds=5))["committed"]
        time.sleep(3)  # the commit's event reached the service, which waits for the slot
        assert not {"m4", "b0"} & _live_articles(store), "a pass ran beside the one holding the slot"
        released = datetime.now(UTC)

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not {"m4", "b0"} <= _live_articles(store):
        time.sleep(0.2)
    published = datetime.now(UTC)
    request_stop("rank")  # the service ends after its pass in flight instead of running out its time
    thread.join(timeout=15)
    assert not thread.is_alive(), "the service ran on after it was asked to stop"
    assert {"m4", "b0"} <= _live_articles(store), "the commit made during the scheduled pass was skipped"
    assert (published - released).total_seconds() < 15  # the event's pass, not the minute backstop
    assert service["totals"]["woken_by"].get("event", 0) >= 1
    _assert_no_double_publish(store)


def test_a_scheduled_run_stands_by_while_the_long_running_rank_is_alive(store: ObjectStore) -> None:
    write_heartbeat(store, "rank", 5)
    assert rank_and_publish()["standby"] is True
    assert not store.list(layout.page_pointer_key("en-US", "top"))
    write_heartbeat(store, "rank", 5, stopped=True)
    assert rank_and_publish()["published"]  # the long-running rank ended: the schedule takes over at once


def test_the_passes_share_one_named_slot() -> None:
    assert LIMIT_NAMES == {"ingest": "newsroom-ingest", "rank": "newsroom-rank"}


def test_a_ping_recorded_by_the_receiver_is_fetched_at_once(tmp_path: Path) -> None:
    from pipeline_harness import replay_site

    from flows.ingest import ingest_feeds, ingest_service
    from tasks.registry import load_registry
    from tasks.replay_control import download_publishers_csv
    from tasks.settings import WebSubSettings
    from warehouse.tables import list_segments, read_segment
    from websub.receiver import WebSubReceiver, ping_token

    websub = WebSubSettings(master_secret="test-master-secret", ping_min_interval_seconds=0)  # type: ignore[arg-type]
    settings = replace(current_settings().with_store(str(tmp_path / "store")).with_private_addresses(),
                       websub=websub, freshness=FreshnessSettings(mode="events"))
    with replay_site(limit=60, span_hours=1.0) as site, use_settings(settings):
        store = configured_store()
        import_publishers(store, download_publishers_csv(site.control_url, tmp_path / "publishers.csv"))
        site.set_clock(site.now + timedelta(minutes=20))
        service: dict[str, Any] = {}

        def serve() -> None:
            with use_settings(settings):
                service["totals"] = ingest_service(run_minutes=0.75)

        thread = threading.Thread(target=serve)
        thread.start()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not store.list(layout.service_heartbeat_key("ingest")):
            time.sleep(0.2)  # its first pass polled every feed
        time.sleep(2)  # its event subscription is up
        assert ingest_feeds()["standby"] is True  # the minute deployment leaves the feeds to it

        # The replay releases a publisher's next articles, and the publisher pings the receiver.
        seen_before = set(list_segments(store, layout.ARTICLES_PREFIX))
        later = site.now + timedelta(minutes=60)
        fresh = {a.publisher_id for a in site.articles if site.now < a.published_at <= later and not a.reprint_of}
        publisher = sorted(fresh)[0]
        site.set_clock(later)
        pinged = time.monotonic()
        reply = WebSubReceiver(store, websub).receive_ping(
            publisher, {"authorization": f"Bearer {ping_token(websub, publisher)}"})
        assert reply.status == 202
        feed_ids = {f["feed_id"] for f in load_registry(store).read_feeds() if f["publisher_id"] == publisher}
        found: set[str] = set()
        while time.monotonic() < pinged + 20 and not found:
            for key in set(list_segments(store, layout.ARTICLES_PREFIX)) - seen_before:
                found |= {r["article_id"] for r in read_segment(store, key, ARTICLES_SCHEMA).to_pylist()
                          if r["feed_id"] in feed_ids}
            time.sleep(0.2)
        fetched_after = time.monotonic() - pinged
        # The service ends after its pass in flight instead of running out its time; the second lets a
        # push event that arrived during a due pass that fetched the feed start its own pass first.
        time.sleep(1)
        request_stop("ingest")
        thread.join(timeout=15)
        assert not thread.is_alive(), "the service ran on after it was asked to stop"
    assert found, "the pinged publisher's new articles were not fetched"
    assert fetched_after < 15  # the push's pass, not the next minute
    assert service["totals"]["woken_by"].get("event", 0) >= 1


def test_rank_materializes_the_pages_asset_from_the_logs(store: ObjectStore) -> None:
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    from tasks.assets import store_asset

    assert rank_and_publish()["published"]
    pages = store_asset(store, "pages").key
    deadline = time.monotonic() + 30
    found: list[Any] = []
    while time.monotonic() < deadline and not found:
        with get_client(sync_client=True) as client:
            found = client.read_events(filter=EventFilter(  # type: ignore[call-arg]
                event=EventNameFilter(prefix=["prefect.asset.materialization"]),
                resource=EventResourceFilter(id=[pages])), limit=50).events
        time.sleep(0.5)
    assert found, f"no materialization of {pages}"
    upstream = {r.id for r in found[0].related if r.role == "asset"}
    assert {store_asset(store, n).key for n in ("story_changes", "articles", "registry")} <= upstream
