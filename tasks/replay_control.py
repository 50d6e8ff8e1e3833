"""Talk to a running replay site's control host: its clock and its publisher list."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import httpx


def set_replay_clock(control_url: str, now: datetime) -> None:
    """Move the replay site's simulated clock forward to ``now``."""
    response = httpx.post(f"{control_url}/_replay/clock", json={"now": now.isoformat()}, timeout=10, trust_env=False)
    response.raise_for_status()


def download_publishers_csv(control_url: str, path: Path) -> Path:
    """Save the replay site's publishers as a registry CSV for ``newsroom publishers import``."""
    response = httpx.get(f"{control_url}/_replay/publishers.csv", timeout=10, trust_env=False)
    response.raise_for_status()
    path.write_text(response.text, encoding="utf-8")
    return path
