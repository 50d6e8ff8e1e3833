"""What one poll means for a feed: its new items, its validators, its error or warning, its next state.

:func:`settle_poll` decides which items are new (guid bookkeeping), which validators are kept and
sent back (RFC 9110 §8.8, §13.1), and what is an error and what a warning, then asks
:func:`transforms.polling.decide_next_poll` when to poll next. ``tasks/ingest/poll.py`` only reads
the source (``tasks/ingest/readers.py``). Pure: no clock, ``now`` is an argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from transforms.feeds import FeedItem, ParsedFeed, is_plausible_published_at
from transforms.polling import PollResponse, PollState, decide_next_poll
from transforms.records import FeedState
from transforms.websub import is_lease_live


@dataclass(frozen=True, slots=True)
class FeedReport:
    """One feed's poll in a run: the summary line, the run report's failures, WebSub upkeep."""

    feed_id: str
    url: str
    status: int | None
    new_items: int
    error_kind: str | None
    error: str | None
    next_poll_at: datetime
    elapsed_ms: float
    interval_seconds: int = 0
    poll_reason: str = ""
    warning_kind: str | None = None
    warning: str | None = None
    is_parked: bool = False
    hub_url: str | None = None
    topic_url: str | None = None
    sent_validators: bool = False
    """The poll sent If-None-Match or If-Modified-Since (a conditional GET, RFC 9110 section 13)."""


@dataclass(frozen=True, slots=True)
class PollExchange:
    """What one conditional GET of a feed gave, as the fetching task saw it.

    ``status`` is None when no response came; ``parsed`` is the parsed body of a 2xx; ``error_kind``
    names a failure of the request or of the parse (``timeout``, ``rejected``, ``parse``, ...).
    ``headers`` are the response's, with lower-case names.
    """

    status: int | None
    headers: Mapping[str, str] = field(default_factory=dict)
    parsed: ParsedFeed | None = None
    error_kind: str | None = None
    error: str | None = None
    elapsed_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class PollOutcome:
    """A feed's next state, the items new to it (in feed order) and the poll's report."""

    state: FeedState
    new_items: tuple[FeedItem, ...]
    report: FeedReport


RECENT_GUIDS = 200
"""Guids a feed's state remembers (newest first): an item seen among them is not new."""
VALIDATOR_MAX_CHARS = 256
"""Longest ETag / Last-Modified kept and sent back; real ones are a few dozen characters."""
ERROR_MAX_CHARS = 500


def clean_validator(value: object) -> str | None:
    """``value`` if it can be stored and sent back as ``If-None-Match``/``If-Modified-Since``, else None.

    Only printable ASCII (visible characters and spaces, RFC 9110 §8.8.3 ``etagc`` and §5.6.7
    HTTP-date) of at most :data:`VALIDATOR_MAX_CHARS` characters is kept: httpx refuses to encode
    anything else, and a stored one would then fail every later poll of the feed.

    >>> clean_validator('W/"v1"'), clean_validator('"caf\\u00e9"'), clean_validator("a\\r\\nb")
    ('W/"v1"', None, None)
    """
    if not isinstance(value, str) or len(value) > VALIDATOR_MAX_CHARS or not value.strip():
        return None
    return value if value.isascii() and value.isprintable() else None


def with_sendable_validators(state: FeedState) -> FeedState:
    """``state`` without a stored validator that cannot be sent back (stored before they were
    checked): dropped whatever the poll brings, so it can never fail the request."""
    etag, last_modified = clean_validator(state.etag), clean_validator(state.last_modified)
    if (etag, last_modified) == (state.etag, state.last_modified):
        return state
    return replace(state, etag=etag, last_modified=last_modified)


def conditional_headers(state: FeedState) -> dict[str, str]:
    """``If-None-Match`` / ``If-Modified-Since`` for a feed's next poll (RFC 9110 §13.1), unless its
    validators proved useless.

    >>> conditional_headers(FeedState("f", etag='"v1"'))
    {'If-None-Match': '"v1"'}
    """
    state = with_sendable_validators(state)
    headers = {}
    if not state.is_validators_useless:
        if state.etag:
            headers["If-None-Match"] = state.etag
        if state.last_modified:
            headers["If-Modified-Since"] = state.last_modified
    return headers


def poll_state_of(state: FeedState) -> PollState:
    """What :func:`decide_next_poll` needs of a stored state."""
    return PollState(
        interval_seconds=state.interval_seconds, last_polled_at=state.last_polled_at,
        rate_counts=tuple(state.rate_counts), rate_observed_seconds=float(state.rate_observed_seconds),
        error_streak=int(state.error_streak), validator_miss_streak=int(state.validator_miss_streak),
        is_validators_useless=bool(state.is_validators_useless),
    )


def bad_date_count(items: Sequence[FeedItem], now: datetime) -> int:
    """Items with no usable date: none at all, or an implausible published one."""
    return sum(1 for i in items if i.published_at is None and i.updated_at is None
               or (i.published_at is not None and not is_plausible_published_at(i.published_at, now)))


def _new_items(state: FeedState, parsed: ParsedFeed, max_items: int) -> tuple[list[FeedItem], list[FeedItem], tuple[str, ...]]:
    """(fresh items, those taken this poll, the guids to remember): at most ``max_items`` are taken
    and only they, with the items already seen, are marked seen, newest first."""
    seen = set(state.recent_guids)
    fresh = [item for item in parsed.items if item.guid not in seen]
    taken_items = fresh[:max_items]
    taken = {item.guid for item in taken_items}
    marked = [item.guid for item in parsed.items if item.guid in seen or item.guid in taken]
    kept = set(marked)
    recent = (marked + [g for g in state.recent_guids if g not in kept])[:RECENT_GUIDS]
    return fresh, taken_items, tuple(recent)


def settle_poll(state: FeedState, exchange: PollExchange, now: datetime, *, feed_url: str, max_items: int,
                floor_seconds: int, ceiling_seconds: int, backstop_seconds: int | None = None) -> PollOutcome:
    """The outcome of one conditional GET: the feed's next state, its new items and the report.

    * Guids: items not among the state's ``recent_guids`` are new; at most ``max_items`` are taken,
      and the rest are not marked seen, so the next poll gets them.
    * Validators change only on 2xx (RFC 9110 §8.8); a response without ``Last-Modified`` keeps the
      old one, one sent but unusable (non-ASCII, too long) clears it, and while items are left over
      the old ones stay, so no 304 hides them.
    * An error is a failed request, a non-2xx other than 304, or a body that is no usable feed; a
      usable but flawed feed (broken XML, garbage dates) is a ``warning`` and is ingested.
    * The feed's WebSub hub (``link rel=hub``) and topic (``rel=self``) are read from a usable 2xx
      only; while a lease is live the next poll is a backstop, at least ``backstop_seconds`` away.
    """
    state = with_sendable_validators(state)
    sent_validators = bool(conditional_headers(state))
    parsed = exchange.parsed
    read = _read_answer(state, exchange, now, max_items=max_items, sent_validators=sent_validators)
    changes = dict(read.changes)
    hub_url = changes.get("hub_url", state.hub_url)
    is_live = bool(hub_url) and is_lease_live(state.lease_expires_at, now)
    decision = decide_next_poll(poll_state_of(state), _poll_response(exchange, read, now, sent_validators), now,
                                floor_seconds=floor_seconds, ceiling_seconds=max(floor_seconds, ceiling_seconds),
                                backstop_seconds=backstop_seconds if is_live else None)
    changes.update(
        last_polled_at=now, last_status=exchange.status, interval_seconds=decision.interval_seconds,
        next_poll_at=decision.next_poll_at, poll_reason=decision.reason, last_new_items=len(read.new),
        error_streak=decision.error_streak, rate_counts=decision.rate_counts,
        rate_observed_seconds=decision.rate_observed_seconds,
        validator_miss_streak=decision.validator_miss_streak, is_validators_useless=decision.is_validators_useless,
        is_parked=decision.is_parked, parked_reason=decision.parked_reason,
    )
    if read.error_kind or read.warning_kind:
        changes.update(last_error_kind=read.error_kind or read.warning_kind, last_error=read.error or read.warning,
                       last_error_at=now)
    if parsed is not None and (bool(parsed.items) or not parsed.is_malformed):
        changes["topic_url"] = parsed.self_url or feed_url  # the WebSub topic (rel=self), read with hub_url
    # A 304 (or an error) says nothing new of rel=hub or rel=self: the ones last read stand.
    state = replace(state, **changes)  # type: ignore[arg-type]
    report = FeedReport(state.feed_id, feed_url, exchange.status, len(read.new), read.error_kind, read.error,
                        decision.next_poll_at, exchange.elapsed_ms, decision.interval_seconds, decision.reason,
                        read.warning_kind, read.warning, decision.is_parked, hub_url=state.hub_url,
                        topic_url=state.topic_url or feed_url, sent_validators=sent_validators)
    return PollOutcome(state, read.new, report)


@dataclass(frozen=True, slots=True)
class _AnswerRead:
    """What a poll's answer says of the feed, its schedule aside: the items new to it, the state's
    changes (hub, guids, validators), and its error or warning."""

    new: tuple[FeedItem, ...] = ()
    changes: Mapping[str, object] = field(default_factory=dict)
    validators_changed: bool = False
    error_kind: str | None = None
    error: str | None = None
    warning_kind: str | None = None
    warning: str | None = None


def _read_answer(state: FeedState, exchange: PollExchange, now: datetime, *, max_items: int,
                 sent_validators: bool) -> _AnswerRead:
    """:func:`settle_poll`'s reading of the answer: a failed request keeps its error, a non-2xx but
    304 is an ``http_status`` error, a 2xx body with no items and broken XML a ``parse`` error; a
    usable body gives its new items and validators, with a warning when it is flawed."""
    status, headers, parsed = exchange.status, exchange.headers, exchange.parsed
    if exchange.error_kind is not None:
        return _AnswerRead(error_kind=exchange.error_kind, error=exchange.error)
    if status is None or not 200 <= status < 300 or parsed is None:
        if status == 304:
            return _AnswerRead()
        return _AnswerRead(error_kind="http_status", error=f"HTTP {status}" + (
            f" (Retry-After: {headers['retry-after']})" if "retry-after" in headers else ""))
    changes: dict[str, object] = {}
    if parsed.items or not parsed.is_malformed:
        changes["hub_url"] = parsed.hub_url
    if parsed.is_malformed and not parsed.items:
        return _AnswerRead(changes=changes, error_kind="parse", error=f"not a usable feed: {parsed.error or 'no items'}")
    fresh, new, changes["recent_guids"] = _new_items(state, parsed, max_items)
    raw_etag, raw_last_modified = headers.get("etag"), headers.get("last-modified")
    etag, last_modified = clean_validator(raw_etag), clean_validator(raw_last_modified)
    validators_changed = sent_validators and (
        bool(etag) and etag != state.etag or bool(last_modified) and last_modified != state.last_modified)
    if len(fresh) == len(new):
        changes["etag"] = etag if raw_etag else state.etag
        changes["last_modified"] = last_modified if raw_last_modified else state.last_modified
    warning_kind = warning = None
    bad_dates = bad_date_count(parsed.items, now)
    if parsed.is_malformed:
        warning_kind, warning = "malformed", f"feed used as is: {parsed.error}"
    elif bad_dates:
        warning_kind, warning = "bad_dates", f"{bad_dates} of {len(parsed.items)} items have no usable date"
    return _AnswerRead(tuple(new), changes, validators_changed, warning_kind=warning_kind, warning=warning)


def _poll_response(exchange: PollExchange, read: _AnswerRead, now: datetime, sent_validators: bool) -> PollResponse:
    """What :func:`decide_next_poll` needs of a poll: the answer's hints and the new items' dates.
    Implausible dates (1900, 9999) say nothing of the feed's rate (#16)."""
    parsed, headers = exchange.parsed, exchange.headers
    usable_times = tuple(i.published_at if i.published_at is not None
                         and is_plausible_published_at(i.published_at, now) else None for i in read.new)
    dated = [i.published_at for i in (parsed.items if parsed else ()) if i.published_at is not None
             and is_plausible_published_at(i.published_at, now)]
    return PollResponse(
        status=exchange.status, is_error=read.error_kind is not None, new_item_times=usable_times,
        oldest_item_at=min(dated) if dated else None,
        retry_after=headers.get("retry-after"), cache_control=headers.get("cache-control"),
        expires=headers.get("expires"), ttl_minutes=parsed.ttl_minutes if parsed else None,
        skip_hours=parsed.skip_hours if parsed else frozenset(), skip_days=parsed.skip_days if parsed else frozenset(),
        sent_validators=sent_validators, validators_changed=read.validators_changed,
    )


def settle_failed_poll(state: FeedState, kind: str, message: str, now: datetime, *, feed_url: str,
                       floor_seconds: int, ceiling_seconds: int) -> PollOutcome:
    """A poll that got no usable response (a crash on the feed's input, a host skipped for
    backing off), through the same decision as any other failure."""
    decision = decide_next_poll(poll_state_of(state), PollResponse(status=None, is_error=True), now,
                                floor_seconds=floor_seconds, ceiling_seconds=max(floor_seconds, ceiling_seconds))
    message = message[:ERROR_MAX_CHARS]
    state = replace(state, last_polled_at=now, last_status=None, error_streak=decision.error_streak,
                    next_poll_at=decision.next_poll_at, poll_reason=decision.reason,
                    interval_seconds=decision.interval_seconds, is_parked=decision.is_parked,
                    parked_reason=decision.parked_reason, last_new_items=0, last_error_kind=kind,
                    last_error=message, last_error_at=now)
    report = FeedReport(state.feed_id, feed_url, None, 0, kind, message, decision.next_poll_at, 0.0,
                        decision.interval_seconds, decision.reason, is_parked=decision.is_parked)
    return PollOutcome(state, (), report)


def forget_items(state: FeedState, guids: set[str]) -> FeedState:
    """``state`` with ``guids`` no longer seen and no validators, so the next poll takes those items
    again and a 304 cannot hide them (their pages failed for now: timeout, 429, 5xx)."""
    return replace(state, recent_guids=tuple(g for g in state.recent_guids if g not in guids),
                   etag=None, last_modified=None)
