"""Errors the flows and the command line raise on purpose, on the one root (newsroom.errors)."""

from __future__ import annotations

from newsroom.errors import NewsroomError


class ChildFailed(NewsroomError):  # noqa: N818 - named for what the reader sees
    """A child process (the replay site, the pipeline, the API) exited while the demo needed it."""
