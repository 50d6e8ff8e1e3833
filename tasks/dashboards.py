"""Dashboards in the Prefect UI, refreshed by the health flow (issue 18).

Four views a data engineer would rather look at than read, each over the 24 hours before ``now``:

- **freshness**: publish -> first seen -> in a story -> on a page, p50 and p95 per publisher tier
  (``dashboard_freshness.sql``);
- **fetches**: feed polls per hour and how they were answered, with the share of 304s
  (``dashboard_fetches.sql``);
- **errors**: fetch errors by kind and by host (``dashboard_errors.sql``);
- **publishers**: per publisher, how fresh we are and how politely we fetch: requests per hour,
  conditional requests, 304s, 429/503 answers, back-offs, parked feeds (``dashboard_publishers.sql``).

Each is published as two artifacts under a fixed key (so the UI's Artifacts page keeps their
history): a markdown one with the chart (an SVG inside a ``data:`` URI, which the UI renders) and
a line or two of headline figures, and a table one with every number (the UI sorts and searches it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from tasks.charts import (
    ERROR,
    PALETTE,
    RangeBar,
    bar_list,
    format_seconds,
    markdown_image,
    range_chart,
    stacked_columns,
)
from tasks.sql import open_warehouse
from warehouse.duck import load_sql, run_resilient, sources_named_in
from warehouse.store import ObjectStore

DASHBOARD_KEYS = ("dashboard-freshness", "dashboard-fetches", "dashboard-errors", "dashboard-publishers")
STAGES = ("published -> first seen", "first seen -> in a story", "in a story -> on a page", "published -> on a page")


TableCell = str | int | float | None
"""A cell of a table artifact: what the Prefect UI shows, sorts and searches."""


@dataclass(frozen=True, slots=True)
class Dashboard:
    """One dashboard: its artifact key, the markdown with its chart, and its table's rows."""

    key: str
    title: str
    markdown: str
    table: list[dict[str, TableCell]] = field(default_factory=list)


def _rows(con: Any, store: ObjectStore, name: str, now: datetime) -> list[dict[str, object]]:
    """The rows of one dashboard's query as of ``now``, by column name (the query's header lists them)."""

    def read() -> list[dict[str, object]]:
        result = con.sql(load_sql(name), params={"now": now})
        columns = result.columns
        return [dict(zip(columns, row, strict=True)) for row in result.fetchall()]

    return run_resilient(con, store, read)


def _tier(value: object) -> str:
    return "all tiers" if value is None else f"tier {value}"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(float(value), digits)


def freshness_dashboard(rows: Sequence[Mapping[str, Any]], now: datetime) -> Dashboard:
    bars = [RangeBar(_tier(r["tier"]), r["p50_seconds"], r["p95_seconds"], group=r["stage"]) for r in rows]
    whole = {r["tier"]: r for r in rows if r["stage"] == STAGES[-1]}
    if rows:
        chart = markdown_image(range_chart("Freshness: p50 and p95 per stage, last 24 h", bars),
                               "freshness per stage and tier")
        headline = ", ".join(f"{_tier(t)} p95 {format_seconds(r['p95_seconds'])}" for t, r in sorted(
            whole.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))
        summary = f"Published -> on a page: {headline}." if whole else "No article reached a page yet."
    else:
        chart, summary = "", "No article was first seen in the last 24 hours."
    table = [{"stage": r["stage"], "tier": _tier(r["tier"]), "articles": r["articles"],
              "p50": format_seconds(r["p50_seconds"]), "p95": format_seconds(r["p95_seconds"]),
              "p50 s": _round(r["p50_seconds"]), "p95 s": _round(r["p95_seconds"])} for r in rows]
    return Dashboard(DASHBOARD_KEYS[0], "Freshness",
                     f"## Freshness, last 24 h (as of {now:%Y-%m-%d %H:%M} UTC)\n\n{chart}\n\n{summary}\n", table)


def fetches_dashboard(rows: Sequence[Mapping[str, Any]], now: datetime) -> Dashboard:
    end = now.replace(minute=0, second=0, microsecond=0)
    hours = [end - timedelta(hours=23 - i) for i in range(24)]
    by_hour = {r["hour"].replace(tzinfo=now.tzinfo): r for r in rows}
    picked = [by_hour.get(h, {}) for h in hours]
    polls = sum(r["polls"] for r in rows)
    not_modified = sum(r["not_modified"] for r in rows)
    conditional = sum(r["conditional_share"] * r["polls"] for r in rows)
    chart = markdown_image(stacked_columns(
        "Feed polls per hour, last 24 h", [f"{h:%H}" for h in hours],
        [("200 OK", [p.get("ok", 0) for p in picked]), ("304 Not Modified", [p.get("not_modified", 0) for p in picked]),
         ("errors", [p.get("errors", 0) for p in picked])],
        share=[p.get("not_modified_share") for p in picked], share_label="304 share",
        colors=(PALETTE[0], PALETTE[1], ERROR)), "feed polls per hour")
    summary = (f"{polls} polls; {_share(not_modified / polls if polls else None)} answered 304 Not Modified; "
               f"{_share(conditional / polls if polls else None)} sent a validator (ETag or Last-Modified).")
    table = [{"hour": f"{r['hour']:%Y-%m-%d %H:00}", "polls": r["polls"], "200": r["ok"],
              "304": r["not_modified"], "errors": r["errors"], "304 share": _share(r["not_modified_share"]),
              "conditional share": _share(r["conditional_share"])} for r in rows]
    return Dashboard(DASHBOARD_KEYS[1], "Fetches",
                     f"## Feed polls, last 24 h (as of {now:%Y-%m-%d %H:%M} UTC)\n\n{chart}\n\n{summary}\n", table)


def errors_dashboard(rows: Sequence[Mapping[str, Any]], now: datetime) -> Dashboard:
    by_kind: dict[str, int] = defaultdict(int)
    by_host: dict[str, int] = defaultdict(int)
    for r in rows:
        by_kind[f"{r['error_kind']} ({r['fetch_kind']})"] += r["errors"]
        by_host[r["host"] or "?"] += r["errors"]
    kinds = sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0]))
    hosts = sorted(by_host.items(), key=lambda kv: (-kv[1], kv[0]))[:12]
    charts = (markdown_image(bar_list("Fetch errors by kind, last 24 h", [(k, v, str(v)) for k, v in kinds],
                                      color=ERROR), "errors by kind") + "\n\n"
              + markdown_image(bar_list("Fetch errors by host (top 12), last 24 h",
                                        [(h, v, str(v)) for h, v in hosts], color="#c08a4a"), "errors by host"))
    total = sum(by_kind.values())
    summary = f"{total} failed fetches from {len(by_host)} hosts." if total else "No fetch failed in the last 24 hours."
    table = [{"error kind": r["error_kind"], "host": r["host"], "fetch": r["fetch_kind"], "errors": r["errors"],
              "last status": r["last_status"], "last error at": f"{r['last_error_at']:%Y-%m-%d %H:%M}"} for r in rows]
    return Dashboard(DASHBOARD_KEYS[2], "Errors",
                     f"## Fetch errors, last 24 h (as of {now:%Y-%m-%d %H:%M} UTC)\n\n{charts}\n\n{summary}\n", table)


def publishers_dashboard(rows: Sequence[Mapping[str, Any]], now: datetime) -> Dashboard:
    fresh = sorted((r for r in rows if r["lag_p50_seconds"] is not None), key=lambda r: -r["lag_p50_seconds"])
    busy = sorted(rows, key=lambda r: (-r["requests_per_hour"], r["publisher_id"]))
    charts = (markdown_image(bar_list("Publish -> first seen, p50 per publisher, last 24 h",
                                      [(r["name"] or r["publisher_id"], r["lag_p50_seconds"],
                                        format_seconds(r["lag_p50_seconds"])) for r in fresh[:20]]),
                             "freshness per publisher") + "\n\n"
              + markdown_image(bar_list("Requests per hour per publisher (feeds and pages), last 24 h",
                                        [(r["name"] or r["publisher_id"], r["requests_per_hour"],
                                          f"{r['requests_per_hour']:.1f}/h") for r in busy[:20]], color="#6fa37c"),
                               "requests per hour per publisher"))
    throttled = [r["publisher_id"] for r in rows if r["throttled"]]
    summary = (f"{len(rows)} publishers; {sum(r['feed_polls'] for r in rows)} feed polls and "
               f"{sum(r['page_fetches'] for r in rows)} page fetches; "
               + (f"429/503 answers from {', '.join(throttled)}." if throttled else "no publisher answered 429 or 503."))
    table = [{"publisher": r["publisher_id"], "name": r["name"], "tier": r["tier"], "articles": r["articles"],
              "publish -> seen p50": format_seconds(r["lag_p50_seconds"]),
              "publish -> seen p95": format_seconds(r["lag_p95_seconds"]),
              "feed polls": r["feed_polls"], "page fetches": r["page_fetches"],
              "requests/h": _round(r["requests_per_hour"]), "conditional": _share(r["conditional_share"]),
              "304 share": _share(r["not_modified_share"]), "errors": r["errors"], "429/503": r["throttled"],
              "median poll interval": format_seconds(r["median_interval_seconds"]), "back-offs": r["backoffs"],
              "parked feeds": r["parked_feeds"]} for r in rows]
    return Dashboard(DASHBOARD_KEYS[3], "Publishers",
                     f"## Publishers: freshness and politeness, last 24 h (as of {now:%Y-%m-%d %H:%M} UTC)\n\n"
                     f"{charts}\n\n{summary}\n", table)


DASHBOARD_SQL = ("dashboard_freshness", "dashboard_fetches", "dashboard_errors", "dashboard_publishers")


def build_dashboards(store: ObjectStore, now: datetime) -> list[Dashboard]:
    """Every dashboard as of ``now``, from the store: each query reads the 24 hours it shows (issue 28)."""
    con = open_warehouse(store, sources_named_in(*(load_sql(n) for n in DASHBOARD_SQL)))
    try:
        return [
            freshness_dashboard(_rows(con, store, "dashboard_freshness", now), now),
            fetches_dashboard(_rows(con, store, "dashboard_fetches", now), now),
            errors_dashboard(_rows(con, store, "dashboard_errors", now), now),
            publishers_dashboard(_rows(con, store, "dashboard_publishers", now), now),
        ]
    finally:
        con.close()


def publish_dashboards(dashboards: Sequence[Dashboard]) -> None:
    """Each dashboard as a markdown artifact (chart) and a table artifact (numbers) of the current run."""
    for d in dashboards:
        create_markdown_artifact(markdown=d.markdown, key=d.key, description=f"{d.title} dashboard")
        create_table_artifact(table=d.table, key=f"{d.key}-table", description=f"{d.title}: every number")


@task(name="publish_dashboards", retries=1, retry_delay_seconds=2, timeout_seconds=300, cache_policy=NO_CACHE)
def publish_dashboards_task(store: ObjectStore, now: datetime) -> list[str]:
    dashboards = build_dashboards(store, now)
    publish_dashboards(dashboards)
    return [d.key for d in dashboards]
