"""Source readers: how a due source's content is read, by its kind (``FeedJob.kind``).

A reader turns one source into a :class:`~transforms.poll_outcome.PollExchange`: the answer's status and
headers, and the items it holds as a ``ParsedFeed``, or why there are none. Everything after the
read (new items, validators, errors, the next poll) is the same for every kind:
``transforms.poll_outcome.settle_poll``, called by :func:`tasks.ingest.poll.poll_feed`.

Today there is one kind, ``feed``: a conditional GET and ``parse_feed``, which reads RSS, Atom,
JSON Feed and news sitemaps alike. How to add one is in the :mod:`tasks.ingest` docstring.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import httpx

from tasks.errors import FetchError
from tasks.http import fetch_url
from tasks.ingest.feed_job import FeedJob, SourceKind
from tasks.settings import IngestSettings
from transforms.errors import FeedRejectedError, TransformError
from transforms.feeds import parse_feed
from transforms.poll_outcome import RECENT_GUIDS, PollExchange, conditional_headers


class SourceReader(Protocol):
    """Reads one source. Never raises for anything the publisher sends: a failed request or an
    unusable answer is the exchange's ``error_kind``."""

    def __call__(self, job: FeedJob, client: httpx.Client, settings: IngestSettings) -> PollExchange: ...


def read_feed(job: FeedJob, client: httpx.Client, settings: IngestSettings) -> PollExchange:
    """A feed: a conditional GET of its URL and, on a 2xx, the parse of its body.

    At most :data:`~transforms.poll_outcome.RECENT_GUIDS` items are read, the cap on how many a feed's
    state remembers.
    """
    try:
        result = fetch_url(client, job.url, settings, max_bytes=settings.max_feed_bytes,
                           headers=conditional_headers(job.state))
    except FetchError as e:
        return PollExchange(status=e.status, error_kind=e.kind, error=str(e))
    if not 200 <= result.status < 300:
        return PollExchange(status=result.status, headers=result.headers, elapsed_ms=result.elapsed_ms)
    try:
        parsed = parse_feed(result.body, result.final_url, headers=result.headers,
                            max_items=RECENT_GUIDS, max_bytes=settings.max_feed_bytes)
    except FeedRejectedError as e:
        return PollExchange(result.status, result.headers, None, "rejected", str(e), result.elapsed_ms)
    except TransformError as e:
        return PollExchange(result.status, result.headers, None, "parse", f"{type(e).__name__}: {e}",
                            result.elapsed_ms)
    return PollExchange(result.status, result.headers, parsed, elapsed_ms=result.elapsed_ms)


SOURCE_READERS: Mapping[SourceKind, SourceReader] = {"feed": read_feed}
"""The reader of each kind of source."""


def read_source(job: FeedJob, client: httpx.Client, settings: IngestSettings) -> PollExchange:
    """Read ``job``'s source with the reader of its kind."""
    return SOURCE_READERS[job.kind](job, client, settings)
