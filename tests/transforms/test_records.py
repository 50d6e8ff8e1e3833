"""The typed records of an article's path match the Arrow schemas they are written under, field for field."""

from __future__ import annotations

import dataclasses
import types
import typing
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from serving.models import SourcePublic, StoryPublic
from transforms.features import features_from_row, features_of_row
from transforms.ranking import RANKED_COLUMNS
from transforms.records import ArticleRow, FeedState, PageSource, PageStory, RankedStory, StoryChange
from transforms.signatures import SIGNATURE_VERSION
from warehouse.schemas import ARTICLES_SCHEMA, FEED_STATE_SCHEMA, STORY_CHANGES_SCHEMA

_SCALARS: dict[type, tuple[typing.Callable[[pa.DataType], bool], ...]] = {
    str: (pa.types.is_string,),
    int: (pa.types.is_integer,),
    float: (pa.types.is_floating,),
    bool: (pa.types.is_boolean,),
    datetime: (lambda t: pa.types.is_timestamp(t) and t.tz == "UTC",),
}


def _fits(annotation: object, arrow: pa.DataType) -> bool:
    """Whether values of a record field's type are what the Arrow column holds."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(members) == 1 and _fits(members[0], arrow)
    if typing.get_origin(annotation) is typing.Literal:
        values = typing.get_args(annotation)
        return all(isinstance(v, str) for v in values) and pa.types.is_string(arrow)
    if typing.get_origin(annotation) is tuple:
        item, ellipsis = typing.get_args(annotation)
        return ellipsis is Ellipsis and pa.types.is_list(arrow) and _fits(item, arrow.value_type)
    return any(check(arrow) for check in _SCALARS.get(annotation, ()))  # type: ignore[call-overload]


TABLE_RECORDS = [(FeedState, FEED_STATE_SCHEMA), (ArticleRow, ARTICLES_SCHEMA), (StoryChange, STORY_CHANGES_SCHEMA)]


@pytest.mark.parametrize(("record", "schema"), TABLE_RECORDS, ids=[r.__name__ for r, _ in TABLE_RECORDS])
def test_a_record_has_its_schemas_columns_in_order_with_fitting_types(record: type, schema: pa.Schema) -> None:
    hints = typing.get_type_hints(record)
    assert [f.name for f in dataclasses.fields(record)] == schema.names
    wrong = {f.name: (hints[f.name], str(f.type)) for f in schema if not _fits(hints[f.name], f.type)}
    assert not wrong, wrong


@pytest.mark.parametrize("record", [r for r, _ in TABLE_RECORDS], ids=[r.__name__ for r, _ in TABLE_RECORDS])
def test_a_record_is_frozen(record: type) -> None:
    params = record.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen and hasattr(record, "__slots__")


def test_the_type_check_catches_a_mismatch() -> None:
    assert _fits(int | None, pa.int16()) and _fits(tuple[float, ...], pa.list_(pa.float32()))
    assert _fits(typing.Literal["a", "b"], pa.string())
    assert not _fits(str, pa.int32()) and not _fits(tuple[str, ...], pa.list_(pa.float32()))
    assert not _fits(typing.Literal[1, 2], pa.string())
    assert not _fits(datetime, pa.timestamp("us"))  # a naive column would lose the UTC rule


def test_a_story_change_round_trips_through_its_table() -> None:
    change = StoryChange.at("en", 41, "merge", "s-survivor", article_id="a1", copy_of="a0",
                            other_story_id="s-merged", score=0.75, changed_at=datetime(2026, 12, 1, 12, tzinfo=UTC))
    row = pa.Table.from_pylist([change.to_row()], schema=STORY_CHANGES_SCHEMA).to_pylist()[0]
    assert StoryChange(**row) == change
    assert row["change_id"] == "en:41"


def _article_rows() -> list[ArticleRow]:
    at = datetime(2026, 12, 1, 12, tzinfo=UTC)
    base = ArticleRow(article_id="a1", version=2, content_hash="h1", url="https://x.test/1", canonical_url="https://x.test/1",
                      feed_id="f", publisher_id="p", language="en", region="US", title="Strike ends", snippet="The strike",
                      image_url=None, author="A. Writer", section="business", categories=("labour", "rail"),
                      is_opinion=False, published_at=at, first_seen_at=at, simhash=2**63 + 5, minhash=(1, 2**32 - 1),
                      terms=("strike", "rail"), term_weights=(0.5, 0.25), entities=("Deutsche Bahn",),
                      embedding=(0.125, -0.5), signature_version=SIGNATURE_VERSION, section_guess="business",
                      embedding_model="model-x")
    bare = dataclasses.replace(base, article_id="a2", categories=(), published_at=None, embedding=None,
                               embedding_model=None, implausible_published_at=at, section_guess=None)
    return [base, bare]


def test_article_rows_read_back_from_their_table_as_written() -> None:
    rows = _article_rows()
    table = pa.Table.from_pylist([r.to_row() for r in rows], schema=ARTICLES_SCHEMA)
    assert ArticleRow.from_table(table) == rows
    assert [ArticleRow.from_row(r) for r in table.to_pylist()] == rows


def test_an_article_table_without_a_newer_column_reads_it_as_null() -> None:
    rows = _article_rows()
    table = pa.Table.from_pylist([r.to_row() for r in rows], schema=ARTICLES_SCHEMA).drop_columns(["embedding_model"])
    assert [r.embedding_model for r in ArticleRow.from_table(table)] == [None, None]
    assert ArticleRow.from_table(table) == [ArticleRow.from_row(r) for r in table.to_pylist()]


def test_story_changes_read_back_from_their_table_as_written() -> None:
    at = datetime(2026, 12, 1, 12, tzinfo=UTC)
    changes = [StoryChange.at("en", 7, "new_story", "s1", article_id="a1", score=1.0, changed_at=at),
               StoryChange.at("en", 8, "split", "s2", article_id="a2", copy_of="a1", other_story_id="s1", score=0.25,
                              changed_at=at)]
    table = pa.Table.from_pylist([c.to_row() for c in changes], schema=STORY_CHANGES_SCHEMA)
    assert StoryChange.from_table(table) == changes
    assert [StoryChange.from_row(r) for r in table.to_pylist()] == changes


def test_features_are_a_view_of_the_stored_row() -> None:
    table = pa.Table.from_pylist([r.to_row() for r in _article_rows()], schema=ARTICLES_SCHEMA)
    for row, mapping in zip(ArticleRow.from_table(table), table.to_pylist(), strict=True):
        features = features_of_row(row)
        assert features == features_from_row(mapping)
        assert features.minhash is row.minhash and features.terms is row.terms  # shared, not rebuilt


def test_features_of_a_row_of_another_signature_version_are_refused() -> None:
    row = dataclasses.replace(_article_rows()[0], signature_version="sig-v0")
    with pytest.raises(ValueError, match="signature version 'sig-v0'"):
        features_of_row(row)


def test_a_feed_state_round_trips_through_its_table() -> None:
    at = datetime(2026, 12, 1, 12, tzinfo=UTC)
    state = FeedState("f", next_poll_at=at, recent_guids=("b", "a"), rate_counts=(0.5,) * 168, etag='"v"',
                      is_parked=True, error_streak=3)
    table = pa.Table.from_pylist([state.to_row()], schema=FEED_STATE_SCHEMA)
    assert FeedState.from_row(table.to_pylist()[0]) == state


# -- the JSON hops: what a page lists, and the API model that documents it ----------------------


def _page_story() -> PageStory:
    source = PageSource("a1", "p1", "Harbor Times", "Sea walls rise", "https://harbor.example/a1",
                        "2026-12-01T11:00:00Z", False, False, True, "US")
    return PageStory("s1", "Sea walls rise", "Eleven ports agreed.", None, "en", ("world",), "2026-12-01T11:00:00Z",
                     "2026-12-01T11:30:00Z", 1, 2, "a1", (source,), 1, 2.5,
                     {"coverage": 1.0, "velocity": 0.0, "freshness": 0.9, "regional_share": 1.0}, True,
                     "2026-12-01T11:10:00Z", {"candidates": 1, "near_ties": ["a1"], "stepped_aside": []})


@pytest.mark.parametrize(("record", "model"), [(PageStory, StoryPublic), (PageSource, SourcePublic)],
                         ids=["PageStory", "PageSource"])
def test_a_page_record_and_its_api_model_name_the_same_fields(record: type, model: type) -> None:
    coverage_only = {"editions"} if model is StoryPublic else set()  # Full Coverage only
    assert {f.name for f in dataclasses.fields(record)} == set(model.model_fields) - coverage_only


def test_a_page_story_as_published_is_what_the_api_model_reads() -> None:
    story = _page_story()
    parsed = StoryPublic.model_validate(story.to_json())
    assert parsed.story_id == "s1" and parsed.sources[0].is_paywalled
    assert parsed.representative_choice is not None and parsed.representative_choice.near_ties == ["a1"]
    assert parsed.model_extra == {}  # nothing the model does not declare


def test_a_ranked_story_reads_the_columns_rank_editions_selects() -> None:
    assert [f.name for f in dataclasses.fields(RankedStory)] == list(RANKED_COLUMNS)
