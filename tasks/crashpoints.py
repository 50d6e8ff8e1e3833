"""Named points where a test can kill the current process with SIGKILL, to prove crash safety.

``NEWSROOM_DEBUG_CRASH_POINT=cluster.after_changes`` makes the process kill itself, for real and
without cleanup, when it reaches that point. Unset (always, in production) it does nothing.
"""

from __future__ import annotations

import os
import signal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

CRASH_POINTS = (
    "ingest.after_fetch",      # pages fetched and extracted, nothing written
    "ingest.after_segment",    # the articles segment written, feed state not yet
    "cluster.after_changes",   # story changes written, checkpoint not yet moved
    "cluster.after_state",     # the run's state delta (a base on a first commit) written, no changes yet
    "cluster.after_fold",      # a compaction's new base written, the note naming it not yet
    "rank.before_aggregates_pointer",  # the story aggregates' fold written, their pointer not yet moved
    "rank.after_stories",      # story snapshot published, no page yet
    "rank.mid_pages",          # some pages published, the rest not
    "rank.before_pointer",     # a page version written, its pointer not yet moved
)


class DebugSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NEWSROOM_DEBUG_", extra="ignore")

    crash_point: str | None = Field(None, description="Tests only: a point from CRASH_POINTS to SIGKILL at.")

    @field_validator("crash_point")
    @classmethod
    def _known_point(cls, value: str | None) -> str | None:
        if value is not None and value not in CRASH_POINTS:
            raise ValueError(f"unknown crash point {value!r}; one of {', '.join(CRASH_POINTS)}")
        return value


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL if the debug setting names ``name``."""
    if name not in CRASH_POINTS:
        raise ValueError(f"unknown crash point {name!r}")
    if DebugSettings().crash_point == name:
        os.kill(os.getpid(), signal.SIGKILL)
