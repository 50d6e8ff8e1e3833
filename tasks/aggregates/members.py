"""The aggregates as one rank cycle reads them: the registry, story rows, members on demand."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict, cast

import polars as pl
import pyarrow as pa

from transforms.page_json import PageMember
from transforms.story_aggregates import (
    MEMBER_FIELDS,
    MemberRow,
    dequantize_embedding,
    member_order,
    registry_fingerprint,
)
from warehouse import layout
from warehouse.aggregates import (
    Manifest,
    MemberCache,
    ReadCounter,
    read_members,
)
from warehouse.schemas import (
    PUBLISHERS_SCHEMA,
)
from warehouse.store import ObjectStore
from warehouse.tables import read_table


@dataclass(frozen=True, slots=True)
class Registry:
    """What rank reads of the publisher registry."""

    publishers: pl.DataFrame  # publisher_id, name, region, language, authority, is_paywalled, is_opted_out
    authority: dict[str, float]
    eligible: frozenset[str]
    fingerprint: str


def read_registry(store: ObjectStore, counter: ReadCounter | None = None) -> Registry:
    table, _ = read_table(store, layout.PUBLISHERS_KEY, PUBLISHERS_SCHEMA)
    if counter is not None:
        counter.add("registry", table.nbytes)
    rows = table.to_pylist()
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return Registry(frame, {str(p["publisher_id"]): float(p["authority"] or 0.0) for p in rows},
                    frozenset(str(p["publisher_id"]) for p in rows if not p["is_opted_out"]),
                    registry_fingerprint(rows))


# --- Members, as pages read them --------------------------------------------------------------------

class MemberSource(Mapping[str, list[PageMember]]):
    """Story id → its members as ``story_members.sql`` rows (with ``embedding``), read on demand.

    Rows come from the members' layers in the store, a row group at a time, plus the members this
    cycle changed in memory; :meth:`prefetch` reads many stories in one pass, and a story asked
    for without it is read alone. A story with no members maps to an empty list.
    """

    def __init__(self, store: ObjectStore | None, layers: Sequence[str], registry: Registry, *,
                 overrides: Mapping[str, Mapping[str, MemberRow | None]] | None = None,
                 table: pa.Table | None = None, counter: ReadCounter | None = None,
                 cache: MemberCache | None = None) -> None:
        self._store, self._layers, self._registry, self._counter = store, list(layers), registry, counter
        self._member_cache = cache
        self._stored: dict[str, list[MemberRow]] = {}
        self._table = pl.from_arrow(table) if table is not None else None
        self._overrides = {sid: dict(ms) for sid, ms in (overrides or {}).items()}
        self._cache: dict[str, list[PageMember]] = {}
        self._listed: dict[str, dict[str, datetime | None]] = {}
        self._pubs = {r["publisher_id"]: r for r in registry.publishers.select(
            "publisher_id", "name", "region", "authority", "is_paywalled").to_dicts()}

    def with_changes(self, upserts: Iterable[MemberRow], removals: Iterable[tuple[str, str]]) -> MemberSource:
        """This source with a fold's member changes on top (removals first, then upserts)."""
        overrides = {sid: dict(ms) for sid, ms in self._overrides.items()}
        for sid, aid in removals:
            overrides.setdefault(sid, {})[aid] = None
        for m in upserts:
            overrides.setdefault(str(m["story_id"]), {})[str(m["article_id"])] = m
        source = MemberSource(self._store, self._layers, self._registry, overrides=overrides, counter=self._counter,
                              cache=self._member_cache)
        source._table = self._table
        return source

    def raw(self, story_ids: Iterable[str]) -> dict[str, list[MemberRow]]:
        """Members of some stories as stored (``MEMBER_FIELDS``), for a fold's recompute."""
        ids = sorted(set(story_ids))
        stored: dict[str, dict[str, MemberRow]] = {sid: {} for sid in ids}
        frame = None
        if self._store is not None and self._layers and ids:
            frame = read_members(self._store, self._layers, ids, counter=self._counter, cache=self._member_cache)
        elif isinstance(self._table, pl.DataFrame) and ids:
            frame = self._table.filter(pl.col("story_id").is_in(ids))
        if frame is not None:
            for m in frame.drop("is_removed").to_dicts():
                stored[m["story_id"]][m["article_id"]] = m
        for sid in ids:
            if self._store is not None and sid not in self._overrides:
                self._stored[sid] = list(stored[sid].values())  # as the layers hold it (the cache's rows)
            for aid, m in self._overrides.get(sid, {}).items():
                if m is None:
                    stored[sid].pop(aid, None)
                else:
                    stored[sid][aid] = m
        return {sid: sorted(ms.values(), key=member_order) for sid, ms in stored.items()}

    def stored_reads(self) -> list[MemberRow]:
        """Every member this source read from the store, of stories no change in memory touched."""
        return [m for ms in self._stored.values() for m in ms]

    def prefetch(self, story_ids: Iterable[str]) -> None:
        """Read every story of ``story_ids`` not read yet, in one pass over the layers."""
        missing = sorted({s for s in story_ids if s not in self._cache})
        if not missing:
            return
        for sid, members in self.raw(missing).items():
            self._cache[sid] = [self._page_row(m) for m in members]

    def _page_row(self, m: MemberRow) -> PageMember:
        publisher = self._pubs.get(m["publisher_id"], {})
        row = {k: m.get(k) for k in MEMBER_FIELDS if k not in ("embedding_q", "embedding_scale", "assigned_offset")}
        row.update(is_copy=m.get("copy_of") is not None, publisher=publisher.get("name"),
                   region=publisher.get("region"), authority=publisher.get("authority"),
                   is_paywalled=publisher.get("is_paywalled"),
                   embedding=dequantize_embedding(m.get("embedding_q"), m.get("embedding_scale")))
        return cast(PageMember, row)  # MEMBER_FIELDS with the page's fields

    def was_listed(self, story_id: str, article_id: str, now: datetime) -> bool:
        """Whether a story snapshot published before ``now`` listed this member (``log/listings``)."""
        if story_id not in self._listed:
            self._listed[story_id] = {m["article_id"]: m.get("listed_at") for m in self[story_id]}
        at = self._listed[story_id].get(article_id)
        return at is not None and at < now

    def __getitem__(self, story_id: str) -> list[PageMember]:
        if story_id not in self._cache:
            self.prefetch([story_id])
        return self._cache[story_id]

    def __iter__(self) -> Any:
        return iter(self._cache)

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, story_id: object) -> bool:
        return isinstance(story_id, str)


class AggregateSummary(TypedDict, total=False):
    """What a cycle did to the aggregates (the rank summary's ``aggregates``)."""

    mode: str
    """``folded`` onto the stored aggregates, or ``rebuilt`` from the logs."""
    reason: str
    seq: int
    stories: int
    changes: int
    articles: int
    touched: int
    removed: int
    committed: bool
    unchanged: bool
    stories_compacted: bool
    members_compacted: bool
    later_changes: int


@dataclass(slots=True)
class AggregateView:
    """The aggregates as of one instant, for one rank cycle: every story row, their members on
    demand, and the aliases of merged stories."""

    stories: pl.DataFrame
    members: MemberSource
    aliases: dict[str, str]
    registry: Registry
    as_of: datetime
    counter: ReadCounter
    summary: AggregateSummary = field(default_factory=lambda: AggregateSummary())
    committed: tuple[Manifest, str] | None = None
    """The manifest this cycle committed and the pointer's ETag after it (for the member cache)."""


