"""Maintenance flow (hourly): compaction, retention, page-version pruning."""

from __future__ import annotations

from prefect import flow, get_run_logger

from tasks.clock import resolve_now
from tasks.maintenance import MaintenanceReportJson, run_maintenance_task
from tasks.reports import maintenance_markdown, publish_artifact
from tasks.storage import configured_store


@flow(name="maintain_store")
def maintain_store(now: str | None = None, keep_page_versions: int = 20, keep_page_hours: float = 48.0
                   ) -> MaintenanceReportJson:
    """Compact small log segments, apply retention, and prune page versions that are neither among the
    ``keep_page_versions`` before the live one (rollback) nor younger than ``keep_page_hours`` (time travel)."""
    at = resolve_now(now)
    report = run_maintenance_task(configured_store(), at, keep_page_versions, keep_page_hours)
    get_run_logger().info("maintenance_done %s", " ".join(f"{k}={v}" for k, v in report.items()))
    publish_artifact("maintenance", maintenance_markdown(report, at.isoformat()), "maintenance summary")
    return report
