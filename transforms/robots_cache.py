"""The robots.txt cache ingest runs share: each origin's verdict as fetched, how long it may be used.

A fetched robots.txt is kept with its HTTP verdict and its body (RFC 9309 §2.4: at most 24 hours,
a disallow-all from an unreachable host only :data:`ROBOTS_UNREACHABLE_TTL_SECONDS`), stored as
one gzip JSON object; a corrupt object or entry only costs a fetch. The rules themselves are
:func:`transforms.robots.parse_robots`'s.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from newsroom.times import parse_iso_datetime
from transforms.robots import ROBOTS_MAX_BYTES, RobotsPolicy, RobotsRules, parse_robots

ROBOTS_CACHE_MAX_AGE_SECONDS = 86_400
"""RFC 9309 §2.4: a cached robots.txt SHOULD NOT be used for more than 24 hours, whatever the setting."""
ROBOTS_UNREACHABLE_TTL_SECONDS = 600
"""A 5xx/unreachable robots.txt means "disallow all" (§2.3.1.4); kept only this long, so a short
outage does not shut a host out for the whole TTL."""
RobotsVerdict = RobotsRules | Literal["allow_all", "disallow_all"]


@dataclass(frozen=True, slots=True)
class RobotsEntry:
    """One origin's robots.txt as fetched at ``fetched_at``: its verdict from the HTTP status and, for
    ``parse``, the body as fetched (at most 500 KiB and one byte, so a cut last line stays cut)."""

    verdict: RobotsPolicy
    fetched_at: datetime
    body: bytes = b""


def robots_verdict_of(entry: RobotsEntry) -> RobotsVerdict:
    """The rules of a fetched robots.txt, or its allow-all / disallow-all verdict."""
    return parse_robots(entry.body) if entry.verdict == "parse" else entry.verdict


def is_robots_entry_fresh(entry: RobotsEntry, now: datetime, ttl_seconds: int) -> bool:
    """Whether a cached verdict may still be used at ``now``: younger than the TTL (at most
    :data:`ROBOTS_UNREACHABLE_TTL_SECONDS` for a disallow-all, never over 24 hours), and not from the future.

    >>> from datetime import UTC, timedelta
    >>> at = datetime(2026, 1, 1, tzinfo=UTC)
    >>> is_robots_entry_fresh(RobotsEntry("parse", at, b""), at + timedelta(minutes=59), 3600)
    True
    >>> is_robots_entry_fresh(RobotsEntry("disallow_all", at), at + timedelta(minutes=10), 3600)
    False
    """
    ttl = min(ttl_seconds, ROBOTS_CACHE_MAX_AGE_SECONDS)
    if entry.verdict == "disallow_all":
        ttl = min(ttl, ROBOTS_UNREACHABLE_TTL_SECONDS)
    age = (now - entry.fetched_at).total_seconds()
    return 0 <= age < ttl


def robots_cache_to_bytes(entries: Mapping[str, RobotsEntry]) -> bytes:
    """The cache object: gzip JSON ``{"version": 1, "entries": {origin: {verdict, fetched_at, body}}}``,
    the body as latin-1 text (one character per byte)."""
    doc = {"version": 1, "entries": {
        origin: {"verdict": e.verdict, "fetched_at": e.fetched_at.isoformat(), "body": e.body.decode("latin-1")}
        for origin, e in sorted(entries.items())}}
    return gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), mtime=0)


def robots_cache_from_bytes(data: bytes) -> dict[str, RobotsEntry]:
    """Entries of a cache object. Never raises: a corrupt object reads as empty and a bad entry is
    left out, so either only costs a fetch of that robots.txt."""
    return read_robots_cache(data)[0]


def read_robots_cache(data: bytes) -> tuple[dict[str, RobotsEntry], str | None]:
    """Entries of a cache object and, when the object is unreadable, why (``corrupt: ...``), for
    the caller to record with its key (issue 16). A bad entry is left out without a reason."""
    try:
        doc = json.loads(gzip.decompress(data))
    except (OSError, EOFError, ValueError, RecursionError, zlib.error) as e:
        return {}, "corrupt: " + " ".join(f"{type(e).__name__}: {e}".split())[:300]
    raw = doc.get("entries") if isinstance(doc, dict) and doc.get("version") == 1 else None
    if not isinstance(raw, dict):
        return {}, "corrupt: not a robots.txt cache"
    entries = {}
    for origin, value in raw.items():
        entry = _robots_entry_from_json(value)
        if entry is not None:
            entries[origin] = entry
    return entries, None


def _robots_entry_from_json(value: object) -> RobotsEntry | None:
    if not isinstance(value, dict):
        return None
    verdict, fetched_at, body = value.get("verdict"), value.get("fetched_at"), value.get("body", "")
    if verdict not in ("parse", "allow_all", "disallow_all") or not isinstance(fetched_at, str) \
            or not isinstance(body, str):
        return None
    at = parse_iso_datetime(fetched_at, naive="reject")
    try:
        data = body.encode("latin-1")
    except UnicodeError:
        return None
    if at is None or len(data) > ROBOTS_MAX_BYTES + 1:
        return None
    return RobotsEntry(verdict, at, data)


def fresh_robots_entries(entries: Mapping[str, RobotsEntry], now: datetime, ttl_seconds: int) -> dict[str, RobotsEntry]:
    """The entries still fresh at ``now`` (see :func:`is_robots_entry_fresh`)."""
    return {origin: entry for origin, entry in entries.items() if is_robots_entry_fresh(entry, now, ttl_seconds)}


def merge_robots_entries(stored: Mapping[str, RobotsEntry], fetched: Mapping[str, RobotsEntry],
                         now: datetime) -> dict[str, RobotsEntry]:
    """The cache after a run: a fetched entry replaces the stored one (both are real fetches, so
    either verdict is right), and entries 24 hours away from ``now`` are dropped."""
    entries = {**stored, **fetched}
    return {origin: entry for origin, entry in entries.items()
            if abs((now - entry.fetched_at).total_seconds()) < ROBOTS_CACHE_MAX_AGE_SECONDS}
