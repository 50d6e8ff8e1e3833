"""The search index of the live window (issue 30): tokens in every edition's language, the query
language and its errors, the index itself, and its versions beside the pages.

Real tantivy indexes in temporary folders and a real LocalStore; no mocks.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from warehouse import layout
from warehouse.search_index import (
    MAX_QUERY_CHARS,
    SearchDocument,
    SearchIndex,
    SearchIndexError,
    SearchQueryError,
    build_search_index,
    index_meta,
    parse_query,
    search_tokens,
)
from warehouse.search_versions import prune_search_versions, publish_search_index, read_search_pointer
from warehouse.snapshots import repoint_to_newest_valid, version_problem
from warehouse.store import LocalStore

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def doc(story_id: str, title: str, *, language: str = "en", headlines: tuple[str, ...] = (), snippet: str = "",
        sections: tuple[str, ...] = ("world",), editions: tuple[str, ...] = ("en-US",),
        publishers: tuple[tuple[str, str], ...] = (("harbor", "Harbor Times"),),
        updated_at: str = "2026-12-03T08:00:00Z") -> SearchDocument:
    return SearchDocument(story_id, language, updated_at, title, headlines, snippet, publishers, (), sections, editions,
                          {"story_id": story_id, "title": title, "has_coverage": True})


STORIES = [
    doc("s-seawall", "Coastal cities agree on a shared plan to raise sea walls",
        headlines=("Port cities sign joint sea wall pact",), snippet="Mayors from eleven port cities signed."),
    doc("s-rail", "Regional rail operator orders 40 battery trains", sections=("business",),
        publishers=(("ledger", "The Daily Ledger"),), snippet="The largest order of its kind."),
    doc("s-typhoon-ms", "Empat maut, Taufan Nanmadol badai Jepun", language="ms", editions=("ms-MY",),
        publishers=(("berita", "Berita Harian"),)),
    doc("s-typhoon-zh", "台风南玛都吹袭日本 四人死亡", language="zh", editions=("zh-CN",),
        publishers=(("lianhe", "联合早报"),)),
    doc("s-beijing", "北京天气转晴 空气质量改善", language="zh", editions=("zh-CN",), sections=("science",)),
    doc("s-zurich", "Zürich votes on a new tram line", updated_at="2026-12-03T07:00:00Z"),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SearchIndex:
    built = SearchIndex.from_bytes(build_search_index(STORIES, {"as_of": "2026-12-03T09:00:00Z"}),
                                   str(tmp_path_factory.mktemp("unpacked")))
    return built


def ids(index: SearchIndex, query: str, **options: object) -> list[str]:
    return [h.story_id for h in index.search(parse_query(query), **options).hits]  # type: ignore[arg-type]


# -- tokens and the query language ------------------------------------------------------------


@pytest.mark.parametrize(("text", "tokens"), [
    ("Zürich's tram", ["zurich", "s", "tram"]),
    ("Taufan Nanmadol badai Jepun", ["taufan", "nanmadol", "badai", "jepun"]),
    ("北京天气", ["北", "京", "天", "气"]),
    ("ＡＢＣ１２３", ["abc123"]),  # full-width forms (NFKC) as typed on a Chinese keyboard
    ("under_score x-ray", ["under", "score", "x", "ray"]),
], ids=["latin-accents", "malay", "chinese", "full-width", "punctuation"])
def test_tokens_fit_every_editions_language(text: str, tokens: list[str]) -> None:
    assert search_tokens(text) == tokens


@pytest.mark.parametrize(("query", "why"), [
    ("x" * (MAX_QUERY_CHARS + 1), "longer than 200 characters"),
    ('"sea wall', "a quote is not closed"),
    ('""', "holds no word"),
    ("sea OR", "OR must stand between"),
    ("OR sea", "OR must stand between"),
    ("sea OR OR wall", "OR must stand between"),
    ("sea OR -wall", "OR must stand between"),
    ("-wall", "nothing to look for"),
    ("   ", "empty"),
    ("!!! ???", "nothing to look for"),
    ("sea\x00wall", "control characters"),
    (" ".join(f"w{i}" for i in range(33)), "more than 32"),
], ids=["too-long", "unclosed-quote", "empty-phrase", "or-last", "or-first", "or-twice", "or-exclusion",
        "only-exclusion", "blank", "punctuation", "control-character", "too-many-terms"])
def test_a_query_that_cannot_be_searched_says_why(query: str, why: str) -> None:
    with pytest.raises(SearchQueryError, match=why):
        parse_query(query)


def test_a_query_has_one_spelling() -> None:
    assert parse_query('  Sea   WALL  OR Barrier -"Opinion  Piece" ').text == 'sea wall OR barrier -"opinion piece"'
    assert parse_query("北京").text == "北京"
    assert parse_query("results - live").text == "results live"  # a dash alone is punctuation


# -- the index --------------------------------------------------------------------------------


def test_every_word_is_required_and_phrases_keep_their_order(index: SearchIndex) -> None:
    assert ids(index, "sea walls") == ["s-seawall"]
    assert ids(index, '"sea wall"') == ["s-seawall"]  # in another headline of the story
    assert ids(index, '"wall sea"') == []
    assert ids(index, "sea trains") == []
    assert sorted(ids(index, "sea OR trains")) == ["s-rail", "s-seawall"]
    assert ids(index, "port -pact") == []


def test_chinese_matches_a_word_as_its_characters_in_a_row(index: SearchIndex) -> None:
    assert ids(index, "北京") == ["s-beijing"]
    assert ids(index, "京北") == []  # both characters are there, not in this order
    assert ids(index, "台风 日本") == ["s-typhoon-zh"]


def test_malay_and_accents(index: SearchIndex) -> None:
    assert ids(index, "taufan jepun") == ["s-typhoon-ms"]
    assert ids(index, "zurich") == ids(index, "Zürich") == ["s-zurich"]


def test_publishers_sections_and_filters(index: SearchIndex) -> None:
    assert ids(index, "ledger") == ["s-rail"]  # a publisher's name is searched too
    assert ids(index, "sea OR trains", section="business") == ["s-rail"]
    assert ids(index, "sea OR trains", edition="ms-MY") == []
    assert ids(index, "tram OR sea", since="2026-12-03T07:30:00Z") == ["s-seawall"]
    assert ids(index, "sea OR trains", only=["s-rail"]) == ["s-rail"]


def test_facets_count_with_the_other_filters(index: SearchIndex) -> None:
    result = index.search(parse_query("sea OR trains OR tram"), section="business")
    assert result.total == 1
    sections = {v.value: v.count for v in result.facets["section"]}
    assert sections == {"world": 2, "business": 1}  # counted without the section filter
    assert {(v.value, v.label, v.count) for v in result.facets["publisher"]} == {("ledger", "The Daily Ledger", 1)}


def test_relevance_then_recency(tmp_path: Path) -> None:
    docs = [doc("a-old", "Storm hits the coast", updated_at="2026-12-03T01:00:00Z"),
            doc("b-new", "Storm hits the coast", updated_at="2026-12-03T05:00:00Z"),
            doc("c-other", "A coast road reopens after the storm season", snippet="storm storm")]
    index = SearchIndex.from_bytes(build_search_index(docs, {}), str(tmp_path))
    assert ids(index, "storm hits")[:2] == ["b-new", "a-old"]  # equal scores: the most recently updated first


def test_bytes_that_are_not_an_index_are_refused(tmp_path: Path) -> None:
    for data in (b"", b"not a tar", build_search_index(STORIES, {})[:2000]):
        with pytest.raises(SearchIndexError):
            SearchIndex.from_bytes(data, str(tmp_path))
    assert list(tmp_path.iterdir()) == []  # nothing unpacked is left behind


# -- versions beside the pages ----------------------------------------------------------------


def _publish(store: LocalStore, docs: list[SearchDocument], at: str, *, valid: bool = True) -> object:
    return publish_search_index(store, lambda: build_search_index(docs, {"as_of": at}), digest=str(len(docs)) + at,
                                as_of=at, documents=len(docs), now=NOW,
                                validate=lambda data: None if valid else "refused by the test")


def test_a_version_is_validated_then_the_pointer_moves(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    refused = _publish(store, STORIES, "2026-12-03T09:00:00Z", valid=False)
    assert not refused.published and refused.reason.startswith("invalid")  # type: ignore[attr-defined]
    assert store.list("pages/search/") == []  # nothing written
    first = _publish(store, STORIES, "2026-12-03T09:00:00Z")
    assert first.published and first.key == layout.search_index_key(1)  # type: ignore[attr-defined]
    pointer, raw = read_search_pointer(store) or (None, {})
    assert pointer is not None and pointer.version == 1 and raw["documents"] == len(STORIES)
    assert index_meta(store.get(pointer.key).data)["documents"] == len(STORIES)
    assert version_problem(pointer.key, store.get(pointer.key).data) is None
    again = _publish(store, STORIES, "2026-12-03T09:00:00Z")
    assert not again.published and again.reason == "unchanged"  # type: ignore[attr-defined]
    stale = _publish(store, STORIES[:2], "2026-12-03T08:00:00Z")
    assert not stale.published and stale.reason.startswith("stale")  # type: ignore[attr-defined]


def test_old_versions_are_pruned_and_a_damaged_pointer_repointed(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    for minute in range(4):
        assert _publish(store, STORIES[:minute + 1], f"2026-12-03T09:0{minute}:00Z").published  # type: ignore[attr-defined]
    assert prune_search_versions(store, keep=1) == [layout.search_index_key(1), layout.search_index_key(2)]
    assert sorted(store.list("pages/search/")) == ["pages/search/latest.json", "pages/search/v3.tar",
                                                   "pages/search/v4.tar"]
    store.put(layout.search_index_key(4), b"garbage")  # the live version damaged
    assert version_problem(layout.search_index_key(4), b"garbage") is not None
    moved = repoint_to_newest_valid(store, layout.search_index_pointer_key(), now=NOW)
    assert moved is not None and moved.published and moved.version == 3
