"""The health flow's dashboards (issue 18), computed by their SQL over a store written with our own writers."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from tasks.dashboards import DASHBOARD_KEYS, build_dashboards
from warehouse import layout
from warehouse.schemas import (
    ARTICLES_SCHEMA,
    FEED_STATE_SCHEMA,
    FEEDS_SCHEMA,
    FETCHES_SCHEMA,
    LISTINGS_SCHEMA,
    PUBLISHERS_SCHEMA,
    STORY_CHANGES_SCHEMA,
)
from warehouse.store import LocalStore
from warehouse.tables import rows_to_table, write_segment, write_table

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def _row(schema: pa.Schema, **values: object) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(schema.names)
    row.update(values)
    return row


def _fetch(i: int, kind: str, publisher: str, host: str | None, at: datetime, status: int | None, *,
           error_kind: str | None = None, conditional: bool = False, reason: str = "rate") -> dict[str, object]:
    return _row(FETCHES_SCHEMA, fetch_id=f"x{i}", fetched_at=at, kind=kind, feed_id=f"f-{publisher}",
                publisher_id=publisher, host=host, url=f"http://{host}/{kind}/{i}" if host else "", status=status,
                is_conditional=conditional, error_kind=error_kind, elapsed_ms=12.0,
                interval_seconds=300 if kind == "feed" else None, poll_reason=reason if kind == "feed" else None)


@pytest.fixture
def store(tmp_path) -> LocalStore:  # type: ignore[no-untyped-def]
    store = LocalStore(tmp_path / "store")
    publishers = [_row(PUBLISHERS_SCHEMA, publisher_id=p, name=p.title(), domain=f"{p}.example", region="US",
                       language="en", tier=t, authority=0.5, is_paywalled=False, is_opted_out=False)
                  for p, t in [("wire", 1), ("blog", 2)]]
    write_table(store, layout.PUBLISHERS_KEY, rows_to_table(publishers, PUBLISHERS_SCHEMA), PUBLISHERS_SCHEMA)
    feeds = [_row(FEEDS_SCHEMA, feed_id=f"f-{p}", url=f"http://{p}.example/feed", publisher_id=p, kind="rss")
             for p in ("wire", "blog")]
    write_table(store, layout.FEEDS_KEY, rows_to_table(feeds, FEEDS_SCHEMA), FEEDS_SCHEMA)
    states = [_row(FEED_STATE_SCHEMA, feed_id="f-blog", is_parked=True), _row(FEED_STATE_SCHEMA, feed_id="f-wire",
                                                                              is_parked=False)]
    write_table(store, layout.FEED_STATE_KEY, rows_to_table(states, FEED_STATE_SCHEMA), FEED_STATE_SCHEMA)

    # wire (tier 1): published -> seen 60, 120, 180 s; seen -> story 10 s; story -> page 30 s.
    # blog (tier 2): one article, 600 s late, clustered after 20 s, never on a page.
    # One more wire article is older than 24 h and counts nowhere.
    articles, changes, listings = [], [], []
    for i, (publisher, lag, seen) in enumerate([("wire", 60, NOW - 3600 * S), ("wire", 120, NOW - 1800 * S),
                                                ("wire", 180, NOW - 600 * S), ("blog", 600, NOW - 900 * S),
                                                ("wire", 60, NOW - 30 * 3600 * S)]):
        articles.append(_row(ARTICLES_SCHEMA, article_id=f"a{i}", version=1, content_hash=f"h{i}",
                             publisher_id=publisher, language="en", title=f"t{i}", first_seen_at=seen,
                             published_at=seen - lag * S))
        clustered = seen + (20 if publisher == "blog" else 10) * S
        changes.append(_row(STORY_CHANGES_SCHEMA, change_id=f"c{i}", offset=i, language="en",
                            kind="new_story" if i == 0 else "assign", story_id="s1", article_id=f"a{i}",
                            changed_at=clustered))
        if publisher == "wire":
            listings.append(_row(LISTINGS_SCHEMA, article_id=f"a{i}", story_id="s1", listed_at=clustered + 30 * S))
    write_segment(store, layout.article_segment_key(NOW, "a"), rows_to_table(articles, ARTICLES_SCHEMA),
                  ARTICLES_SCHEMA)
    write_segment(store, layout.story_changes_key("en", 0), rows_to_table(changes, STORY_CHANGES_SCHEMA),
                  STORY_CHANGES_SCHEMA)
    write_segment(store, layout.listing_segment_key(NOW, "l"), rows_to_table(listings, LISTINGS_SCHEMA),
                  LISTINGS_SCHEMA)

    fetches = [
        # 11:xx: wire polled twice (200, then 304 with validators), blog once (503: throttled, backing off)
        _fetch(1, "feed", "wire", "wire.example", NOW - 50 * 60 * S, 200),
        _fetch(2, "feed", "wire", "wire.example", NOW - 20 * 60 * S, 304, conditional=True),
        _fetch(3, "feed", "blog", "blog.example", NOW - 40 * 60 * S, 503, error_kind="http_status", reason="backoff"),
        _fetch(4, "page", "wire", "wire.example", NOW - 50 * 60 * S, 200),
        _fetch(5, "page", "blog", "blog.example", NOW - 40 * 60 * S, None, error_kind="timeout"),
        _fetch(6, "page", "blog", None, NOW - 40 * 60 * S, None, error_kind="no_link"),
        # 09:xx: one 304
        _fetch(7, "feed", "wire", "wire.example", NOW - 170 * 60 * S, 304, conditional=True),
        # two days ago: outside the window
        _fetch(8, "feed", "wire", "wire.example", NOW - 48 * 3600 * S, 200),
    ]
    write_segment(store, layout.fetch_segment_key(NOW, "f"), rows_to_table(fetches, FETCHES_SCHEMA), FETCHES_SCHEMA)
    # the same run's rows written again (a rerun after a crash) count once
    write_segment(store, layout.fetch_segment_key(NOW, "g"), rows_to_table(fetches[:2], FETCHES_SCHEMA),
                  FETCHES_SCHEMA)
    return store


def _by(table: list[dict[str, object]], *keys: str) -> dict[tuple[object, ...], dict[str, object]]:
    return {tuple(row[k] for k in keys): row for row in table}


def test_freshness_per_stage_and_tier(store: LocalStore) -> None:
    freshness = _by(build_dashboards(store, NOW)[0].table, "stage", "tier")

    assert freshness[("published -> first seen", "tier 1")]["p50 s"] == 120.0
    assert freshness[("published -> first seen", "tier 1")]["articles"] == 3
    assert freshness[("published -> first seen", "tier 2")]["p50 s"] == 600.0
    assert freshness[("published -> first seen", "all tiers")]["articles"] == 4
    assert freshness[("published -> first seen", "all tiers")]["p95 s"] == pytest.approx(537.0)  # 180 + .85 * 420
    assert freshness[("first seen -> in a story", "tier 2")]["p50 s"] == 20.0
    assert freshness[("in a story -> on a page", "tier 1")]["p95 s"] == 30.0
    assert ("in a story -> on a page", "tier 2") not in freshness  # the blog's article never reached a page
    assert freshness[("published -> on a page", "tier 1")]["p50 s"] == 160.0  # 120 + 10 + 30
    assert freshness[("published -> on a page", "all tiers")]["articles"] == 3


def test_fetches_per_hour_and_the_share_of_304s(store: LocalStore) -> None:
    dashboard = build_dashboards(store, NOW)[1]
    hours = _by(dashboard.table, "hour")

    assert set(hours) == {("2026-12-01 09:00",), ("2026-12-01 11:00",)}
    eleven = hours[("2026-12-01 11:00",)]
    assert (eleven["polls"], eleven["200"], eleven["304"], eleven["errors"]) == (3, 1, 1, 1)
    assert eleven["304 share"] == "33%" and eleven["conditional share"] == "33%"
    assert "4 polls; 50% answered 304 Not Modified" in dashboard.markdown


def test_errors_by_kind_and_host(store: LocalStore) -> None:
    errors = _by(build_dashboards(store, NOW)[2].table, "error kind", "host", "fetch")

    assert set(errors) == {("http_status", "blog.example", "feed"), ("timeout", "blog.example", "page"),
                           ("no_link", None, "page")}
    assert errors[("http_status", "blog.example", "feed")]["last status"] == 503


def test_publishers_freshness_and_politeness(store: LocalStore) -> None:
    publishers = _by(build_dashboards(store, NOW)[3].table, "publisher")

    wire, blog = publishers[("wire",)], publishers[("blog",)]
    assert (wire["articles"], wire["feed polls"], wire["page fetches"]) == (3, 3, 1)
    assert wire["requests/h"] == round(4 / 24, 1)
    assert wire["conditional"] == "67%" and wire["304 share"] == "67%"
    assert wire["publish -> seen p50"] == "2 min"
    # the page with no link was never requested; the 503 and the timeout were
    assert (blog["feed polls"], blog["page fetches"], blog["errors"], blog["429/503"]) == (1, 1, 3, 1)
    assert blog["back-offs"] == 1 and blog["parked feeds"] == 1


def test_each_dashboard_carries_a_chart_the_ui_can_render(store: LocalStore) -> None:
    dashboards = build_dashboards(store, NOW)

    assert [d.key for d in dashboards] == list(DASHBOARD_KEYS)
    for d in dashboards:
        uris = re.findall(r"!\[[^\]]*\]\(data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\)", d.markdown)
        assert uris, d.key
        for uri in uris:
            svg = ET.fromstring(base64.b64decode(uri))  # well-formed, or the UI shows a broken image
            assert svg.tag == "{http://www.w3.org/2000/svg}svg"
            assert svg.findall(".//{http://www.w3.org/2000/svg}rect"), d.key


def test_an_empty_store_still_gives_every_dashboard(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = LocalStore(tmp_path / "empty")
    write_table(store, layout.PUBLISHERS_KEY, pa.Table.from_pylist([], PUBLISHERS_SCHEMA), PUBLISHERS_SCHEMA)
    dashboards = build_dashboards(store, NOW)
    assert [d.key for d in dashboards] == list(DASHBOARD_KEYS)
    assert "No article was first seen" in dashboards[0].markdown
