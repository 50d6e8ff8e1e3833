"""The real-time replay site (issue 31): its clock is the wall clock, posts appear in the feeds as
their time passes, and only ``hub`` publishers advertise the hub."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from corpus_paths import CLUSTERING_CORPORA

from replay.corpus import load_corpus
from replay.live import LivePlan, LiveReplaySite, kind_of, publisher_label

KINDS = {"wire:US:en:1": "hub", "lead:SG:en:1": "ping"}
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture(scope="module")
def site() -> Iterator[LiveReplaySite]:
    now = datetime.now(UTC)
    # Posts from 3 minutes ago until 10 seconds from now: some are history, some come during the test.
    plan = LivePlan(start=now - timedelta(minutes=3), end=now + timedelta(seconds=10),
                    rates={"wire": 600.0, "lead": 300.0, "paper": 60.0}, kinds=KINDS)  # type: ignore[arg-type]
    live = LiveReplaySite(load_corpus(CLUSTERING_CORPORA), plan, seed=7, speed=1.0)
    live.start(port=0)
    try:
        yield live
    finally:
        live.stop()


def _feed(url: str) -> str:
    with _OPENER.open(url, timeout=10) as response:
        return str(response.read().decode("utf-8"))


def test_the_clock_is_the_wall_clock_from_the_start(site: LiveReplaySite) -> None:
    for _ in range(3):
        assert abs((site.now - datetime.now(UTC)).total_seconds()) < 0.5
        time.sleep(0.3)


def test_a_post_is_in_its_feed_once_its_time_has_come_and_not_before(site: LiveReplaySite) -> None:
    now = datetime.now(UTC)
    coming = [a for a in site.articles if now + timedelta(seconds=0.5) < a.published_at < now + timedelta(seconds=6)]
    assert coming, "the plan schedules posts during the test"
    post = coming[0]
    publisher = next(p for p in site.publishers if p.publisher_id == post.publisher_id)
    assert post.url not in _feed(publisher.rss_url)
    time.sleep(max(0.0, (post.published_at - datetime.now(UTC)).total_seconds()) + 1.2)
    assert post.url in _feed(publisher.rss_url)
    history = [a for p in site.publishers for a in site.released(p.publisher_id, now)]
    assert history and min(a.published_at for a in history) < now - timedelta(minutes=1)  # out at once


def test_only_hub_publishers_advertise_the_hub(site: LiveReplaySite) -> None:
    kinds = {p.publisher_id: kind_of(publisher_label(p, site.publishers), KINDS) for p in site.publishers}
    assert set(kinds.values()) == {"hub", "ping", "polled"}
    for publisher in site.publishers:
        advertised = 'rel="hub"' in _feed(publisher.rss_url)
        assert advertised == (kinds[publisher.publisher_id] == "hub"), publisher.publisher_id
        assert site.kind(publisher.publisher_id) == kinds[publisher.publisher_id]
