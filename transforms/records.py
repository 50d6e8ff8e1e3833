"""The typed records of an article's path, from a feed's state to what a page lists.

| record | what it is | checked against |
|---|---|---|
| ``FeedState`` | one row of ``state/feeds/``: when to poll a feed, what its last polls left | ``FEED_STATE_SCHEMA`` (warehouse/schemas.py) |
| ``ArticleRow`` | one row of ``log/articles/``: never the body, only what is derived from it | ``ARTICLES_SCHEMA`` |
| ``StoryChange`` | one row of ``log/story_changes/``: a writer's decision | ``STORY_CHANGES_SCHEMA`` |
| ``RankedStory`` | one story on one (edition, section) list, with its score parts | ``RANKED_COLUMNS`` (transforms/ranking.py) |
| ``PageStory``, ``PageSource`` | one story as a page lists it, and its sources | ``StoryPublic``, ``SourcePublic`` (serving/models.py) |

``tests/transforms/test_records.py`` checks each against its table or model, field for field and, for
tables, in the same order. They live here, the lowest layer that computes them, so ``transforms``
(the poll decision, the article build, the clustering decision, page assembly) and ``tasks``
(fetching, committing) share one type; ``warehouse`` and ``serving`` may not import ``transforms``,
so a task hands them the plain row or JSON (``to_row``, ``to_json``) and reads rows back with
``from_row``.

Frozen, with tuples for list columns: a state or row is replaced (``dataclasses.replace``), never
changed in place, so what a shard or a writer returns is what the commit writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from functools import cache
from typing import Any, Literal, Protocol


class ColumnTable(Protocol):
    """A table read column by column (a ``pyarrow.Table``): no pyarrow import here."""

    def to_pydict(self) -> dict[str, list[Any]]: ...


def _columns_of(table: ColumnTable, names: Sequence[str], lists: Sequence[str]) -> list[Sequence[object]]:
    """``table``'s columns ``names`` as Python values, list cells as tuples (a null stays None), and
    a column the table lacks (older files) as nulls."""
    data = table.to_pydict()
    rows = len(next(iter(data.values()), []))
    columns: list[Sequence[object]] = []
    for name in names:
        column = data.get(name)
        if column is None:
            columns.append([None] * rows)
        elif name in lists:
            columns.append([None if v is None else tuple(v) for v in column])
        else:
            columns.append(column)
    return columns


@cache
def _field_names(kind: type) -> tuple[str, ...]:
    # ``dataclasses.fields`` builds its tuple on every call: a page cycle serialises some 100,000 records.
    return tuple(f.name for f in fields(kind))


def _row_of(record: object) -> dict[str, object]:
    """``{column: value}`` with tuples as lists, for ``pyarrow.Table.from_pylist``."""
    row: dict[str, object] = {}
    for name in _field_names(type(record)):
        value = getattr(record, name)
        row[name] = list(value) if isinstance(value, tuple) else value
    return row


@dataclass(frozen=True, slots=True)
class FeedState:
    """One row of ``state/feeds/``: when to poll a feed next and what its last polls left.

    A feed never polled is ``FeedState(feed_id)``: every other field neutral.
    """

    feed_id: str
    next_poll_at: datetime | None = None
    last_polled_at: datetime | None = None
    last_status: int | None = None
    etag: str | None = None
    last_modified: str | None = None
    recent_guids: tuple[str, ...] = ()
    """The last 200 guids seen, newest first."""
    interval_seconds: int | None = None
    poll_reason: str | None = None
    """The rule that set ``next_poll_at`` (``rate``, ``retry_after``, ``backoff``, ...)."""
    error_streak: int = 0
    last_error: str | None = None
    last_error_kind: str | None = None
    last_error_at: datetime | None = None
    last_new_items: int = 0
    rate_counts: tuple[float, ...] = ()
    """168 decayed item counts, one per UTC hour of the week (empty: unknown)."""
    rate_observed_seconds: float = 0.0
    validator_miss_streak: int = 0
    is_validators_useless: bool = False
    is_parked: bool = False
    parked_reason: str | None = None
    hub_url: str | None = None
    """The feed's WebSub hub (``link rel=hub``), as last read."""
    topic_url: str | None = None
    """The feed's ``rel=self`` (its WebSub topic), kept for 304 polls."""
    lease_expires_at: datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> FeedState:
        """A state from a stored row; a null (a column older files lack) takes the neutral value.

        >>> FeedState.from_row({"feed_id": "f", "recent_guids": ["a"], "error_streak": None})
        FeedState(feed_id='f', next_poll_at=None, last_polled_at=None, last_status=None, etag=None, last_modified=None, recent_guids=('a',), interval_seconds=None, poll_reason=None, error_streak=0, last_error=None, last_error_kind=None, last_error_at=None, last_new_items=0, rate_counts=(), rate_observed_seconds=0.0, validator_miss_streak=0, is_validators_useless=False, is_parked=False, parked_reason=None, hub_url=None, topic_url=None, lease_expires_at=None)
        """
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = row.get(f.name)
            if value is None:
                continue
            values[f.name] = tuple(value) if isinstance(value, list) else value
        return cls(**values)

    def to_row(self) -> dict[str, object]:
        """The row for ``FEED_STATE_SCHEMA``."""
        return _row_of(self)


@dataclass(frozen=True, slots=True)
class ArticleRow:
    """One row of the article log (``log/articles/``): never the body, only what is derived from it."""

    article_id: str
    version: int
    content_hash: str
    url: str
    canonical_url: str
    feed_id: str
    publisher_id: str
    language: str
    region: str
    title: str
    snippet: str
    image_url: str | None
    author: str | None
    section: str | None
    categories: tuple[str, ...]
    is_opinion: bool
    published_at: datetime | None
    """What the publisher claims, when plausible; ranking never uses it."""
    first_seen_at: datetime
    simhash: int
    minhash: tuple[int, ...]
    terms: tuple[str, ...]
    term_weights: tuple[float, ...]
    entities: tuple[str, ...]
    embedding: tuple[float, ...] | None
    signature_version: str
    implausible_published_at: datetime | None = None
    """The stated publication time when implausible (``published_at`` is then null, #16)."""
    section_guess: str | None = None
    """The section the title and lede suggest (``tasks.sections.guess_sections``), null where the
    classifier abstained or there is no embedding (issue 21)."""
    embedding_model: str | None = None
    """The model ``embedding`` was made by (``transforms.embedding.EMBEDDING_MODEL_ID``), null
    without an embedding (issue 33)."""

    def to_row(self) -> dict[str, object]:
        """The row for ``ARTICLES_SCHEMA``."""
        return _row_of(self)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ArticleRow:
        """The record of one ``ARTICLES_SCHEMA`` row as pyarrow gives it (lists become tuples)."""
        values = {f.name: row.get(f.name) for f in fields(cls)}
        for name in _ARTICLE_LISTS:
            if values[name] is not None or name != "embedding":
                values[name] = tuple(values[name] or ())
        return cls(**values)

    @classmethod
    def from_table(cls, table: ColumnTable) -> list[ArticleRow]:
        """The records of an ``ARTICLES_SCHEMA`` table, in its order, as :meth:`from_row` reads
        each row, read a column at a time."""
        columns = _columns_of(table, _ARTICLE_COLUMNS, _ARTICLE_LISTS)
        for at, name in enumerate(_ARTICLE_COLUMNS):
            if name in _ARTICLE_LISTS and name != "embedding":
                columns[at] = [() if v is None else v for v in columns[at]]
        return [cls(*values) for values in zip(*columns, strict=True)]


_ARTICLE_COLUMNS = tuple(f.name for f in fields(ArticleRow))
_ARTICLE_LISTS = ("categories", "minhash", "terms", "term_weights", "entities", "embedding")


ChangeKind = Literal["new_story", "assign", "copy", "version", "merge", "split"]
"""``new_story``, ``assign``, ``copy`` and ``version`` are the cluster writer's (``version``: the
same member of the same story with new text); ``merge`` and ``split`` the repair pass's."""


@dataclass(frozen=True, slots=True)
class StoryChange:
    """One decision of a language writer, numbered by its offset in the language's change log.

    A merge moves ``article_id`` from ``other_story_id`` into ``story_id`` (the survivor); a split
    moves it from ``other_story_id`` into the new ``story_id``. ``score`` is the join or repair
    score behind the decision.
    """

    change_id: str
    """``<language>:<offset>``: unique, and the same when a replay decides the same."""
    offset: int
    language: str
    kind: ChangeKind
    story_id: str
    article_id: str | None
    copy_of: str | None
    """The original this article copies (the first article of a chain of copies), or None."""
    other_story_id: str | None
    score: float
    changed_at: datetime

    @classmethod
    def at(cls, language: str, offset: int, kind: ChangeKind, story_id: str, *, article_id: str | None,
           copy_of: str | None = None, other_story_id: str | None = None, score: float,
           changed_at: datetime) -> StoryChange:
        """The change at ``offset`` of ``language``'s log; its id is ``<language>:<offset>``.

        >>> StoryChange.at("en", 7, "assign", "s1", article_id="a1", score=0.5,
        ...                changed_at=datetime(2026, 12, 1)).change_id
        'en:7'
        """
        return cls(f"{language}:{offset}", offset, language, kind, story_id, article_id, copy_of, other_story_id,
                   score, changed_at)

    def to_row(self) -> dict[str, object]:
        """The row for ``STORY_CHANGES_SCHEMA``."""
        return _row_of(self)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> StoryChange:
        """The record of one ``STORY_CHANGES_SCHEMA`` row as pyarrow gives it.

        >>> change = StoryChange.at("en", 7, "assign", "s1", article_id="a1", score=0.5,
        ...                         changed_at=datetime(2026, 12, 1))
        >>> StoryChange.from_row(change.to_row()) == change
        True
        """
        return cls(*(row[name] for name in _CHANGE_COLUMNS))

    @classmethod
    def from_table(cls, table: ColumnTable) -> list[StoryChange]:
        """The records of a ``STORY_CHANGES_SCHEMA`` table, in its order, read a column at a time."""
        return [cls(*values) for values in zip(*_columns_of(table, _CHANGE_COLUMNS, ()), strict=True)]


_CHANGE_COLUMNS = tuple(f.name for f in fields(StoryChange))


@dataclass(frozen=True, slots=True)
class RankedStory:
    """One story on one (edition, section) list, as ranked: a row of
    :func:`transforms.ranking.rank_editions` (its columns, ``RANKED_COLUMNS``, in this order).

    The story's aggregate over its articles (coverage, velocity, freshness; the regional share of the
    edition's region) and its place; page assembly turns it into a :class:`PageStory`.
    """

    edition: str
    section: str
    story_id: str
    score: float
    coverage: float
    velocity: float
    freshness: float
    regional_share: float
    is_breaking: bool
    is_pinned: bool
    breaking_since: datetime | None
    first_seen_at: datetime
    position: int
    """1-based, in the ranked order (pinned Breaking stories first, then by score and id)."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RankedStory:
        """A ranked story from a ``rank_editions`` row (a frame's ``to_dicts()``)."""
        return cls(**{name: row[name] for name in _field_names(cls)})


@dataclass(frozen=True, slots=True)
class PageSource:
    """One article as a page lists it under its story: the representative first, then supporting links."""

    article_id: str
    publisher_id: str
    publisher: str
    title: str
    url: str
    first_seen_at: str | None
    """ISO 8601 UTC to the second (``...Z``), as pages carry times."""
    is_copy: bool
    is_opinion: bool
    is_paywalled: bool
    region: str | None

    def to_json(self) -> dict[str, object]:
        return _row_of(self)


@dataclass(frozen=True, slots=True)
class PageStory:
    """One story as an edition page lists it (``pages/{edition}/{section}/v{n}.json``, docs/snapshots.md):
    the headline of the edition's representative, its sources, its rank and the parts of its score.

    The API serves the page bytes as published; ``serving.models.StoryPublic`` documents the same
    fields (tests/transforms/test_records.py checks the two agree).
    """

    story_id: str
    title: str
    snippet: str
    image_url: str | None
    language: str
    sections: tuple[str, ...]
    first_seen_at: str | None
    updated_at: str | None
    source_count: int
    """Distinct publishers of originals (syndicated copies not counted)."""
    article_count: int
    representative_id: str
    sources: tuple[PageSource, ...]
    rank: int
    score: float
    score_parts: Mapping[str, float]
    """``coverage``, ``velocity``, ``freshness``, ``regional_share``, rounded as published."""
    is_breaking: bool
    breaking_since: str | None
    representative_choice: Mapping[str, object]
    """How the representative was chosen (``transforms.representative.RepresentativeChoice.summary``)."""

    def to_json(self) -> dict[str, object]:
        """The JSON object a page version holds for this story."""
        out = _row_of(self)
        out["sources"] = [s.to_json() for s in self.sources]
        out["score_parts"] = dict(self.score_parts)
        out["representative_choice"] = dict(self.representative_choice)
        return out


@dataclass(frozen=True, slots=True)
class EditionPage:
    """One edition page as published (``pages/{edition}/{section}/v{n}.json``, schema ``newsroom.page/1``):
    its stories in rank order and the ranking rules behind their scores."""

    edition: str
    section: str
    as_of: str
    stories: tuple[PageStory, ...]
    ranking: Mapping[str, float] | None = None
    """The weights and rules that turn ``score_parts`` into ``score`` (the reader's "Why this story?")."""

    def to_json(self) -> dict[str, object]:
        """The JSON object a page version holds (before its ``version``)."""
        out: dict[str, object] = {"schema": "newsroom.page/1", "edition": self.edition, "section": self.section,
                                  "as_of": self.as_of, "stories": [s.to_json() for s in self.stories]}
        if self.ranking is not None:
            out["ranking"] = dict(self.ranking)
        return out


@dataclass(frozen=True, slots=True)
class PoolStory:
    """A compact card of an edition's candidate pool: enough for serving to show a story it
    re-ranks (For you)."""

    story_id: str
    score: float
    score_parts: Mapping[str, float]
    sections: tuple[str, ...]
    is_breaking: bool
    breaking_since: str | None
    title: str
    snippet: str
    image_url: str | None
    language: str | None
    first_seen_at: str | None
    updated_at: str | None
    source_count: int
    article_count: int
    representative: PageSource

    def to_json(self) -> dict[str, object]:
        out = _row_of(self)
        out["score_parts"] = dict(self.score_parts)
        out["representative"] = self.representative.to_json()
        return out


@dataclass(frozen=True, slots=True)
class PoolPage:
    """An edition's candidate pool (``pages/{edition}/pool/v{n}.json``, schema ``newsroom.pool/1``),
    with the day's representative impressions the next cycle carries on (the daily share cap)."""

    edition: str
    as_of: str
    day: str
    impressions: Mapping[str, float]
    representatives: tuple[str, ...]
    """The publisher of each top-page story's representative, in page order."""
    stories: tuple[PoolStory, ...]
    section: str = "pool"

    def to_json(self) -> dict[str, object]:
        """The JSON object a pool version holds (before its ``version``)."""
        return {"schema": "newsroom.pool/1", "edition": self.edition, "section": self.section, "as_of": self.as_of,
                "impressions": {"day": self.day, "counts": dict(self.impressions)},
                "representatives": list(self.representatives), "stories": [s.to_json() for s in self.stories]}
