"""WebSub end to end over loopback HTTP: the replay hub, our receiver and the real ingest functions.

Subscribe (discovered from ``rel=hub``) -> the hub's intent check answered by the receiver -> live
lease in the store and the feed state -> new articles released on the simulated clock -> signed
delivery -> push marker -> the next ingest run takes that feed first, though it is not due, and
the article is in the log. Forgeries and bad pings change nothing but a recorded reason.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from corpus_paths import CLUSTERING_CORPORA

from replay.site import ReplaySite
from tasks.http import make_client
from tasks.ingest.commit import commit_ingest
from tasks.ingest.plan import load_feed_states, plan_due_feeds
from tasks.ingest.poll import poll_shard
from tasks.registry import feed_id_for, import_publishers
from tasks.replay_control import download_publishers_csv
from tasks.settings import IngestSettings, WebSubSettings
from tasks.websub import (
    SubscriptionTarget,
    list_push_markers,
    load_subscription,
    maintain_subscriptions,
    request_subscription,
)
from transforms.websub import derive_secret
from warehouse.store import LocalStore, ObjectStore
from warehouse.tables import parquet_bytes_to_table
from websub.receiver import WebSubReceiver, ping_token

pytestmark = pytest.mark.integration

CORPORA = CLUSTERING_CORPORA
START = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
MASTER = "test-master-secret"


@dataclass
class World:
    site: ReplaySite
    store: ObjectStore
    receiver: WebSubReceiver
    ingest: IngestSettings
    websub: WebSubSettings

    def cycle(self, now: datetime) -> dict[str, Any]:
        plan = plan_due_feeds(self.store, now, shards=4, push_min_interval_seconds=self.websub.ping_min_interval_seconds)
        shards = [poll_shard(jobs, self.ingest, now, self.websub) for jobs in plan]
        return commit_ingest(self.store, shards, now, ingest=self.ingest, websub=self.websub)

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.receiver.url, trust_env=False, timeout=10)


def _websub(callback: str, **overrides: Any) -> WebSubSettings:
    return WebSubSettings(enabled=True, callback_base_url=callback, master_secret=MASTER, **overrides)  # type: ignore[arg-type]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    site = ReplaySite.from_corpora(CORPORA, seed=7, start=START, limit=240, span_hours=2.0)
    site.start(port=0)
    store = LocalStore(tmp_path / "store")
    import_publishers(store, download_publishers_csv(site.control_url, tmp_path / "publishers.csv"))
    ingest = IngestSettings(allow_private_addresses=True, connect_timeout_seconds=2, read_timeout_seconds=2,  # type: ignore[call-arg]
                            total_timeout_seconds=5, host_rate_per_second=50.0, host_burst=50.0)
    receiver = WebSubReceiver(store, _websub("http://placeholder"), clock=lambda: site.now)
    url = receiver.start("127.0.0.1", 0)
    try:
        yield World(site, store, receiver, ingest, _websub(url))
    finally:
        receiver.stop()
        site.stop()


def _subscribed(world: World, at: datetime) -> dict[str, Any]:
    """One ingest cycle at ``at`` that subscribes every feed, then wait for the hub's checks."""
    world.site.set_clock(at)
    summary = world.cycle(at)
    assert world.site.hub.wait_idle(15)
    return summary


def _ingested_urls(store: ObjectStore) -> set[str]:
    return {row["canonical_url"] for key in store.list("log/articles/")
            for row in parquet_bytes_to_table(store.get(key).data).to_pylist()}


def test_the_whole_handshake_over_http(world: World) -> None:
    site, store = world.site, world.store
    t1 = START + timedelta(minutes=20)
    summary = _subscribed(world, t1)
    feeds = {feed_id_for(p.rss_url): p for p in site.publishers}
    assert summary["websub"] == {"subscribe": len(feeds)}, summary["websub"]

    # The hub checked our intent over HTTP and holds one signed, live subscription per feed.
    subs = site.hub.subscriptions()
    assert {s["topic"] for s in subs} == {p.rss_url for p in site.publishers}
    assert all(s["is_signed"] and s["callback"] == f"{world.receiver.url}/websub/{feed_id_for(s['topic'])}"
               for s in subs)
    assert site.hub.counts["verified"] == len(feeds)
    for feed_id, publisher in feeds.items():
        record, _ = load_subscription(store, feed_id)
        assert record is not None and record.status == "live" and record.hub_url == site.hub_url
        assert record.topic_url == publisher.rss_url
        assert record.lease_expires_at == t1 + timedelta(seconds=world.websub.lease_seconds)

    # The feed state records the hub at once, and the lease from the next poll on.
    states, _ = load_feed_states(store)
    assert {s.hub_url for s in states.values()} == {site.hub_url}
    t2 = max(s.next_poll_at for s in states.values())
    site.set_clock(t2)
    world.cycle(t2)
    states, _ = load_feed_states(store)
    for state in states.values():
        assert state.lease_expires_at == t1 + timedelta(seconds=world.websub.lease_seconds)
        if state.last_polled_at == t2 and state.last_error_kind is None:
            assert state.interval_seconds >= world.websub.backstop_seconds, state.poll_reason

    # An intent check we did not ask for is refused: unknown feed, other topic, unasked unsubscribe,
    # a re-check or a denial of a live subscription.
    feed_id, publisher = next(iter(feeds.items()))
    with world.http() as http:
        challenge = {"hub.challenge": "c123", "hub.lease_seconds": "60"}
        assert http.get("/websub/0123456789abcdef", params={**challenge, "hub.mode": "subscribe",
                                                             "hub.topic": publisher.rss_url}).status_code == 404
        assert http.get(f"/websub/{feed_id}", params={**challenge, "hub.mode": "subscribe",
                                                      "hub.topic": publisher.atom_url}).status_code == 404
        assert http.get(f"/websub/{feed_id}", params={**challenge, "hub.mode": "unsubscribe",
                                                      "hub.topic": publisher.rss_url}).status_code == 404
        # A live subscription we did not just ask to renew is not pending: its lease stays as granted.
        again = http.get(f"/websub/{feed_id}", params={**challenge, "hub.mode": "subscribe",
                                                       "hub.topic": publisher.rss_url})
        assert again.status_code == 404
        denied = http.get(f"/websub/{feed_id}", params={"hub.mode": "denied", "hub.topic": publisher.rss_url})
        assert denied.status_code == 404
    record, _ = load_subscription(store, feed_id)
    assert record is not None and record.status == "live"
    assert record.lease_expires_at == t1 + timedelta(seconds=world.websub.lease_seconds)

    # Unsubscribing is the same handshake, asked by us (through the address-checked client).
    with make_client(world.ingest) as client:
        request_subscription(store, client, world.websub, feed_id=feed_id, topic_url=publisher.rss_url,
                             hub_url=site.hub_url, mode="unsubscribe", now=t2)
    assert site.hub.wait_idle(15)
    record, _ = load_subscription(store, feed_id)
    assert record is not None and record.status == "unsubscribed"
    assert publisher.rss_url not in {s["topic"] for s in site.hub.subscriptions()}


def test_a_pushed_item_is_in_the_articles_log_within_one_cycle(world: World) -> None:
    site, store = world.site, world.store
    t1 = START + timedelta(minutes=20)
    _subscribed(world, t1)
    states, _ = load_feed_states(store)
    t2 = max(s.next_poll_at for s in states.values())
    site.set_clock(t2)
    world.cycle(t2)  # every feed polled with a live lease: each next poll is a backstop away
    states, _ = load_feed_states(store)
    candidates = sorted(
        (a for a in site.articles
         if t2 < a.published_at < states[feed_id_for(next(p.rss_url for p in site.publishers
                                                          if p.publisher_id == a.publisher_id))].next_poll_at),
        key=lambda a: a.published_at)
    assert candidates, "some article is published while its feed is not due"
    article = candidates[0]
    publisher = next(p for p in site.publishers if p.publisher_id == article.publisher_id)
    feed_id = feed_id_for(publisher.rss_url)
    due_at = states[feed_id].next_poll_at
    assert article.url not in _ingested_urls(store)

    t3 = article.published_at
    site.set_clock(t3)  # the hub distributes the release, signed, before the clock move returns
    assert site.hub.counts["delivered"] >= 1
    markers = list_push_markers(store)
    assert feed_id in markers
    marker = json.loads(store.get(markers[feed_id][0]).data)
    assert marker["source"] == "websub" and marker["algorithm"] == "sha256" and "body" not in marker

    plan = plan_due_feeds(store, t3, shards=4)
    planned = {j.feed_id: j for jobs in plan for j in jobs}
    assert feed_id in planned and due_at > t3, "pushed: taken though its next poll is later"
    shard = next(jobs for jobs in plan if any(j.feed_id == feed_id for j in jobs))
    assert shard[0].push_keys, "pushed feeds come first in their shard"
    summary = commit_ingest(store, [poll_shard(jobs, world.ingest, t3, world.websub) for jobs in plan], t3,
                            ingest=world.ingest, websub=world.websub)
    assert summary["pushed"] >= 1
    assert article.url in _ingested_urls(store)
    assert feed_id not in list_push_markers(store), "markers acted on are deleted"


def _forged_headers(reason: str, body: bytes, other_secret: str) -> dict[str, str]:
    return {
        "mismatch": {"X-Hub-Signature": "sha256=" + hmac.new(other_secret.encode(), body, hashlib.sha256).hexdigest()},
        "missing": {},
        "malformed": {"X-Hub-Signature": "sha256"},
        "unsupported_algorithm": {"X-Hub-Signature": "md5=" + "0" * 32},
    }[reason]


@pytest.mark.parametrize("reason", ["mismatch", "missing", "malformed", "unsupported_algorithm"])
def test_a_forged_or_unsigned_delivery_is_rejected_with_its_reason(world: World, reason: str) -> None:
    site, store = world.site, world.store
    _subscribed(world, START + timedelta(minutes=20))
    feed_id = feed_id_for(site.publishers[0].rss_url)
    body = b'<?xml version="1.0"?><rss version="2.0"><channel><title>forged</title></channel></rss>'
    other_secret = derive_secret(MASTER.encode(), feed_id_for(site.publishers[1].rss_url))
    with world.http() as http:
        answer = http.post(f"/websub/{feed_id}", content=body, headers=_forged_headers(reason, body, other_secret))
    assert answer.status_code == 202  # WebSub §8: acknowledged, then ignored
    record, _ = load_subscription(store, feed_id)
    assert record is not None and record.last_rejected_reason == reason and record.rejected_count == 1
    assert not list_push_markers(store), "a forgery never triggers a fetch"


def test_deliveries_for_another_topic_too_large_or_unknown_are_refused(world: World) -> None:
    site, store = world.site, world.store
    _subscribed(world, START + timedelta(minutes=20))
    feed_id = feed_id_for(site.publishers[0].rss_url)
    body = b'<?xml version="1.0"?><rss version="2.0"><channel><title>forged</title></channel></rss>'
    secret = derive_secret(MASTER.encode(), feed_id)
    with world.http() as http:
        # Topic in the Link header must be ours.
        signed = {"X-Hub-Signature": "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()}
        http.post(f"/websub/{feed_id}", content=body,
                  headers={**signed, "Link": f'<{site.hub_url}>; rel="hub", <http://evil.test/feed>; rel="self"'})
        assert load_subscription(store, feed_id)[0].last_rejected_reason == "topic_mismatch"  # type: ignore[union-attr]
        assert not list_push_markers(store)

        # Capped bodies; no length, no delivery; a feed we never subscribed is gone.
        too_big = b"x" * (world.websub.max_body_bytes + 1)
        assert http.post(f"/websub/{feed_id}", content=too_big, headers=signed).status_code == 413
        assert http.post("/websub/0123456789abcdef", content=body, headers=signed).status_code == 410

        # Every algorithm a hub may use is accepted when authentic.
        for algorithm in ("sha1", "sha256", "sha512"):
            digest = hmac.new(secret.encode(), body, getattr(hashlib, algorithm)).hexdigest()
            assert http.post(f"/websub/{feed_id}", content=body,
                             headers={"X-Hub-Signature": f"{algorithm}={digest}"}).status_code == 202
    assert len(list_push_markers(store)[feed_id]) == 3
    assert world.receiver.stats["delivery_accepted"] == 3


def test_publisher_pings_are_authenticated_and_rate_limited(world: World) -> None:
    site, store = world.site, world.store
    t1 = START + timedelta(minutes=20)
    site.set_clock(t1)
    world.cycle(t1)
    publisher = site.publishers[2]
    feed_id = feed_id_for(publisher.rss_url)
    token = ping_token(world.websub, publisher.publisher_id)
    with world.http() as http:
        url = f"/ping/{publisher.publisher_id}"
        assert http.post(url).status_code == 401
        assert http.post(url, headers={"Authorization": "Bearer " + "0" * 64}).status_code == 401
        other = ping_token(world.websub, site.publishers[3].publisher_id)  # another publisher's token
        assert http.post(url, headers={"Authorization": f"Bearer {other}"}).status_code == 401
        assert not list_push_markers(store)
        auth = {"Authorization": f"Bearer {token}"}
        assert http.post(url, headers=auth).status_code == 202
        limited = http.post(url, headers=auth)
        assert limited.status_code == 429 and int(limited.headers["Retry-After"]) == 30
        site.set_clock(t1 + timedelta(seconds=30))
        assert http.post(url, headers=auth).status_code == 202
        assert http.post("/ping/nobody", headers={"Authorization": "Bearer " + ping_token(world.websub, "nobody")}
                         ).status_code == 404
    assert list(list_push_markers(store)) == [feed_id] and len(list_push_markers(store)[feed_id]) == 2

    # The ingest honours the same limit: a feed polled 10 s ago waits; 30 s after, it is taken first.
    states, _ = load_feed_states(store)
    assert states[feed_id].last_polled_at == t1
    soon = t1 + timedelta(seconds=10)
    assert feed_id not in {j.feed_id for jobs in plan_due_feeds(store, soon, shards=4) for j in jobs}
    later = t1 + timedelta(seconds=30)
    planned = {j.feed_id: j for jobs in plan_due_feeds(store, later, shards=4) for j in jobs}
    assert planned[feed_id].push_keys and states[feed_id].next_poll_at > later


def test_leases_are_renewed_before_they_end_and_expire_on_the_hub(world: World) -> None:
    site, store = world.site, world.store
    short = _websub(world.receiver.url, lease_seconds=7200)
    world.websub = short
    t1 = START + timedelta(minutes=20)
    _subscribed(world, t1)
    publisher = site.publishers[0]
    feed_id = feed_id_for(publisher.rss_url)
    record, _ = load_subscription(store, feed_id)
    assert record is not None and record.lease_expires_at == t1 + timedelta(hours=2)

    # Over an hour left: nothing to do. Under an hour: renew, over HTTP, and the lease moves on.
    target = [SubscriptionTarget(feed_id, publisher.rss_url, site.hub_url)]
    assert maintain_subscriptions(store, target, world.ingest, short, t1 + timedelta(minutes=50)) == {}
    t_renew = t1 + timedelta(minutes=70)
    site.set_clock(t_renew)
    site.hub.hold_verifications()  # the hub calls back only once the pending state was seen
    assert maintain_subscriptions(store, target, world.ingest, short, t_renew) == {"renew": 1}
    pending, _ = load_subscription(store, feed_id)
    assert pending is not None and pending.status == "pending"
    assert pending.lease_expires_at == t1 + timedelta(hours=2), "the live lease is kept while renewing"
    site.hub.release_verifications()
    assert site.hub.wait_idle(15)
    renewed, _ = load_subscription(store, feed_id)
    assert renewed is not None and renewed.status == "live" and renewed.lease_expires_at == t_renew + timedelta(hours=2)
    hub_sub = next(s for s in site.hub.subscriptions() if s["topic"] == publisher.rss_url)
    assert hub_sub["expires_at"] == (t_renew + timedelta(hours=2)).isoformat()

    # The others were not renewed: on the hub their leases run out and deliveries stop.
    site.set_clock(t1 + timedelta(hours=2, seconds=1))
    assert [s["topic"] for s in site.hub.subscriptions()] == [publisher.rss_url]
    assert site.hub.counts["expired"] == len(site.publishers) - 1


def test_the_websub_command_runs_the_receiver_as_its_own_process(tmp_path: Path) -> None:
    env = {**os.environ, "NEWSROOM_WAREHOUSE_ROOT": str(tmp_path / "store"), "NEWSROOM_WEBSUB_MASTER_SECRET": MASTER}
    process = subprocess.Popen([sys.executable, "-m", "flows.cli", "websub", "--port", "0"], env=env,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("websub listening url="), line
        url = line.split("url=", 1)[1].strip()
        deadline = time.monotonic() + 10
        while True:
            try:
                assert httpx.get(f"{url}/healthz", trust_env=False).status_code == 200
                break
            except httpx.ConnectError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert httpx.get(f"{url}/websub/0123456789abcdef", params={"hub.mode": "subscribe", "hub.topic": "t",
                                                                     "hub.challenge": "c"}, trust_env=False
                         ).status_code == 404
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
    missing = subprocess.run([sys.executable, "-m", "flows.cli", "websub"], capture_output=True, text=True,
                             env={k: v for k, v in env.items() if k != "NEWSROOM_WEBSUB_MASTER_SECRET"}, check=False)
    assert missing.returncode != 0 and "NEWSROOM_WEBSUB_MASTER_SECRET" in missing.stderr


def test_an_opted_out_publisher_is_unsubscribed_at_the_hub(world: World, tmp_path: Path) -> None:
    site, store = world.site, world.store
    t1 = START + timedelta(minutes=20)
    _subscribed(world, t1)
    leaving = site.publishers[0]
    leaving_feeds = {feed_id_for(leaving.rss_url)}
    assert leaving.rss_url in {s["topic"] for s in site.hub.subscriptions()}

    # The publisher asks to be left out: the registry says so, and the next run unsubscribes.
    source = download_publishers_csv(site.control_url, tmp_path / "all.csv")
    with source.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    changed = tmp_path / "opt-out.csv"
    with changed.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**r, "opted_out": "true"} for r in rows if r["publisher_id"] == leaving.publisher_id)
    import_publishers(store, changed)
    t2 = t1 + timedelta(minutes=5)
    site.set_clock(t2)
    summary = world.cycle(t2)
    assert site.hub.wait_idle(15)
    assert summary["websub"].get("retire_unsubscribe") == len(leaving_feeds), summary["websub"]
    for feed_id in leaving_feeds:
        record, _ = load_subscription(store, feed_id)
        assert record is not None and record.mode == "unsubscribe" and record.status == "unsubscribed"
    topics = {s["topic"] for s in site.hub.subscriptions()}
    assert leaving.rss_url not in topics
    assert {p.rss_url for p in site.publishers[1:]} <= topics  # everyone else stays subscribed

    # Nothing more to do on the next run: the request is not repeated.
    t3 = t2 + timedelta(minutes=5)
    site.set_clock(t3)
    assert "retire_unsubscribe" not in world.cycle(t3)["websub"]
