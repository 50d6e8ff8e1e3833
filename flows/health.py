"""Health flow: the monitoring checks, as a scheduled run with a summary artifact, and the dashboards
(freshness, fetches, errors, publishers) refreshed as Prefect artifacts (issue 18)."""

from __future__ import annotations

from prefect import flow, get_run_logger

from tasks.clock import resolve_now
from tasks.dashboards import publish_dashboards_task
from tasks.events import emit_flags
from tasks.health import HealthReportJson, check_health_task
from tasks.reports import health_markdown, publish_artifact
from tasks.storage import configured_store


@flow(name="check_health")
def check_health(now: str | None = None) -> HealthReportJson:
    """Flag freshness lag, silent tier-1 feeds, stale snapshots, duplicates and stalled writers, each
    flag also a ``newsroom.health.<check>`` Prefect event; refresh the dashboards."""
    at = resolve_now(now)
    store = configured_store()
    report = check_health_task(store, at)
    logger = get_run_logger()
    for flag in report["flags"]:
        logger.warning("health_flag check=%s subject=%s detail=%s", flag["check"], flag["subject"], flag["detail"])
    # Each flag is a Prefect event too, ``newsroom.health.<check>``: prefect.yaml's automations route
    # them (issue 31).
    report["events"] = emit_flags(report["flags"])
    publish_artifact("health", health_markdown(report, at.isoformat()), "health checks")
    report["dashboards"] = publish_dashboards_task(store, at)
    return report
