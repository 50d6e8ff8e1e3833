"""Search engines for the live window, measured side by side (issue 30): SQLite FTS5 and tantivy.

Both engines index the same documents (``warehouse.search_index.SearchDocument``), cut into the
same tokens (``search_tokens``: each engine is handed space-separated tokens and splits on the
spaces only), and answer the same parsed queries (``parse_query``) the way ``GET /v1/search``
does: every word required, phrases as phrases, BM25 over the four weighted fields, the edition
filter, and facet counts (section, publisher, language) over the matches. So what differs is the
engine alone. For each:

* **build**: seconds to build one version from the documents and turn it into the bytes the store
  keeps (FTS5: the serialised database; tantivy: its index folder packed into one tar), and those
  bytes;
* **load**: seconds for a replica to make a version servable from the bytes (FTS5: deserialise
  into memory; tantivy: unpack into a temporary folder and open);
* **query**: p50/p99 of one search with its facets, over queries drawn from the documents'
  headlines (the first two to four words of a random headline), one thread;
* **quality** on the dev corpora (each gold event a story, its first article's headline the story's
  headline, the others its other headlines): a story's own headline words as the query must find
  that story in the top 3 (the rate and the mean reciprocal rank, MRR), and the same for its
  first three words (harder: many stories share them; ranking decides).

``--store DIR`` scores the live index a pipeline published instead (``newsroom demo --no-serve``
over the dev corpora, say): every story it holds, its own headline as the query, per language.

Corpora: ``ecbplus-dev`` and ``gnews2014-dev`` (English) and ``mmds-dev`` (English, Malay, Chinese)
from ``$NEWSROOM_CORPUS_DIR/clustering``; the scale runs recombine their headlines and snippets into
``--stories`` synthetic stories (seeded).

    .venv/bin/python -m bench.search_engines                     # quality on the dev corpora, then 10,000 and 50,000 stories
    .venv/bin/python -m bench.search_engines --stories 1000 --queries 200   # quick
    .venv/bin/python -m bench.search_engines --store var/demo/store   # the index the pipeline published
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import random
import sqlite3
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from queue import Empty, Queue
from typing import Any, Protocol

import numpy as np

from bench.harness import CORPUS_DIR, machine_line, percentile
from warehouse.search_index import (
    BOUNDARY,
    FIELD_WEIGHTS,
    MAX_FACET_VALUES,
    FacetValue,
    SearchDocument,
    SearchHit,
    SearchIndex,
    SearchQuery,
    SearchQueryError,
    SearchResult,
    build_search_index,
    parse_query,
    search_tokens,
)

_CONNECTIONS = 1
CORPORA = ("ecbplus-dev", "gnews2014-dev", "mmds-dev")
SECTIONS = ("world", "business", "technology", "science", "sports", "health", "politics", "entertainment")


def corpus_dir() -> Path:
    return Path(os.environ.get("NEWSROOM_CORPUS_DIR") or CORPUS_DIR) / "clustering"


class Engine(Protocol):
    name: str

    def build(self, docs: Sequence[SearchDocument]) -> bytes: ...

    def load(self, data: bytes) -> Callable[[SearchQuery, str | None], list[str]]: ...


class Tantivy:
    """The engine newsroom ships (``warehouse.search_index``)."""

    name = "tantivy"

    def __init__(self) -> None:
        self._unpacked = tempfile.TemporaryDirectory(prefix="bench-search-")  # removed with the engine

    def build(self, docs: Sequence[SearchDocument]) -> bytes:
        return build_search_index(docs, {"as_of": "bench"})

    def load(self, data: bytes) -> Callable[[SearchQuery, str | None], list[str]]:
        index = SearchIndex.from_bytes(data, self._unpacked.name)

        def search(query: SearchQuery, edition: str | None) -> list[str]:
            return [h.story_id for h in index.search(query, edition=edition, limit=20).hits]

        return search


class Fts5:
    """SQLite FTS5 (Python's own sqlite3): one database, serialised; the same tokens, weights,
    filters and facets (FTS5 scores the matches, numpy filters and counts them)."""

    name = "sqlite-fts5"

    def build(self, docs: Sequence[SearchDocument]) -> bytes:
        return fts5_build(docs, {"as_of": "bench"})

    def load(self, data: bytes) -> Callable[[SearchQuery, str | None], list[str]]:
        index = Fts5Index(data, connections=1)

        def search(query: SearchQuery, edition: str | None) -> list[str]:
            return [h.story_id for h in index.search(query, edition=edition, limit=20).hits]

        return search


def _field_tokens(d: SearchDocument) -> list[list[str]]:
    """The four fields' tokens (``search_tokens``), values apart, as FTS5 columns."""
    def joined(texts: Iterable[str]) -> list[str]:
        out: list[str] = []
        for text in texts:
            tokens = search_tokens(text)
            if out and tokens:
                out.append(BOUNDARY)
            out += tokens
        return out

    return [joined([d.title]), joined(d.headlines), joined([d.snippet]), joined(d.names())]


def _to_fts5(query: SearchQuery) -> str:
    def phrase(p: tuple[str, ...]) -> str:
        return '"' + " ".join(p) + '"'

    required = " AND ".join("(" + " OR ".join(phrase(p) for p in group) + ")" for group in query.groups)
    return required + "".join(f" NOT {phrase(p)}" for p in query.excluded)


_SCHEMA_SQL = """
create table meta (key text primary key, value text not null);
create table docs (rowid integer primary key, story_id text not null unique, language text not null,
                   updated_at text not null, has_coverage integer not null, card text not null);
create table doc_editions (edition text not null, rowid integer not null, primary key (edition, rowid)) without rowid;
create table doc_sections (section text not null, rowid integer not null, primary key (section, rowid)) without rowid;
create table doc_publishers (publisher_id text not null, rowid integer not null, name text not null,
                             primary key (publisher_id, rowid)) without rowid;
create virtual table fts using fts5(headline, headlines, snippet, names, content='', tokenize='ascii');
"""
# content='': the index keeps postings only (the text is never read back); 'ascii' splits on ASCII
# spaces and punctuation only, and our tokens hold neither, so FTS5 keeps them exactly as cut
# (BOUNDARY too: it is a token no query holds, so no phrase matches across two headlines).


def fts5_build(documents: Iterable[SearchDocument], meta: Mapping[str, Any]) -> bytes:
    """An index over ``documents`` as the bytes of one SQLite database (deterministic for equal input).

    Args:
        documents: The live stories, each once (by ``story_id``).
        meta: Written beside them (``as_of``, ``stories_version``, ...); ``schema`` and the count
            of documents are added.
    """
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        db.executescript(_SCHEMA_SQL)
        docs = sorted({d.story_id: d for d in documents}.values(), key=lambda d: d.story_id)
        db.execute("begin")
        for rowid, d in enumerate(docs, start=1):
            db.execute("insert into docs values (?, ?, ?, ?, ?, ?)",
                       (rowid, d.story_id, d.language, d.updated_at, 0,
                        json.dumps(d.card, sort_keys=True, separators=(",", ":"), ensure_ascii=False)))
            db.executemany("insert or ignore into doc_editions values (?, ?)", [(e, rowid) for e in d.editions])
            db.executemany("insert or ignore into doc_sections values (?, ?)", [(s, rowid) for s in d.sections])
            db.executemany("insert or ignore into doc_publishers values (?, ?, ?)",
                           [(p, rowid, name) for p, name in d.publishers])
            db.execute("insert into fts (rowid, headline, headlines, snippet, names) values (?, ?, ?, ?, ?)",
                       (rowid, *(" ".join(part) for part in _field_tokens(d))))
        full = dict(meta, documents=len(docs))
        db.executemany("insert into meta values (?, ?)",
                       [(k, json.dumps(v, sort_keys=True)) for k, v in sorted(full.items())])
        db.execute("commit")
        db.execute("insert into fts(fts) values ('optimize')")  # one segment: smaller, faster to read
        db.execute("vacuum")
        return bytes(db.serialize())
    finally:
        db.close()


class _Pairs:
    """Which documents carry which values (editions, sections, publishers), as CSR arrays by rowid."""

    __slots__ = ("values", "codes", "indptr", "_by_value")

    def __init__(self, n: int, rows: Iterable[tuple[int, str]]) -> None:
        pairs = sorted((rowid, value) for rowid, value in rows)
        self.values = sorted({v for _, v in pairs})
        code = {v: i for i, v in enumerate(self.values)}
        self.codes = np.asarray([code[v] for _, v in pairs], dtype=np.int32)
        rowids = np.asarray([r for r, _ in pairs], dtype=np.int64)
        self.indptr = np.searchsorted(rowids, np.arange(n + 2), side="left")
        self._by_value: dict[str, np.ndarray] = {}

    def mask(self, value: str, n: int) -> np.ndarray:
        """Which rowids (0..n) carry ``value``."""
        found = self._by_value.get(value)
        if found is None:
            found = np.zeros(n + 1, dtype=bool)
            i = bisect.bisect_left(self.values, value)
            if i < len(self.values) and self.values[i] == value:
                rows = np.repeat(np.arange(len(self.indptr) - 1), np.diff(self.indptr))
                found[rows[self.codes == i]] = True
            self._by_value[value] = found  # a race computes it twice: harmless
        return found

    def count(self, rowids: np.ndarray) -> list[tuple[str, int]]:
        """How many of ``rowids`` carry each value, most first (ties by value)."""
        starts, ends = self.indptr[rowids], self.indptr[rowids + 1]
        lengths = ends - starts
        total = int(lengths.sum())
        if total == 0:
            return []
        offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        counts = np.bincount(self.codes[offsets + np.arange(total)], minlength=len(self.values))
        top = sorted(((-int(c), i) for i, c in enumerate(counts) if c), key=lambda x: (x[0], self.values[x[1]]))
        return [(self.values[i], -c) for c, i in top[:MAX_FACET_VALUES]]


class Fts5Index:
    """One index version held in memory.

    FTS5 finds the matches and scores them (BM25); the filters and facet counts run over arrays
    read once when the version is loaded (what each story's editions, sections, publishers,
    language and update time are), so a query reads the full-text index once. A few connections
    answer at once (SQLite releases the interpreter lock while it runs a query): each holds its
    own copy of the database.
    """

    def __init__(self, data: bytes, connections: int = _CONNECTIONS) -> None:
        self._pool: Queue[sqlite3.Connection] = Queue()
        self.size = len(data)
        first = self._open(data)
        rows = dict(first.execute("select key, value from meta").fetchall())
        self.meta: dict[str, Any] = {k: json.loads(v) for k, v in rows.items()}
        docs = first.execute("select rowid, story_id, language, updated_at from docs order by rowid").fetchall()
        n = docs[-1][0] if docs else 0
        self.n = n
        self._story_ids: list[str] = [""] * (n + 1)
        self._rowid_of: dict[str, int] = {}
        languages: list[str] = [""] * (n + 1)
        updated: list[str] = [""] * (n + 1)
        for rowid, story_id, language, updated_at in docs:
            self._story_ids[rowid] = story_id
            self._rowid_of[story_id] = rowid
            languages[rowid] = language
            updated[rowid] = updated_at
        self._updated = np.asarray(updated, dtype="U20")
        self._languages = _Pairs(n, ((r, languages[r]) for r in range(1, n + 1)))
        self._editions = _Pairs(n, first.execute("select rowid, edition from doc_editions"))
        self._sections = _Pairs(n, first.execute("select rowid, section from doc_sections"))
        self._publishers = _Pairs(n, first.execute("select rowid, publisher_id from doc_publishers"))
        self._publisher_names = dict(first.execute("select publisher_id, min(name) from doc_publishers group by 1"))
        self._pool.put(first)
        for _ in range(max(0, connections - 1)):
            self._pool.put(self._open(data))

    @staticmethod
    def _open(data: bytes) -> sqlite3.Connection:
        db = sqlite3.connect(":memory:", check_same_thread=False)
        db.deserialize(data)
        db.execute("pragma query_only = 1")
        return db

    @property
    def documents(self) -> int:
        return int(self.meta.get("documents") or 0)

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        db = self._pool.get()
        try:
            yield db
        finally:
            self._pool.put(db)

    def story_ids(self) -> frozenset[str]:
        """Every story the index holds."""
        return frozenset(self._rowid_of)

    def _matches(self, query: SearchQuery) -> tuple[np.ndarray, np.ndarray]:
        """Every matching rowid and its BM25 score (higher is better)."""
        weights = ", ".join(map(str, FIELD_WEIGHTS))
        with self._connection() as db:
            try:
                rows = db.execute(f"select rowid, bm25(fts, {weights}) from fts where fts match ?",
                                  (_to_fts5(query),)).fetchall()
            except sqlite3.OperationalError as e:  # never for a query parse_query made
                raise SearchQueryError(f"the query cannot be searched: {e}") from e
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        found = np.asarray(rows, dtype=np.float64)
        return found[:, 0].astype(np.int64), -found[:, 1]

    def search(self, query: SearchQuery, *, edition: str | None = None, section: str | None = None,
               since: str | None = None, limit: int = 20, offset: int = 0, facets: bool = True,
               only: Iterable[str] | None = None) -> SearchResult:
        """Stories matching ``query``, best first (BM25, then the most recently updated, then id).

        Args:
            edition: Only stories of this edition (those its pages list, and for a story no page
                lists, the editions of its language).
            section: Only stories in this section. Facets are counted without it, so a reader sees
                what the other sections hold.
            since: Only stories updated at or after this ISO instant (``YYYY-MM-DDTHH:MM:SSZ``).
            only: Only these story ids (the live stream's new stories).
        """
        rowids, scores = self._matches(query)
        keep = np.ones(len(rowids), dtype=bool)
        if edition is not None:
            keep &= self._editions.mask(edition, self.n)[rowids]
        if since is not None:
            keep &= self._updated[rowids] >= since
        if only is not None:
            wanted = np.zeros(self.n + 1, dtype=bool)
            wanted[[self._rowid_of[s] for s in only if s in self._rowid_of]] = True
            keep &= wanted[rowids]
        rowids, scores = rowids[keep], scores[keep]
        found: dict[str, tuple[FacetValue, ...]] = {}
        if facets:
            found["section"] = tuple(FacetValue(v, c) for v, c in self._sections.count(rowids))
        if section is not None:
            in_section = self._sections.mask(section, self.n)[rowids]
            rowids, scores = rowids[in_section], scores[in_section]
        if facets:
            found["publisher"] = tuple(FacetValue(v, c, self._publisher_names.get(v))
                                       for v, c in self._publishers.count(rowids))
            found["language"] = tuple(FacetValue(v, c) for v, c in self._languages.count(rowids))
        total = len(rowids)
        page: list[int] = []
        if total and offset < total:
            wanted_n = min(total, offset + limit)
            # Best first: score, then the most recently updated, then story id (a stable order).
            if total > 4 * wanted_n:
                cut = np.partition(scores, total - wanted_n)[total - wanted_n]
                near = scores >= cut
                rowids, scores = rowids[near], scores[near]
            candidates = [(round(float(s), 9), str(self._updated[r]), self._story_ids[r], r)
                          for r, s in zip(rowids.tolist(), scores.tolist(), strict=True)]
            candidates.sort(key=lambda c: c[2])  # stable sorts, last key first
            candidates.sort(key=lambda c: c[1], reverse=True)
            candidates.sort(key=lambda c: c[0], reverse=True)
            page = [c[3] for c in candidates[offset:offset + limit]]
        hits: list[SearchHit] = []
        if page:
            with self._connection() as db:
                cards = dict(db.execute(f"select rowid, card || char(0) || has_coverage from docs "
                                        f"where rowid in ({','.join(map(str, page))})").fetchall())
            score_of = dict(zip(rowids.tolist(), scores.tolist(), strict=True))
            for r in page:
                card, _, covered = cards[r].rpartition("\x00")
                hits.append(SearchHit(self._story_ids[r], round(score_of[r], 6), json.loads(card)))
        return SearchResult(total, tuple(hits), found)

    def close(self) -> None:
        while True:
            try:
                self._pool.get_nowait().close()
            except Empty:
                return


# -- documents -------------------------------------------------------------------------------


def corpus_stories(name: str) -> list[SearchDocument]:
    """Each gold event of a dev corpus as one story: its first article's headline, the rest as other headlines."""
    events: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with open(corpus_dir() / f"{name}.jsonl", encoding="utf-8") as f:
        for line in f:
            article = json.loads(line)
            events[str(article["event"])].append(article)
    docs = []
    for i, (event, articles) in enumerate(sorted(events.items())):
        first = articles[0]
        language = str(first.get("language") or "en")
        docs.append(SearchDocument(
            story_id=f"{name}-{i:05d}", language=language, updated_at="2026-01-01T00:00:00Z",
            title=str(first["title"]), headlines=tuple(str(a["title"]) for a in articles[1:]),
            snippet=str(first.get("text") or "")[:200], publishers=((f"pub-{i % 17}", f"Publisher {i % 17}"),),
            sections=(SECTIONS[i % len(SECTIONS)],), editions=(f"{language}-SG",),
            card={"story_id": f"{name}-{i:05d}", "title": first["title"], "event": event}))
    return docs


def synthetic_stories(n: int, seed: int) -> list[SearchDocument]:
    """``n`` stories recombined from every corpus's headlines and snippets (seeded)."""
    pool = [d for name in CORPORA for d in corpus_stories(name)]
    headlines = [h for d in pool for h in (d.title, *d.headlines)]
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        base = pool[rng.randrange(len(pool))]
        extra = tuple(rng.choice(headlines) for _ in range(rng.randint(1, 5)))
        docs.append(SearchDocument(
            story_id=f"syn-{i:07d}", language=base.language, updated_at=f"2026-01-01T{i % 24:02d}:00:00Z",
            title=rng.choice(headlines), headlines=extra, snippet=base.snippet,
            publishers=tuple((f"pub-{j}", f"Publisher {j}") for j in rng.sample(range(2000), rng.randint(1, 4))),
            sections=(SECTIONS[i % len(SECTIONS)],), editions=(f"{base.language}-{('US', 'GB', 'SG')[i % 3]}",),
            card={"story_id": f"syn-{i:07d}", "title": base.title, "snippet": base.snippet}))
    return docs


def headline_query(title: str, words: int | None = None) -> SearchQuery | None:
    """The headline's words (the first ``words`` of them) as a query, cut to what a query may hold."""
    # The headline's words, not its punctuation read as syntax: no quotes, no leading '-', no OR.
    tokens = [w.lstrip("-") for w in title.replace('"', " ").split() if w.lstrip("-") and w != "OR"]
    if words is not None:
        tokens = tokens[:words]
    text = ""
    for w in tokens:
        candidate = f"{text} {w}".strip()
        if len(candidate) > 200:
            break
        text = candidate
    try:
        query = parse_query(text)
    except SearchQueryError:
        return None
    while sum(len(g) for g in query.groups) > 32:
        query = SearchQuery(query.groups[:32])
    return query


# -- measuring -------------------------------------------------------------------------------


def quality(engine: Engine, docs: Sequence[SearchDocument], words: int | None) -> dict[str, Any]:
    search = engine.load(engine.build(docs))
    ranks: list[int | None] = []
    for d in docs:
        query = headline_query(d.title, words)
        if query is None:
            continue
        found = search(query, None)
        ranks.append(found.index(d.story_id) + 1 if d.story_id in found else None)
    n = len(ranks)
    return {"stories": len(docs), "queries": n, "top3": sum(1 for r in ranks if r is not None and r <= 3),
            "mrr": round(sum(1 / r for r in ranks if r) / n, 4) if n else None,
            "misses": sum(1 for r in ranks if r is None)}


def scale(engine: Engine, docs: Sequence[SearchDocument], queries: int, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    data = engine.build(docs)
    built = time.perf_counter() - started
    started = time.perf_counter()
    search = engine.load(data)
    loaded = time.perf_counter() - started
    rng = random.Random(seed)
    asked = [q for q in (headline_query(rng.choice(docs).title, rng.randint(2, 4)) for _ in range(queries)) if q]
    editions = sorted({e for d in docs for e in d.editions})
    times: list[float] = []
    for i, query in enumerate(asked):
        edition = editions[i % len(editions)] if i % 2 else None
        started = time.perf_counter()
        search(query, edition)
        times.append(time.perf_counter() - started)
    return {"stories": len(docs), "build_s": round(built, 3), "bytes": len(data), "load_s": round(loaded, 3),
            "queries": len(times), "p50_ms": round(percentile(times, 0.5) * 1e3, 3),
            "p99_ms": round(percentile(times, 0.99) * 1e3, 3), "mean_ms": round(statistics.fmean(times) * 1e3, 3)}


def score_store(root: Path) -> dict[str, Any]:
    """Own-headline retrieval over the live index of a store, per language of the story."""
    import tantivy

    from warehouse.search_versions import read_search_pointer
    from warehouse.store import LocalStore

    store = LocalStore(root)
    found = read_search_pointer(store)
    if found is None:
        raise SystemExit(f"no search index published in {root}")
    index = SearchIndex.from_bytes(store.get(found[0].key).data)
    searcher = index._searcher
    every = searcher.search(tantivy.Query.all_query(), limit=max(1, index.documents), count=False)
    cards = [json.loads(bytes(searcher.doc(a)["card"][0])) for _, a in every.hits]
    ranks: dict[str, list[int | None]] = defaultdict(list)
    for card in cards:
        query = headline_query(str(card.get("title") or ""))
        if query is None:
            continue
        hits = [h.story_id for h in index.search(query, limit=20, facets=False).hits]
        ranks[str(card.get("language"))].append(hits.index(card["story_id"]) + 1 if card["story_id"] in hits else None)
    out: dict[str, Any] = {"index_version": found[0].version, "stories": len(cards)}
    for language, rs in sorted(ranks.items()):
        out[language] = {"queries": len(rs), "top3": sum(1 for r in rs if r is not None and r <= 3),
                         "mrr": round(sum(1 / r for r in rs if r) / len(rs), 4)}
    index.close()
    return out


def engines(names: Iterable[str]) -> list[Engine]:
    out: list[Engine] = []
    for name in names:
        out.append(Fts5() if name == "fts5" else Tantivy())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", default="tantivy,fts5", help="comma-separated: tantivy, fts5")
    parser.add_argument("--stories", default="10000,50000", help="comma-separated synthetic sizes")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    parser.add_argument("--store", type=Path, default=None, help="score the live index of this local store instead")
    args = parser.parse_args(argv)
    if args.store is not None:
        print(json.dumps(score_store(args.store), indent=1))
        return 0
    chosen = engines(n.strip() for n in args.engines.split(",") if n.strip())
    report: dict[str, Any] = {"machine": machine_line(),
                              "quality": {}, "scale": {}}
    for name in CORPORA:
        docs = corpus_stories(name)
        for engine in chosen:
            for label, words in (("headline", None), ("first 3 words", 3)):
                found = quality(engine, docs, words)
                report["quality"].setdefault(name, {}).setdefault(engine.name, {})[label] = found
                if not args.json:
                    print(f"quality {name:14s} {engine.name:12s} {label:14s} top3 {found['top3']}/{found['queries']} "
                          f"MRR {found['mrr']} misses {found['misses']}", flush=True)
    for n in (int(s) for s in args.stories.split(",") if s.strip()):
        docs = synthetic_stories(n, args.seed)
        for engine in chosen:
            found = scale(engine, docs, args.queries, args.seed)
            report["scale"].setdefault(str(n), {})[engine.name] = found
            if not args.json:
                print(f"scale {n:>7d} {engine.name:12s} build {found['build_s']} s, {found['bytes']:,} bytes, "
                      f"load {found['load_s']} s, query p50 {found['p50_ms']} ms p99 {found['p99_ms']} ms",
                      flush=True)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(report["machine"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
