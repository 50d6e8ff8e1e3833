"""Search over the live window (issue 30): tokens, the query language, and the index rank builds.

One module for both sides, because both must cut text the same way: the rank & publish flow
builds the index (``build_search_index``) from the stories active in the last 48 hours and
publishes it as an immutable version beside the pages (``pages/search/v{n}.tar`` and its pointer,
``warehouse.search_versions.publish_search_index``); every serving replica loads the live version
(``SearchIndex.from_bytes``) and answers ``GET /v1/search`` from it; For you and the live stream
match keyword follows with :meth:`SearchQuery.matches` over the same tokens.

**The engine** is tantivy (the Rust search library, through its Python wheel, pinned in
pyproject.toml): an index is tantivy's folder of segment files, packed into one tar for the store
and unpacked by a replica into a private temporary folder, which it deletes when a newer version
replaces it. It was measured against SQLite's FTS5 (stdlib) on the dev corpora and at 10,000 and
50,000 stories (``bench/search_engines.py``, docs/measurements.md): the same quality (both rank
with BM25 over the same tokens), and at 50,000 stories a query with its facets took 0.70 ms at
the median and 6.0 ms at p99 against FTS5's 2.8 and 37 ms, in an index half the size.

**Tokens** (``search_tokens``, one analyzer for the index and for queries, run by tantivy in
Rust): NFKC, lower case, accents folded to ASCII (``Zürich`` finds ``Zurich``); words are runs of
letters, marks and digits; each Han, kana, Hangul and Bopomofo character is a token of its own,
since Chinese and Japanese are written without spaces: a query word in those scripts becomes a
phrase of its characters, which finds ``北京`` in ``北京天气`` and not in ``北部...京``. No stemming:
it is language-specific and the editions are not all English, so ``train`` does not find
``trains`` (write ``train OR trains``).

**The query language** (``parse_query``), the same for search, keyword follows and feeds:
words are all required; ``"a phrase"`` must appear as written; ``-word`` or ``-"a phrase"``
excludes; ``OR`` (upper case) between two words or phrases accepts either. Anything else is a
:class:`SearchQueryError` with a message a reader can act on (an unclosed quote, a dangling
``OR``, nothing but exclusions, a query over 200 characters or 32 terms).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import tarfile
import tempfile
import threading
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict

import tantivy

from newsroom.times import parse_iso_datetime
from warehouse.errors import SearchIndexError, SearchQueryError
from warehouse.snapshot_json import StoryJson

SEARCH_SCHEMA = "newsroom.search/1"
INDEX_FORMAT = "tantivy-0.27/1"
META_FILE = "newsroom-search.json"
"""Inside the tar, beside tantivy's files: the schema, format, document count and what was indexed."""
MAX_QUERY_CHARS = 200
"""A query longer than this is refused: a reader types a few words; a long one costs every replica."""
MAX_QUERY_TERMS = 32
"""Words and phrases in one query (alternatives and exclusions count): a pasted headline fits."""
MAX_PHRASE_TOKENS = 32
"""Tokens in one phrase: a Chinese query word is a phrase of its characters."""
MAX_TOKEN_BYTES = 256
"""A longer run of letters (in UTF-8) is no word a reader types; it is left out of the index."""
MAX_FIELD_CHARS = 4000
"""Each text handed to the tokenizer (and its regular expression) is cut to this many characters."""
BOUNDARY = "\u2060"
"""Between two fields' tokens in :meth:`SearchDocument.tokens`, so no phrase spans two headlines."""

_UNSPACED = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Bopomofo}"
TOKEN_PATTERN = rf"[{_UNSPACED}]|[[\p{{L}}\p{{N}}\p{{M}}]--[{_UNSPACED}]]+"
"""The analyzer's words (Rust regex syntax): a character of a script written without spaces on its
own, else a run of letters, marks and digits."""
ANALYZER = "newsroom"
_CJK_RE = re.compile("[\u3040-\u30ff\u3100-\u312f\u31a0-\u31bf\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def text_analyzer() -> tantivy.TextAnalyzer:
    """The one analyzer: the index's text fields are cut by it, and so is every query."""
    return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(TOKEN_PATTERN))
            .filter(tantivy.Filter.remove_long(MAX_TOKEN_BYTES))
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.ascii_fold())
            .build())


_local = threading.local()


def _normalized(text: str, limit: int) -> str:
    return unicodedata.normalize("NFKC", text[:limit])


def search_tokens(text: str, limit: int = MAX_FIELD_CHARS) -> list[str]:
    """The tokens of ``text`` (its first ``limit`` characters), as the index and queries hold them.

    >>> search_tokens("Zürich's Mayor, 2024: 北京天气")
    ['zurich', 's', 'mayor', '2024', '北', '京', '天', '气']
    >>> search_tokens("Empat maut, Taufan Nanmadol badai Jepun")
    ['empat', 'maut', 'taufan', 'nanmadol', 'badai', 'jepun']
    """
    analyzer = getattr(_local, "analyzer", None)
    if analyzer is None:  # one per thread: an analyzer keeps state while it cuts a text
        analyzer = _local.analyzer = text_analyzer()
    return list(analyzer.analyze(_normalized(text, limit)))


Phrase = tuple[str, ...]
"""One word (a single token) or a phrase (tokens that must follow one another)."""


def _spell(phrase: Phrase) -> str:
    """A phrase as a reader would type it: CJK characters run together, other phrases quoted."""
    if all(_CJK_RE.fullmatch(t) for t in phrase):
        return "".join(phrase)
    return phrase[0] if len(phrase) == 1 else '"' + " ".join(phrase) + '"'


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A parsed query: every group must match (a group matches when any of its phrases does), and
    no excluded phrase may. ``text`` is its one spelling (keyword follows are stored by it)."""

    groups: tuple[tuple[Phrase, ...], ...]
    excluded: tuple[Phrase, ...] = ()

    @property
    def text(self) -> str:
        parts = [" OR ".join(_spell(p) for p in group) for group in self.groups]
        parts += ["-" + _spell(p) for p in self.excluded]
        return " ".join(parts)

    def phrases(self) -> Iterator[Phrase]:
        for group in self.groups:
            yield from group

    def matches(self, tokens: Sequence[str], token_set: frozenset[str] | set[str] | None = None) -> bool:
        """Whether a document's tokens (:meth:`SearchDocument.tokens`) satisfy the query."""
        present = token_set if token_set is not None else frozenset(tokens)
        if not all(any(_has_phrase(tokens, present, p) for p in group) for group in self.groups):
            return False
        return not any(_has_phrase(tokens, present, p) for p in self.excluded)

    def to_fts5(self) -> str:
        """The FTS5 MATCH expression: every token quoted, so no token is read as an operator."""
        def phrase(p: Phrase) -> str:
            return '"' + " ".join(p) + '"'

        required = " AND ".join("(" + " OR ".join(phrase(p) for p in group) + ")" for group in self.groups)
        return required + "".join(f" NOT {phrase(p)}" for p in self.excluded)


def _has_phrase(tokens: Sequence[str], present: frozenset[str] | set[str], phrase: Phrase) -> bool:
    if not all(t in present for t in phrase):
        return False
    if len(phrase) == 1:
        return True
    n = len(phrase)
    first = phrase[0]
    return any(tokens[i] == first and tuple(tokens[i:i + n]) == phrase for i in range(len(tokens) - n + 1))


_LEX = re.compile(r'\s*(?:(-?)"([^"]*)("?)|(\S+))')


def parse_query(raw: str) -> SearchQuery:
    """Parse a reader's query (see the module docstring). Raises SearchQueryError.

    >>> parse_query('sea wall OR barrier -"opinion piece"').text
    'sea wall OR barrier -"opinion piece"'
    >>> parse_query("北京 天气").groups
    ((('北', '京'),), (('天', '气'),))
    """
    if len(raw) > MAX_QUERY_CHARS:
        raise SearchQueryError(f"the query is longer than {MAX_QUERY_CHARS} characters")
    if _CONTROL.search(raw):
        raise SearchQueryError("the query holds control characters")
    items: list[tuple[str, Phrase | None]] = []  # ("or", None) | ("+", phrase) | ("-", phrase)
    pos = 0
    while pos < len(raw):
        match = _LEX.match(raw, pos)
        if match is None or match.end() == pos:
            break
        pos = match.end()
        minus, quoted, closed, bare = match.groups()
        if quoted is not None:
            if not closed:
                raise SearchQueryError("a quote is not closed")
            tokens = tuple(search_tokens(quoted))
            if not tokens:
                raise SearchQueryError("a quoted phrase holds no word")
            items.append(("-" if minus else "+", tokens))
            continue
        if bare == "OR":
            items.append(("or", None))
            continue
        negative = bare.startswith("-")
        word = bare[1:] if negative else bare
        if negative and not word:
            continue  # a dash standing alone is punctuation ("Results - live"), not an exclusion
        tokens = tuple(search_tokens(word))
        if tokens:
            items.append(("-" if negative else "+", tokens))
    groups: list[list[Phrase]] = []
    excluded: list[Phrase] = []
    joining = False
    for i, (kind, phrase) in enumerate(items):
        if kind == "or":
            if not groups or joining or i == len(items) - 1 or items[i - 1][0] != "+" or items[i + 1][0] != "+":
                raise SearchQueryError("OR must stand between two words or phrases to look for")
            joining = True
            continue
        assert phrase is not None
        if len(phrase) > MAX_PHRASE_TOKENS:
            raise SearchQueryError(f"a phrase is longer than {MAX_PHRASE_TOKENS} words")
        if kind == "-":
            excluded.append(phrase)
        elif joining:
            groups[-1].append(phrase)
        else:
            groups.append([phrase])
        joining = False
    if not groups:
        raise SearchQueryError("the query names nothing to look for" if raw.strip() else "the query is empty")
    if sum(len(g) for g in groups) + len(excluded) > MAX_QUERY_TERMS:
        raise SearchQueryError(f"the query has more than {MAX_QUERY_TERMS} words and phrases")
    return SearchQuery(tuple(tuple(dict.fromkeys(g)) for g in groups), tuple(dict.fromkeys(excluded)))


# -- documents ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchDocument:
    """One live story as the index holds it.

    ``card`` is what a result shows (a page-style story: the representative source first, at
    most four, and ``has_coverage``: whether its Full Coverage opens); the text fields are what
    a query reads, weighted in the order of :data:`FIELD_WEIGHTS`.
    """

    story_id: str
    language: str
    updated_at: str
    title: str
    headlines: tuple[str, ...] = ()
    snippet: str = ""
    publishers: tuple[tuple[str, str], ...] = ()
    """``(publisher_id, name)``, each once."""
    entities: tuple[str, ...] = ()
    sections: tuple[str, ...] = ()
    editions: tuple[str, ...] = ()
    card: SearchCardJson = field(default_factory=lambda: SearchCardJson())

    def names(self) -> tuple[str, ...]:
        return (*(name for _, name in self.publishers), *self.entities, *self.sections)

    def tokens(self) -> list[str]:
        """Every token, fields and values apart (for :meth:`SearchQuery.matches`)."""
        return story_tokens(self.title, self.headlines, self.snippet, self.names())


def story_tokens(title: str, headlines: Iterable[str], snippet: str, names: Iterable[str]) -> list[str]:
    """The tokens of a story's texts, a :data:`BOUNDARY` between two texts so no phrase spans them."""
    out: list[str] = []
    for text in (title, *headlines, snippet, *names):
        tokens = search_tokens(text) if text else []
        if out and tokens:
            out.append(BOUNDARY)
        out += tokens
    return out


TEXT_FIELDS = ("headline", "headlines", "snippet", "names")
FIELD_WEIGHTS = (4.0, 2.0, 1.0, 1.5)
"""BM25 boosts of the headline, the other headlines, the snippet, the names (publishers, entities,
sections): a word in the headline says more about the story than one in a snippet."""
FACETS = ("section", "publisher", "language")
MAX_FACET_VALUES = 20
_WRITER_HEAP_BYTES = 50_000_000


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("story_id", stored=True, tokenizer_name="raw")
    for name in TEXT_FIELDS:
        builder.add_text_field(name, tokenizer_name=ANALYZER)
    for name in ("edition", *FACETS):
        builder.add_text_field(name, tokenizer_name="raw", fast=True)
    builder.add_integer_field("updated", stored=True, indexed=True, fast=True)
    builder.add_bytes_field("card", stored=True)
    return builder.build()


def _epoch(iso: str) -> int:
    at = parse_iso_datetime(iso)
    return int(at.timestamp()) if isinstance(at, datetime) else 0


def documents_digest(documents: Iterable[SearchDocument]) -> str:
    """A hash of what an index of ``documents`` holds: equal documents, equal digest (a version
    whose digest equals the live one's is not published again)."""
    digest = hashlib.sha256()
    for d in sorted(documents, key=lambda d: d.story_id):
        digest.update(json.dumps([d.story_id, d.language, d.updated_at, d.title, d.headlines, d.snippet,
                                  d.publishers, d.entities, d.sections, d.editions, d.card], sort_keys=True,
                                 ensure_ascii=False, default=list).encode())
    return digest.hexdigest()


def build_search_index(documents: Iterable[SearchDocument], meta: Mapping[str, Any]) -> bytes:
    """An index over ``documents``, packed as one tar (tantivy's files and :data:`META_FILE`).

    Args:
        documents: The live stories (a story id given twice keeps its last document).
        meta: Written beside them (``as_of``, ``stories_version``, ...); the schema, the format,
            the count and digest of the documents and the publishers' names are added.
    """
    docs = sorted({d.story_id: d for d in documents}.values(), key=lambda d: d.story_id)
    with tempfile.TemporaryDirectory(prefix="newsroom-search-build-") as folder:
        index = _open(folder)
        writer = index.writer(heap_size=_WRITER_HEAP_BYTES, num_threads=1)
        for d in docs:
            writer.add_document(tantivy.Document(
                story_id=d.story_id,
                headline=_normalized(d.title, MAX_FIELD_CHARS),
                headlines=[_normalized(h, MAX_FIELD_CHARS) for h in d.headlines],
                snippet=_normalized(d.snippet, MAX_FIELD_CHARS),
                names=[_normalized(n, MAX_FIELD_CHARS) for n in d.names()],
                edition=list(d.editions), section=list(d.sections), publisher=[p for p, _ in d.publishers],
                language=d.language, updated=_epoch(d.updated_at),
                card=json.dumps(d.card, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(),
            ))
        writer.commit()
        writer.wait_merging_threads()
        names = {p: name for d in docs for p, name in d.publishers}
        full = dict(meta, schema=SEARCH_SCHEMA, format=INDEX_FORMAT, documents=len(docs),
                    digest=documents_digest(docs), publishers=dict(sorted(names.items())))
        (Path(folder) / META_FILE).write_text(json.dumps(full, sort_keys=True, ensure_ascii=False))
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(Path(folder).iterdir()):
                info = tar.gettarinfo(str(path), arcname=path.name)
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                with path.open("rb") as f:
                    tar.addfile(info, f)
        return out.getvalue()


def _open(folder: str) -> tantivy.Index:
    index = tantivy.Index(_schema(), path=folder, reuse=True)
    index.register_tokenizer(ANALYZER, text_analyzer())
    return index


# -- reading --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchHit:
    story_id: str
    score: float
    card: SearchCardJson


@dataclass(frozen=True, slots=True)
class FacetValue:
    value: str
    count: int
    label: str | None = None


@dataclass(frozen=True, slots=True)
class SearchResult:
    total: int
    hits: tuple[SearchHit, ...]
    facets: Mapping[str, tuple[FacetValue, ...]]


class SearchCardJson(StoryJson, total=False):
    """A result card: a page-style story (its representative first, then up to a few originals),
    marked as opening on Full Coverage."""

    has_coverage: bool


class SearchMetaJson(TypedDict, total=False):
    """:data:`META_FILE`: what an index version holds, written by :func:`build_search_index`."""

    schema: str
    format: str
    documents: int
    digest: str
    publishers: dict[str, str]
    as_of: str
    stories_version: int | None


def index_meta(data: bytes) -> SearchMetaJson:
    """The meta of an index's bytes, checked without unpacking them: a tar of flat regular files
    holding tantivy's ``meta.json`` and :data:`META_FILE` of this schema and format.

    Raises:
        SearchIndexError: The bytes are not such a tar.
    """
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            names = set()
            for member in tar.getmembers():
                if not member.isfile() or "/" in member.name or member.name in ("", ".", ".."):
                    raise SearchIndexError(f"not a search index: unexpected member {member.name[:80]!r}")
                names.add(member.name)
            if "meta.json" not in names or META_FILE not in names:
                raise SearchIndexError("not a search index: no meta.json or no " + META_FILE)
            extracted = tar.extractfile(META_FILE)
            meta = json.loads(extracted.read() if extracted is not None else b"")
    except (tarfile.TarError, OSError, ValueError, RecursionError) as e:
        raise SearchIndexError(f"not a search index: {type(e).__name__}: {e}") from e
    if not isinstance(meta, dict) or meta.get("schema") != SEARCH_SCHEMA or meta.get("format") != INDEX_FORMAT:
        raise SearchIndexError(f"not a search index of this release ({str(meta)[:80]})")
    return meta


def _unpack(data: bytes, folder: Path) -> SearchMetaJson:
    """Unpack an index's tar (checked by :func:`index_meta`) into ``folder``; returns its meta."""
    meta = index_meta(data)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            tar.extractall(folder, filter="data")
    except (tarfile.TarError, OSError) as e:
        raise SearchIndexError(f"not a search index: {type(e).__name__}: {e}") from e
    return meta


class SearchIndex:
    """One index version, unpacked into a private temporary folder (deleted by :meth:`close`)."""

    def __init__(self, data: bytes, parent: str | None = None) -> None:
        self.size = len(data)
        self.folder = Path(tempfile.mkdtemp(prefix="newsroom-search-", dir=parent))
        try:
            self.meta = _unpack(data, self.folder)
            self._index = _open(str(self.folder))
            self._index.reload()
            self._searcher = self._index.searcher()
            self._schema = self._index.schema
            found = self._searcher.num_docs
            if found != self.meta.get("documents"):
                raise SearchIndexError(f"not a search index: {found} documents, its meta says "
                                       f"{self.meta.get('documents')}")
        except (ValueError, OSError) as e:
            self.close()
            raise SearchIndexError(f"not a search index: {type(e).__name__}: {e}") from e
        except SearchIndexError:
            self.close()
            raise
        self._publisher_names: Mapping[str, str] = self.meta.get("publishers") or {}

    @classmethod
    def from_bytes(cls, data: bytes, parent: str | None = None) -> SearchIndex:
        """Raises SearchIndexError when ``data`` is not an index this release reads."""
        return cls(data, parent)

    @property
    def documents(self) -> int:
        return int(self.meta.get("documents") or 0)

    def _phrase(self, phrase: Phrase) -> tantivy.Query:
        per_field = []
        for name, weight in zip(TEXT_FIELDS, FIELD_WEIGHTS, strict=True):
            query = (tantivy.Query.term_query(self._schema, name, phrase[0]) if len(phrase) == 1
                     else tantivy.Query.phrase_query(self._schema, name, list(phrase)))
            per_field.append((tantivy.Occur.Should, tantivy.Query.boost_query(query, weight)))
        return tantivy.Query.boolean_query(per_field)

    def _query(self, query: SearchQuery, filters: Sequence[tantivy.Query]) -> tantivy.Query:
        clauses = [(tantivy.Occur.Must, tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, self._phrase(p)) for p in group])) for group in query.groups]
        clauses += [(tantivy.Occur.MustNot, self._phrase(p)) for p in query.excluded]
        # Filters match or not; they add nothing to a story's score.
        clauses += [(tantivy.Occur.Must, tantivy.Query.const_score_query(f, 0.0)) for f in filters]
        return tantivy.Query.boolean_query(clauses)

    def _facet(self, query: tantivy.Query, name: str) -> tuple[FacetValue, ...]:
        found = self._searcher.aggregate(query, {name: {"terms": {"field": name, "size": MAX_FACET_VALUES}}})
        buckets = sorted(((str(b["key"]), int(b["doc_count"])) for b in found[name]["buckets"]),
                         key=lambda kv: (-kv[1], kv[0]))
        labels = self._publisher_names if name == "publisher" else {}
        return tuple(FacetValue(key, count, labels.get(key)) for key, count in buckets)

    def search(self, query: SearchQuery, *, edition: str | None = None, section: str | None = None,
               publisher: str | None = None, language: str | None = None, since: str | None = None,
               limit: int = 20, offset: int = 0, facets: bool = True,
               only: Iterable[str] | None = None) -> SearchResult:
        """Stories matching ``query``, best first (BM25, then the most recently updated, then id).

        Args:
            edition: Only stories of this edition (those its pages list, and for a story no page
                lists, the editions of its language).
            section, publisher, language: Only stories with this value of that facet. Each facet is
                counted with the other facets' filters and not its own, so a reader sees what the
                other values hold.
            since: Only stories updated at or after this ISO instant.
            only: Only these story ids (the live stream's new stories).
        """
        filters = []
        if edition is not None:
            filters.append(tantivy.Query.term_query(self._schema, "edition", edition))
        if since is not None:
            filters.append(tantivy.Query.range_query(self._schema, "updated", tantivy.FieldType.Integer,
                                                     _epoch(since), None))
        if only is not None:
            ids = sorted(set(only))
            if not ids:
                return SearchResult(0, (), {})
            filters.append(tantivy.Query.term_set_query(self._schema, "story_id", ids))
        chosen = {"section": section, "publisher": publisher, "language": language}
        facet_filters = {name: tantivy.Query.term_query(self._schema, name, value)
                         for name, value in chosen.items() if value is not None}
        found: dict[str, tuple[FacetValue, ...]] = {}
        if facets:
            for name in FACETS:
                others = [f for other, f in facet_filters.items() if other != name]
                found[name] = self._facet(self._query(query, [*filters, *others]), name)
        full = self._query(query, [*filters, *facet_filters.values()])
        # Equal scores are ordered by update time, then id: read a little past the page for them.
        result = self._searcher.search(full, limit=offset + limit + 20, count=True)
        rows = []
        for score, address in result.hits:
            doc = self._searcher.doc(address)
            rows.append((round(float(score), 6), int(doc["updated"][0]), str(doc["story_id"][0]), doc["card"][0]))
        rows.sort(key=lambda r: (-r[0], -r[1], r[2]))
        hits = tuple(SearchHit(sid, score, json.loads(bytes(card))) for score, _, sid, card in rows[offset:offset + limit])
        return SearchResult(int(result.count or 0), hits, found)

    def story_ids(self) -> frozenset[str]:
        """Every story the index holds."""
        result = self._searcher.search(tantivy.Query.all_query(), limit=max(1, self.documents), count=False)
        return frozenset(str(self._searcher.doc(a)["story_id"][0]) for _, a in result.hits)

    def close(self) -> None:
        """Delete the unpacked files (a search still running keeps its open files until it ends)."""
        shutil.rmtree(self.folder, ignore_errors=True)
