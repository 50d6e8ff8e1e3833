"""The alert flow: what the automations of ``prefect.yaml`` run when a seed's alert fires (issue 31).

Each health flag is a ``newsroom.health.<check>`` event and a fenced writer a
``newsroom.writer.fenced`` event (``tasks.events``). The ``route_alert-on-flag`` deployment carries
one trigger per alert the seeds ask for (freshness p95 over 5 minutes, a tier-1 publisher silent for
twice its usual gap, no page for 3 cycles, a fenced writer); Prefect makes each an automation,
listed in the UI's Automations page, which runs this flow with the event's details. The flow logs
the alert at ERROR and keeps it as an ``alert-<check>`` artifact; an engineer routes it further
from the UI (a notification on the automation, or on this flow's runs).
"""

from __future__ import annotations

import re
from typing import TypedDict

from prefect import flow, get_run_logger

from tasks.reports import publish_artifact

ALERT_TEXT_MAX_CHARS = 1000


def alert_key(check: str) -> str:
    """The artifact key of an alert (artifact keys are lower-case letters, digits and dashes).

    >>> alert_key("silent_tier1_feed")
    'alert-silent-tier1-feed'
    """
    return "alert-" + (re.sub(r"[^a-z0-9]+", "-", check.lower()).strip("-") or "unknown")


class RoutedAlert(TypedDict):
    """The alert as logged and kept (each text cut to its cap)."""

    check: str
    subject: str
    detail: str
    automation: str


@flow(name="route_alert")
def route_alert(check: str, subject: str = "", detail: str = "", automation: str = "") -> RoutedAlert:
    """Log one fired alert at ERROR and keep it as an ``alert-<check>`` artifact."""
    check, subject, detail = check[:100], subject[:ALERT_TEXT_MAX_CHARS], detail[:ALERT_TEXT_MAX_CHARS]
    get_run_logger().error("alert check=%s subject=%s detail=%s automation=%s", check, subject, detail, automation)
    publish_artifact(alert_key(check), f"## Alert: {check}\n\n- subject: {subject}\n- detail: {detail}\n"
                                       f"- automation: {automation}\n", f"alert {check}")
    return {"check": check, "subject": subject, "detail": detail, "automation": automation}
