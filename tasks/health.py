"""``newsroom health``: the checks a data engineer wants paged about.

Flags: freshness lag p95 above 5 minutes; a tier-1 publisher silent for more than twice its usual
gap; no page published for 3 cycles; the same article twice in a top 10; a language writer whose
checkpoint stopped moving while articles wait for it; and every corrupt or missing object the site
or the writers depend on (``corrupt_object``, ``missing_object``, issue 16): a log segment or
registry table that cannot be read, a pointer, the version it names, a checkpoint, the state blob
it names, the robots.txt cache, and offsets missing from a story-change log.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, NotRequired, TypedDict, cast

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.clock import resolve_now
from tasks.sql import open_warehouse
from warehouse import layout
from warehouse.catalog import LOG_TABLES, footer_problem, plan_table
from warehouse.damage import collect_damage
from warehouse.duck import load_sql, run_resilient, sources_named_in
from warehouse.errors import ObjectNotFoundError, SnapshotNotFoundError
from warehouse.integrity import (
    change_log_gaps,
    check_object,
    check_pages,
    check_writers,
    finding,
    parse_checkpoint,
    unique,
)
from warehouse.pointers import PagePointer
from warehouse.schemas import FEED_STATE_SCHEMA, FEEDS_SCHEMA, PUBLISHERS_SCHEMA
from warehouse.snapshots import list_live_pages, read_live_page, read_pointer
from warehouse.store import ObjectStore
from warehouse.tables import list_segments

HEALTH_SQL = ("health_freshness", "health_silent_publishers")
STATE_TABLES = ((layout.FEED_STATE_KEY, FEED_STATE_SCHEMA), (layout.PUBLISHERS_KEY, PUBLISHERS_SCHEMA),
                (layout.FEEDS_KEY, FEEDS_SCHEMA))
"""The state and registry tables health checks by their footers (queries read only what they name)."""
_FIRST_SEEN = "select min(first_seen_at) from articles where first_seen_at <= $now"


@dataclass(frozen=True, slots=True)
class HealthFlag:
    check: str
    subject: str
    detail: str


@dataclass(frozen=True, slots=True)
class HealthLimits:
    cycle_seconds: int = 60
    lag_p95_seconds: float = 300.0
    stale_cycles: int = 3


def check_health(store: ObjectStore, now: datetime, limits: HealthLimits | None = None) -> list[HealthFlag]:
    """Every failing check, as flags; an empty list means healthy."""
    limits = limits or HealthLimits()
    stale = timedelta(seconds=limits.cycle_seconds * limits.stale_cycles)
    flags: list[HealthFlag] = []
    with collect_damage() as damaged:
        # Every log's files are planned (footers only), so a damaged segment of any log is flagged;
        # the checks below read the rows of the windows they look at (issue 28).
        plans = {name: plan_table(store, table) for name, table in LOG_TABLES.items()}
        con = open_warehouse(store, sources_named_in(*(load_sql(n) for n in HEALTH_SQL), _FIRST_SEEN), plans)
    try:
        checkpoint_offsets, writer_findings = check_writers(store)
        findings = [*(finding(d.key, d.problem) for d in damaged), *check_pages(store), *writer_findings,
                    *change_log_gaps(store, plans["story_changes"], checkpoint_offsets)]
        robots = check_object(store, layout.ROBOTS_CACHE_KEY)
        findings += [robots] if robots is not None else []
        findings += [finding(key, problem) for key, schema in STATE_TABLES
                     if (problem := footer_problem(store, key, schema)) is not None]
        def rows(sql: str) -> list[tuple[Any, ...]]:
            return run_resilient(con, store, lambda: con.sql(sql, params={"now": now}).fetchall())

        lags = rows(load_sql("health_freshness"))
        overall = [row for row in lags if row[0] is None]
        if overall and overall[0][3] is not None and overall[0][3] > limits.lag_p95_seconds:
            per_tier = ", ".join(f"tier {t}: {p95:.0f}s" for t, _, _, p95 in lags if t is not None)
            flags.append(HealthFlag("freshness_lag", "all feeds",
                                    f"p95 publish->first-seen {overall[0][3]:.0f}s over {overall[0][1]} articles "
                                    f"({per_tier})"))
        for publisher_id, last_seen, gap, silent in rows(load_sql("health_silent_publishers")):
            flags.append(HealthFlag("silent_tier1_feed", publisher_id,
                                    f"silent {silent:.0f}s, usual gap {gap:.0f}s, last article {last_seen}"))
        (first_seen,), = rows(_FIRST_SEEN)
    finally:
        con.close()

    pages = list_live_pages(store)
    newest = max((p.published_at for p in (_pointer_or_none(store, e, s) for e, s in pages) if p), default=None)
    if newest is not None and now - resolve_now(newest) > stale:
        flags.append(HealthFlag("stale_snapshot", "pages", f"newest page published {newest}"))
    elif newest is None and first_seen is not None and now - first_seen > stale:
        # Articles for longer than a few cycles, and still no page: the rank job never published.
        flags.append(HealthFlag("stale_snapshot", "pages", f"no page published; articles since {first_seen}"))
    for edition, section in pages:
        if section != "top":
            continue
        try:
            stories = json.loads(read_live_page(store, edition, section).data)["stories"][:10]
        except (SnapshotNotFoundError, ValueError, KeyError, TypeError):
            continue  # flagged below as a damaged pointer or version
        seen: dict[str, str] = {}
        for story in stories:
            for source in story["sources"]:
                other = seen.setdefault(source["article_id"], story["story_id"])
                if other != story["story_id"]:
                    flags.append(HealthFlag("duplicate_in_top10", f"{edition}/top",
                                            f"article {source['article_id']} in {other} and {story['story_id']}"))

    segments = set(list_segments(store, layout.ARTICLES_PREFIX))
    for key in store.list(layout.STORY_STATE_PREFIX):
        if not key.endswith("/checkpoint.json"):
            continue
        try:
            checkpoint = parse_checkpoint(store.get(key).data)
        except ObjectNotFoundError:
            checkpoint = None
        if checkpoint is None:
            continue  # flagged below as a damaged checkpoint
        waiting = [k for k in segments - set(checkpoint.consumed) if "/compact-" not in k]
        updated = checkpoint.updated_at
        if waiting and updated and now - resolve_now(updated) > stale:
            flags.append(HealthFlag("writer_stalled", key.split("/")[2],
                                    f"checkpoint last moved {updated}; {len(waiting)} segments waiting"))
    for f in unique(findings):
        check = "missing_object" if f.problem.startswith("missing") else "corrupt_object"
        flags.append(HealthFlag(check, f.key, f"{f.kind}: {f.problem} (docs/store-faults.md; newsroom doctor)"))
    return flags


def _pointer_or_none(store: ObjectStore, edition: str, section: str) -> PagePointer | None:
    try:
        return read_pointer(store, edition, section)
    except SnapshotNotFoundError:
        return None  # flagged as a corrupt pointer


class HealthFlagJson(TypedDict):
    """A :class:`HealthFlag` in the report."""

    check: str
    subject: str
    detail: str


class HealthReportJson(TypedDict):
    """What the health flow reports: healthy when nothing is flagged, and each flag."""

    healthy: bool
    flags: list[HealthFlagJson]
    events: NotRequired[int]
    """How many ``newsroom.health.<check>`` events the flow sent (one per flag)."""
    dashboards: NotRequired[list[str]]
    """The dashboards the flow refreshed."""


def health_report(flags: list[HealthFlag]) -> HealthReportJson:
    """The report of ``flags``."""
    return {"healthy": not flags, "flags": [cast("HealthFlagJson", asdict(f)) for f in flags]}


@task(name="check_health", retries=1, retry_delay_seconds=2, timeout_seconds=300, cache_policy=NO_CACHE)
def check_health_task(store: ObjectStore, now: datetime) -> HealthReportJson:
    return health_report(check_health(store, now))
