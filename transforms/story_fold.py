"""The fold of story changes and article rows onto story aggregates (issue 15).

:func:`stories_to_load` names what a fold needs read; :func:`fold` joins new members
(:func:`transforms.story_aggregates.add_member`), applies moves and new versions by recomputing the
stories they touch (:func:`transforms.story_aggregates.story_from_members`), and keeps what waits for
its other half (:class:`FoldState`). The rows and the rules are ``transforms.story_aggregates``'.
Pure: the clock arrives as ``at``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypedDict

from transforms.story_aggregates import (
    ACK_KINDS,
    ASSIGN_KINDS,
    MOVE_KINDS,
    ROW_FIELDS,
    ROW_REF,
    AggregateRules,
    FoldRow,
    MemberRow,
    StoryRow,
    add_member,
    empty_story,
    is_expired,
    row_rank,
    story_from_members,
    trim_story,
)


class ChangeRow(TypedDict):
    """A story change as the fold reads it (``STORY_CHANGES_SCHEMA``'s columns it needs)."""

    offset: int
    kind: str
    story_id: str | None
    article_id: str | None
    copy_of: str | None
    other_story_id: str | None
    changed_at: datetime
    language: str


class ListingRow(TypedDict):
    """An article a published story snapshot listed (``LISTINGS_SCHEMA``)."""

    article_id: str
    story_id: str
    listed_at: datetime


# --- The fold -------------------------------------------------------------------------------------

@dataclass(slots=True)
class Ledger:
    """An article the aggregates know of that is not (fully) a member yet: its story is known but
    no acknowledged row (the row is in a segment not read yet, or was never stored), or it is a
    member with acknowledged versions whose rows have not arrived."""

    article_id: str
    story_id: str | None
    copy_of: str | None
    assigned_offset: int | None
    is_member: bool
    acked: list[datetime] = field(default_factory=list)
    row: FoldRow | None = None
    updated_at: datetime | None = None


@dataclass(slots=True)
class FoldState:
    """What a fold reads and changes besides the story rows: articles waiting for their other half.

    ``pending_rows`` are article rows no change has acknowledged yet, keyed by article id and
    first seen time; ``ledger`` is :class:`Ledger` by article id; ``aliases`` maps a merged-away
    story to the story that absorbed it (``story_aliases.sql``).
    """

    pending_rows: dict[tuple[str, datetime], FoldRow] = field(default_factory=dict)
    ledger: dict[str, Ledger] = field(default_factory=dict)
    aliases: dict[str, tuple[str, int]] = field(default_factory=dict)


@dataclass(slots=True)
class FoldResult:
    """What a fold changed: story rows to write (touched ones, trimmed), stories that left, member
    rows to write and member rows that left their story."""

    stories: dict[str, StoryRow]
    removed: set[str]
    member_upserts: list[MemberRow]
    member_removals: list[tuple[str, str]]


def stories_to_load(changes: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], state: FoldState,
                    listings: Sequence[Mapping[str, Any]] = ()) -> tuple[set[str], set[str]]:
    """Which stories a fold of ``changes``, new ``rows`` and ``listings`` needs: (stories whose rows
    it updates, stories whose members it must read: a move or a new version recomputes them, a
    listing marks one of them).

    The caller reads those, then calls :func:`fold`; nothing else of the store is needed.
    """
    touched: set[str] = set()
    members: set[str] = set()
    for c in changes:
        kind = c["kind"]
        if c["story_id"] is not None:
            touched.add(str(c["story_id"]))
        if kind in MOVE_KINDS or kind == "version":
            members.add(str(c["story_id"]))
            if c.get("other_story_id") is not None:
                members.add(str(c["other_story_id"]))
    for r in rows:
        entry = state.ledger.get(str(r["article_id"]))
        if entry is not None and entry.story_id is not None:
            touched.add(entry.story_id)
            if entry.is_member:
                members.add(entry.story_id)
    members.update(str(r["story_id"]) for r in listings if r["story_id"] is not None)
    return touched | members, members


class _Fold:
    def __init__(self, state: FoldState, stories: Mapping[str, StoryRow], members: Mapping[str, Sequence[MemberRow]],
                 authority: Mapping[str, float], eligible: frozenset[str] | set[str], rules: AggregateRules,
                 at: datetime) -> None:
        self.state, self.authority, self.eligible, self.rules, self.at = state, authority, eligible, rules, at
        self.stories: dict[str, StoryRow] = {sid: _copy_story(s) for sid, s in stories.items()}
        self.loaded: dict[str, dict[str, MemberRow]] = {sid: {str(m["article_id"]): dict(m) for m in ms}
                                                     for sid, ms in members.items()}
        self.member_of: dict[str, str] = {aid: sid for sid, ms in self.loaded.items() for aid in ms}
        self.dirty: set[str] = set()
        self.touched: set[str] = set()
        self.upserts: dict[tuple[str, str], MemberRow] = {}
        self.removals: set[tuple[str, str]] = set()

    # rows ------------------------------------------------------------------------------------
    def take_row(self, row: FoldRow) -> None:
        """A new article row: it completes a waiting acknowledgement, or waits for one."""
        aid, seen = str(row["article_id"]), row["first_seen_at"]
        entry = self.state.ledger.get(aid)
        if entry is not None and seen in entry.acked:
            entry.acked.remove(seen)
            self.apply_row(aid, row)
            return
        key = (aid, seen)
        held = self.state.pending_rows.get(key)
        if held is None or row_rank(row) > row_rank(held):
            self.state.pending_rows[key] = row

    def take_listing(self, listing: Mapping[str, Any]) -> None:
        """A story snapshot listed an article: its member remembers the first time (a listing whose
        member has moved on since is dropped; the next listing of it repeats the row)."""
        sid, aid, at = str(listing["story_id"]), str(listing["article_id"]), listing["listed_at"]
        member = self.loaded.get(sid, {}).get(aid)
        if member is None or (member.get("listed_at") is not None and member["listed_at"] <= at):
            return
        member["listed_at"] = at
        self.upserts[(sid, aid)] = member

    # changes ---------------------------------------------------------------------------------
    def take_change(self, change: Mapping[str, Any]) -> None:
        kind = change["kind"]
        aid = change["article_id"]
        if kind == "merge" and change.get("other_story_id") is not None:
            self.state.aliases[str(change["other_story_id"])] = (str(change["story_id"]), int(change["offset"]))
        if aid is None:
            return
        aid = str(aid)
        if kind in ASSIGN_KINDS:
            self.assign(aid, change)
        if kind in ACK_KINDS:
            self.acknowledge(aid, change)

    def assign(self, aid: str, change: Mapping[str, Any]) -> None:
        story_id, copy_of, offset = str(change["story_id"]), change.get("copy_of"), int(change["offset"])
        current = self.member_of.get(aid)
        if current is not None:
            member = self.loaded[current].pop(aid)
            del self.member_of[aid]
            self.removals.add((current, aid))
            self.upserts.pop((current, aid), None)
            self.dirty.add(current)
            member.update(story_id=story_id, copy_of=copy_of, assigned_offset=offset)
            self.put_member(member)
            entry = self.state.ledger.get(aid)
            if entry is not None:
                entry.story_id = story_id
            return
        entry = self.state.ledger.get(aid)
        if entry is None:
            entry = self.state.ledger[aid] = Ledger(aid, story_id, copy_of, offset, False)
        entry.story_id, entry.copy_of, entry.assigned_offset = story_id, copy_of, offset
        entry.updated_at = max(entry.updated_at or change["changed_at"], change["changed_at"])
        if entry.is_member:
            # A member of a story this fold did not read (a move naming a story the writer no
            # longer holds it in): follow the change once its row shows up.
            entry.is_member = False
        self.materialize(aid)

    def acknowledge(self, aid: str, change: Mapping[str, Any]) -> None:
        seen = change["changed_at"]
        current = self.member_of.get(aid)
        entry = self.state.ledger.get(aid)
        if current is None and entry is None:
            # A version of an article that never counted (its publisher is opted out or unknown).
            return
        row = self.state.pending_rows.pop((aid, seen), None)
        if row is not None:
            self.apply_row(aid, row)
            return
        if entry is None:
            entry = self.state.ledger[aid] = Ledger(aid, current, None, None, True)
        if seen not in entry.acked:
            entry.acked.append(seen)
            entry.acked.sort()
        entry.updated_at = max(entry.updated_at or seen, seen)

    def apply_row(self, aid: str, row: FoldRow) -> None:
        current = self.member_of.get(aid)
        if current is not None:
            member = self.loaded[current][aid]
            first = min(member["first_seen_at"], row["first_seen_at"])
            if row_rank(row) > row_rank(member):
                member.update({k: row[k] for k in (*ROW_FIELDS, ROW_REF) if k in row})
            member["first_seen_at"] = first
            self.upserts[(current, aid)] = member
            self.dirty.add(current)
            self._forget_if_settled(aid)
            return
        entry = self.state.ledger[aid]  # every caller checked: an assignment or a member made it
        # Rows belong to the fold (each read once): kept, not copied.
        if entry.row is None:
            entry.row = row
        else:
            first = min(entry.row["first_seen_at"], row["first_seen_at"])
            if row_rank(row) > row_rank(entry.row):
                entry.row = row
            entry.row["first_seen_at"] = first
        entry.updated_at = max(entry.updated_at or row["first_seen_at"], row["first_seen_at"])
        self.materialize(aid)

    def materialize(self, aid: str) -> None:
        entry = self.state.ledger[aid]
        if entry.story_id is None or entry.row is None:
            return
        if str(entry.row["publisher_id"]) not in self.eligible:
            del self.state.ledger[aid]  # never counted: its publisher is unknown or opted out
            return
        member = entry.row
        member.update(story_id=entry.story_id, copy_of=entry.copy_of, assigned_offset=entry.assigned_offset,
                      listed_at=None)
        self.put_member(member)
        entry.row, entry.is_member = None, True
        self._forget_if_settled(aid)

    def _forget_if_settled(self, aid: str) -> None:
        entry = self.state.ledger.get(aid)
        if entry is not None and entry.is_member and not entry.acked:
            del self.state.ledger[aid]

    def put_member(self, member: MemberRow) -> None:
        sid, aid = str(member["story_id"]), str(member["article_id"])
        self.upserts[(sid, aid)] = member
        self.removals.discard((sid, aid))
        self.touched.add(sid)
        if sid in self.loaded:
            # Only members of read stories are known by article: a move or version names its
            # stories, which the fold reads first (stories_to_load).
            self.member_of[aid] = sid
            self.loaded[sid][aid] = member
            self.dirty.add(sid)
            return
        story = self.stories.get(sid)
        if story is None:
            story = self.stories[sid] = empty_story(sid, member.get("language"))
        add_member(story, member, self.authority, self.rules, self.at)

    # result ----------------------------------------------------------------------------------
    def result(self) -> FoldResult:
        removed: set[str] = set()
        for sid in sorted(self.dirty):
            ms = self.loaded[sid].values()
            language = self.stories[sid]["language"] if sid in self.stories else None
            self.stories[sid] = story_from_members(sid, language, ms, self.authority, self.rules, self.at)
        changed: dict[str, StoryRow] = {}
        for sid in sorted(self.touched | self.dirty):
            story = self.stories[sid]
            if story["article_count"] == 0 or is_expired(story, self.rules, self.at):
                removed.add(sid)
                continue
            trim_story(story, self.rules, self.at)
            changed[sid] = story
        upserts = [m for key, m in sorted(self.upserts.items()) if key not in self.removals]
        return FoldResult(changed, removed, upserts, sorted(self.removals))


def _copy_story(story: Mapping[str, Any]) -> StoryRow:
    return {k: (list(v) if isinstance(v, list) else v) for k, v in story.items()}


def fold(state: FoldState, changes: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], *,
         stories: Mapping[str, StoryRow], members: Mapping[str, Sequence[MemberRow]], authority: Mapping[str, float],
         eligible: frozenset[str] | set[str], rules: AggregateRules, at: datetime,
         listings: Sequence[Mapping[str, Any]] = ()) -> FoldResult:
    """Fold new article rows and changes onto the aggregates, in place on ``state``.

    Args:
        state: Pending rows, the ledger and aliases; updated in place.
        changes: New story changes, each language's in offset order, none after ``at``.
        rows: New article rows (``ROW_FIELDS``, the embedding quantized), none seen after ``at``.
        stories: The current rows of at least the stories :func:`stories_to_load` names (absent
            ones are new).
        members: Every member of the stories it names to read.
        authority: Publisher authority (registry).
        eligible: Publishers whose articles count: registered and not opted out.
        rules: The windows.
        at: The fold's instant.
        listings: New ``log/listings`` rows (a story snapshot listed the article), none after ``at``.

    Returns:
        The story rows and member rows that changed.
    """
    run = _Fold(state, stories, members, authority, eligible, rules, at)
    for row in rows:
        run.take_row(row)
    for listing in listings:
        run.take_listing(listing)
    for change in changes:
        run.take_change(change)
    expire_waiting(state, rules, at)
    return run.result()


def expire_waiting(state: FoldState, rules: AggregateRules, at: datetime) -> None:
    """Drop article rows and ledger entries that waited longer than ``pending_hours``."""
    horizon = at - timedelta(hours=rules.pending_hours)
    for key in [k for k, r in state.pending_rows.items() if r["first_seen_at"] < horizon]:
        del state.pending_rows[key]
    for aid in [a for a, e in state.ledger.items() if e.updated_at is not None and e.updated_at < horizon]:
        del state.ledger[aid]


def live_aliases(aliases: Mapping[str, tuple[str, int]], stories: Iterable[str]) -> dict[str, tuple[str, int]]:
    """The aliases whose chain ends at a story still in the table: one that left can never be
    listed again, and an alias only ever redirects to a listed story
    (:func:`transforms.pages.resolve_aliases`)."""
    live = set(stories)
    out = {}
    for alias in sorted(aliases):
        target, hops = aliases[alias][0], 0
        while target in aliases and hops < len(aliases):
            target, hops = aliases[target][0], hops + 1
        if target in live:
            out[alias] = aliases[alias]
    return out
