"""Errors raised at the I/O edge; each keeps the URL, key or line it concerns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from newsroom.errors import NewsroomError
from warehouse.errors import StateBlobError

FetchErrorKind = Literal[
    "blocked_address", "dns", "connect", "timeout", "too_large", "too_many_redirects", "http_status",
    "robots_disallowed", "protocol", "bad_url",
]


class FetchError(NewsroomError):
    """A fetch that did not produce a usable response."""

    def __init__(self, kind: FetchErrorKind, message: str, *, url: str, status: int | None = None,
                 retry_after: str | None = None) -> None:
        super().__init__(f"{kind}: {message} (url={url})")
        self.kind = kind
        self.url = url
        self.status = status
        self.retry_after = retry_after


class QueryTimeoutError(NewsroomError):
    """A query of ``newsroom sql`` ran past its time limit (``NEWSROOM_WAREHOUSE_SQL_TIMEOUT_SECONDS``)
    and was stopped."""


ArticleBudgetKind = Literal["time_budget", "memory_budget", "worker_lost", "worker_start"]


class ArticleBudgetError(NewsroomError):
    """One article's extraction, features and embedding did not finish within its budget in an article
    worker (``time_budget``, ``memory_budget``), its worker died under it (``worker_lost``), or no worker
    could be started for it (``worker_start``); the page is recorded with ``kind``, the run goes on."""

    def __init__(self, kind: ArticleBudgetKind, message: str, *, url: str) -> None:
        super().__init__(f"{kind}: {message} (url={url})")
        self.kind = kind
        self.url = url


class WriterFencedError(NewsroomError):
    """Another writer moved this language's checkpoint first; this run's decisions are dropped."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True)
class RowError:
    """Why one row (a CSV record, an OPML outline) of a registry file was refused."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class RegistryImportError(NewsroomError, ValueError):
    """A registry file with invalid rows: every row's error, by line (nothing was imported)."""

    def __init__(self, errors: Sequence[RowError], *, path: str | None = None) -> None:
        self.errors = tuple(errors)
        self.path = path
        shown = "; ".join(str(e) for e in self.errors[:3])
        more = f" (and {len(self.errors) - 3} more)" if len(self.errors) > 3 else ""
        super().__init__(f"{path + ': ' if path else ''}{len(self.errors)} invalid row(s): {shown}{more}")


class StoryNotListedError(NewsroomError, LookupError):
    """No live page (of the edition asked for) lists the story (``newsroom explain``)."""


class StateObjectError(StateBlobError):
    """A state object of a writer's chain that cannot be read; ``key`` names it."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message, key=key)
        self.key: str = key
