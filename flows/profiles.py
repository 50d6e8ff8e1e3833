"""Profiles flow: fold the clicks log into readers' decayed topic and source weights, every minute."""

from __future__ import annotations

from prefect import flow, get_run_logger

from tasks.clock import resolve_now
from tasks.profiles import fold_clicks_task
from tasks.settings import get_profiles_settings
from tasks.storage import configured_store


@flow(name="fold_profiles")
def fold_profiles(now: str | None = None) -> dict[str, int]:
    """Fold every new click segment into the profile store as of ``now``."""
    logger = get_run_logger()
    settings = get_profiles_settings()
    summary = fold_clicks_task(configured_store(), settings.profiles_at, resolve_now(now), settings.half_life_hours)
    logger.info("profiles_done segments=%d clicks=%d readers=%d", summary["segments"], summary["clicks"],
                summary["readers"])
    return summary
