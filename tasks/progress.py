"""Progress for long commands: bars on a terminal, nothing in a log.

``newsroom cluster-eval``, ``extract``, ``export``, ``rank --as-of`` and the bench scripts run for
minutes over big inputs (issue 18). The plain functions behind them take a :class:`Progress` and
report stages and counts to it; the command line passes :func:`terminal_progress`, which draws
rich progress bars on standard error when it is a terminal and reports nothing otherwise, so CI
logs and redirected output stay as they were. Tests and library callers pass nothing
(:data:`NO_PROGRESS`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any, Protocol, TypeVar

T = TypeVar("T")

Advance = Callable[[int], None]
"""Called with how many more items of the current stage are done."""


class Progress(Protocol):
    def stage(self, description: str, total: int | None = None) -> Advance:
        """Start a stage of ``total`` items (None: unknown); returns the function that advances it."""
        ...


class _Silent:
    def stage(self, description: str, total: int | None = None) -> Advance:
        return _ignore


def _ignore(count: int) -> None:
    pass


NO_PROGRESS: Progress = _Silent()


def counted(items: Iterable[T], advance: Advance) -> Iterator[T]:
    """``items``, advancing the stage by one as each is taken (for a loop that is not ours).

    >>> seen = []
    >>> list(counted("ab", seen.append)), seen
    (['a', 'b'], [1, 1])
    """
    for item in items:
        yield item
        advance(1)


class _RichProgress:
    def __init__(self, progress: Any) -> None:
        self._progress = progress
        self._current: Any = None

    def stage(self, description: str, total: int | None = None) -> Advance:
        if self._current is not None:  # the previous stage is over: show it full
            task = self._progress.tasks[self._current]
            self._progress.update(self._current, total=task.completed or 1, completed=task.completed or 1)
        task_id = self._progress.add_task(description, total=total)
        self._current = task_id
        return lambda count: self._progress.advance(task_id, count)


def is_terminal(stream: IO[str]) -> bool:
    """Whether progress should be drawn on ``stream``: a terminal that is not ``TERM=dumb``."""
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except ValueError:  # a closed stream
        return False


@contextmanager
def terminal_progress(stream: IO[str] | None = None) -> Iterator[Progress]:
    """Progress bars on ``stream`` (standard error by default) when it is a terminal, else nothing."""
    stream = stream or sys.stderr
    if not is_terminal(stream):
        yield NO_PROGRESS
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as RichProgress

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    with RichProgress(*columns, console=Console(file=stream), transient=False) as progress:
        yield _RichProgress(progress)
