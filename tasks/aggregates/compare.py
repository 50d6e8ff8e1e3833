"""The stored aggregates beside a rebuild from the logs, in a comparable form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import polars as pl

from newsroom.times import parse_iso
from tasks.aggregates.cycle import (
    aggregate_rules,
    build_from_logs,
    state_tables,
)
from tasks.aggregates.members import read_registry
from tasks.settings import RankSettings
from transforms.story_aggregates import AggregateRules, FoldRow, MemberRow, StoryRow, trim_story
from warehouse.aggregates import (
    ReadCounter,
    read_all_members,
    read_manifest,
    read_pointer,
    read_story_rows,
    read_table_object,
)
from warehouse.schemas import (
    AGGREGATE_ALIASES_SCHEMA,
    AGGREGATE_LEDGER_SCHEMA,
    PENDING_ROWS_SCHEMA,
)
from warehouse.store import ObjectStore

# --- Comparing the stored aggregates with a rebuild ---------------------------------------------------

@dataclass(frozen=True, slots=True)
class AggregateTables:
    """The aggregates' content in a comparable form: every row, sorted, story rows trimmed at
    ``as_of`` (a row a cycle wrote earlier may hold recent originals a rebuild already sums up;
    both score the same)."""

    as_of: datetime
    stories: list[StoryRow]
    members: list[MemberRow]
    pending: list[FoldRow]
    ledger: list[Mapping[str, object]]
    """``AGGREGATE_LEDGER_SCHEMA`` rows (compared whole)."""
    aliases: list[Mapping[str, object]]
    """``AGGREGATE_ALIASES_SCHEMA`` rows (compared whole)."""


def _normal_stories(rows: Iterable[Mapping[str, Any]], rules: AggregateRules, at: datetime) -> list[StoryRow]:
    out: list[StoryRow] = []
    for r in rows:
        story = cast(StoryRow, {k: (list(v) if isinstance(v, list) else v) for k, v in r.items() if k != "is_removed"})
        trim_story(story, rules, at)
        out.append(story)
    return sorted(out, key=lambda r: r["story_id"])


def stored_aggregates(store: ObjectStore, settings: RankSettings) -> AggregateTables | None:
    """What the pointer names, read whole (None before the first fold)."""
    pointer, _ = read_pointer(store)
    if pointer is None:
        return None
    manifest = read_manifest(store, pointer["manifest"])
    at = parse_iso(manifest["as_of"])
    stories = read_story_rows(store, manifest["stories"])
    members = read_all_members(store, manifest["members"]).drop("is_removed")
    members = members.filter(pl.col("story_id").is_in(stories["story_id"].implode()))
    pending, ledger, aliases = (read_table_object(store, manifest[name], schema) for name, schema in
                                (("pending", PENDING_ROWS_SCHEMA), ("ledger", AGGREGATE_LEDGER_SCHEMA),
                                 ("aliases", AGGREGATE_ALIASES_SCHEMA)))
    return AggregateTables(at, _normal_stories(stories.to_dicts(), aggregate_rules(settings), at),
                           _sorted_members(members.to_dicts()), cast(list[FoldRow], pending.to_pylist()),
                           ledger.to_pylist(), aliases.to_pylist())


def _sorted_members(rows: Iterable[Mapping[str, Any]]) -> list[MemberRow]:
    return sorted(cast(Iterable[MemberRow], rows), key=lambda m: (m["story_id"], m["article_id"]))


def rebuilt_aggregates(store: ObjectStore, at: datetime, settings: RankSettings) -> AggregateTables:
    """The aggregates a rebuild from the whole log at ``at`` holds, in :class:`AggregateTables` form."""
    rules = aggregate_rules(settings)
    built = build_from_logs(store, at, read_registry(store), rules, ReadCounter())
    pending, ledger, aliases = state_tables(built.state)
    return AggregateTables(at, _normal_stories(built.stories.to_dicts(), rules, at),
                           _sorted_members(built.members.drop(["is_removed"]).to_pylist()),
                           cast(list[FoldRow], pending.to_pylist()), ledger.to_pylist(), aliases.to_pylist())
