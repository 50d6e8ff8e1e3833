"""Errors the flows and the command line raise on purpose, on the one root (newsroom.errors)."""

from __future__ import annotations

from collections.abc import Sequence

from newsroom.errors import NewsroomError


class ChildFailed(NewsroomError):  # noqa: N818 - named for what the reader sees
    """A child process (the replay site, the pipeline, the API) exited while the demo needed it."""


class LanguagesFailedError(NewsroomError):
    """A writer flow run (cluster or repair) ran every language, and some of them failed.

    Attributes:
        languages: The languages whose run failed, in the order they ran.
    """

    def __init__(self, message: str, languages: Sequence[str]) -> None:
        super().__init__(message)
        self.languages = tuple(languages)


class WriterRunsFailedError(NewsroomError):
    """A writer session ran every tick, and some of its language runs failed.

    Attributes:
        failed: How many runs failed.
    """

    def __init__(self, message: str, failed: int) -> None:
        super().__init__(message)
        self.failed = failed


class CycleStepsFailedError(NewsroomError):
    """A pipeline cycle ran every step, and some of them failed.

    Attributes:
        steps: The steps that failed, in the order they ran.
    """

    def __init__(self, message: str, steps: Sequence[str]) -> None:
        super().__init__(message)
        self.steps = tuple(steps)
