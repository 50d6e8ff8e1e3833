"""The writer's state as flat columns: a whole state (a base), or only what changed since the last
commit (a delta), so a run stores what it changed and not everything it holds (issue 15).

A :class:`StateColumns` holds one table per kind of record, each a mapping of column name to a
list or numpy array; a list-valued column ``x`` is flat, with the length of each row's list in
``x_len``, so the store's side (``warehouse.state_blobs``) turns it into Arrow list arrays, and
back, without a Python object per value. The tables:

``stories``   one row per story stored (a delta: per story created or changed), with its centroid,
              entity counts and years as lists, its cached norms, and ``member_rows``: how many
              rows of ``members`` follow for it, in story order. ``members_replaced`` says whether
              those rows are all its members or the ones appended since the last commit.
``members``   the member rows, grouped by story in the order of ``stories``.
``norms``     stories whose cached norms alone changed (the scoring refreshes them as the IDF moves).
``recent``    the recent articles' copy signatures (an ``(n, 128)`` uint32 matrix).
``df``        the IDF's counts (a delta: the terms counted; all of them when ``meta["df_replaced"]``).
``dropped_stories``, ``dropped_recent``   ids that left (expired, merged away, forgotten).

``meta`` holds the scalars: language, parameters, clocks, the IDF's document count and scale.

What changed is found by comparing each story with what the last commit stored (:class:`Journal`:
the very objects it held, so a story whose centroid, members or counters were replaced or
extended is seen whichever code path changed it), and, for the IDF and the copy index, from the
changes they record themselves. A delta appends a story's new members when its member list only
grew since the commit, and restates them all otherwise (a merge, split, trim or new version).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import accumulate
from operator import is_
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

import numpy as np
import numpy.typing as npt

from transforms.clustering.state import drop_embeddings, params_from_state, stored_embedding_model
from transforms.clustering.story import Journal, Member, Story, count_embeddings
from transforms.signatures import NUM_PERM, SIGNATURE_VERSION

if TYPE_CHECKING:
    from transforms.clustering.clusterer import LanguageClusterer

COLUMNS_VERSION = 5
C = TypeVar("C", bound="LanguageClusterer")
Column = list[Any] | npt.NDArray[Any]
"""One column's values: a list, or a numpy array (numbers read back from a table)."""
Columns = dict[str, Column]
"""A table as its columns, by name."""


class StateMeta(TypedDict, total=False):
    """What a state's columns record besides their tables (stored in the state object's header)."""

    version: int
    signature_version: str
    embedding_model: str | None
    language: str
    params: dict[str, object]
    """The cluster parameters (``ClusterParams`` as a JSON object)."""
    clock_ms: int | None
    decayed_ms: int | None
    n_docs: float
    df_scale: float
    df_replaced: bool


@dataclass(slots=True)
class StateColumns:
    """A writer state, or a delta of one, as flat columns (see the module doc)."""

    meta: StateMeta
    stories: Columns = field(default_factory=dict)
    members: Columns = field(default_factory=dict)
    norms: Columns = field(default_factory=dict)
    recent: Columns = field(default_factory=dict)
    df: Columns = field(default_factory=dict)
    dropped_stories: list[str] = field(default_factory=list)
    dropped_recent: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Rows per table (for logs and run summaries)."""
        return {"stories": len(self.stories.get("story_id", ())), "members": len(self.members.get("article_id", ())),
                "norms": len(self.norms.get("story_id", ())), "recent": len(self.recent.get("article_id", ())),
                "df": len(self.df.get("term", ())), "dropped_stories": len(self.dropped_stories),
                "dropped_recent": len(self.dropped_recent)}


def _fingerprint(story: Story) -> tuple[object, ...]:
    """What a commit stored of a story, by the objects themselves (compared with ``==``, which
    is identity first): a replaced centroid, member, year list or counter shows."""
    return (story.centroid, tuple(story.members), story.years, len(story.entities), story.first_article_id,
            story.first_seen_ms, story.last_seen_ms, story.size, story.trimmed, story.repaired_ms)


def mark_committed(clusterer: LanguageClusterer) -> None:
    """Record the clusterer as stored: the next :func:`state_changes` is relative to this point."""
    clusterer.journal = Journal({sid: (_fingerprint(s), s.norms) for sid, s in clusterer.stories.items()})
    clusterer.online_idf.forget_changes()
    clusterer.copies.forget_changes()


def state_meta(header: Mapping[str, Any]) -> StateMeta:
    """The meta a stored state's header holds: what :func:`clusterer_from_columns` reads (a state
    object's model id is not among them, as it never was).

    Raises:
        KeyError: If the header lacks one of them.
    """
    return {"version": header["version"], "signature_version": header["signature_version"],
            "language": header["language"], "params": header["params"], "clock_ms": header["clock_ms"],
            "decayed_ms": header["decayed_ms"], "n_docs": header["n_docs"], "df_scale": header["df_scale"],
            "df_replaced": header["df_replaced"]}


def _meta(clusterer: LanguageClusterer, df_replaced: bool) -> StateMeta:
    idf = clusterer.online_idf
    return {"version": COLUMNS_VERSION, "signature_version": SIGNATURE_VERSION,
            "embedding_model": clusterer.embedding_model, "language": clusterer.language,
            "params": asdict(clusterer.params), "clock_ms": clusterer.clock_ms, "decayed_ms": clusterer.decayed_ms,
            "n_docs": idf.n_docs, "df_scale": idf.scale, "df_replaced": df_replaced}


def _lengths(rows: Sequence[Sequence[object]]) -> npt.NDArray[np.int64]:
    return np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))


def _flat(rows: Sequence[Sequence[Any]]) -> list[Any]:
    return [value for row in rows for value in row]


def _story_columns(entries: Sequence[tuple[Story, bool, Sequence[Member]]]) -> tuple[Columns, Columns]:
    stories = [story for story, _, _ in entries]
    centroids = [list(s.centroid.items()) for s in stories]
    entities = [list(s.entities.items()) for s in stories]
    norms = [s.norms for s in stories]
    member_lists = [members for _, _, members in entries]
    story_columns: Columns = {
        "story_id": [s.story_id for s in stories],
        "first_article_id": [s.first_article_id for s in stories],
        "first_seen_ms": np.array([s.first_seen_ms for s in stories], dtype=np.int64),
        "last_seen_ms": np.array([s.last_seen_ms for s in stories], dtype=np.int64),
        "size": np.array([s.size for s in stories], dtype=np.int64),
        "trimmed": np.array([s.trimmed for s in stories], dtype=np.int64),
        "repaired_ms": [s.repaired_ms for s in stories],
        "norm_centroid": [None if n is None else n[0] for n in norms],
        "norm_entities": [None if n is None else n[1] for n in norms],
        "norm_docs": [None if n is None else n[2] for n in norms],
        "members_replaced": np.array([replaced for _, replaced, _ in entries], dtype=bool),
        "member_rows": _lengths(member_lists),
        "years": _flat([s.years for s in stories]), "years_len": _lengths([s.years for s in stories]),
        "centroid_terms": [t for c in centroids for t, _ in c],
        "centroid_weights": np.array([w for c in centroids for _, w in c], dtype=np.float64),
        "centroid_terms_len": _lengths(centroids),
        "entity_words": [e for c in entities for e, _ in c],
        "entity_counts": np.array([n for c in entities for _, n in c], dtype=np.float64),
        "entity_words_len": _lengths(entities),
    }
    members = [(s.story_id, m) for s, ms in zip(stories, member_lists, strict=True) for m in ms]
    member_columns: Columns = {
        "story_id": [sid for sid, _ in members],
        "article_id": [m.article_id for _, m in members],
        "seen_ms": np.array([m.seen_ms for _, m in members], dtype=np.int64),
        "publisher_id": [m.publisher_id for _, m in members],
        "copy_of": [m.copy_of for _, m in members],
        "terms": _flat([m.terms for _, m in members]), "terms_len": _lengths([m.terms for _, m in members]),
        "weights": np.array(_flat([m.weights for _, m in members]), dtype=np.float64),
        "entities": _flat([m.entities for _, m in members]),
        "entities_len": _lengths([m.entities for _, m in members]),
        "has_body": np.array([m.has_body for _, m in members], dtype=bool),
        "embedding": [m.embedding for _, m in members],
    }
    return story_columns, member_columns


def _norm_columns(stories: Sequence[Story]) -> Columns:
    norms = [s.norms for s in stories]
    return {"story_id": [s.story_id for s in stories],
            "norm_centroid": [None if n is None else n[0] for n in norms],
            "norm_entities": [None if n is None else n[1] for n in norms],
            "norm_docs": [None if n is None else n[2] for n in norms]}


def _recent_columns(clusterer: LanguageClusterer, ids: Sequence[str] | None) -> Columns:
    columns = clusterer.copies.columns(ids)
    minhash = np.asarray(columns["minhash"], dtype=np.uint32).reshape(-1, NUM_PERM)
    return {**columns, "minhash": minhash}


def _df_columns(df: dict[str, float], terms: Sequence[str] | None) -> Columns:
    keys = list(df) if terms is None else [t for t in terms if t in df]
    return {"term": keys, "count": np.array([df[t] for t in keys], dtype=np.float64)}


def state_columns(clusterer: LanguageClusterer) -> StateColumns:
    """The whole state as columns (a base)."""
    stories, members = _story_columns([(s, True, s.members) for s in clusterer.stories.values()])
    return StateColumns(_meta(clusterer, df_replaced=True), stories, members, _norm_columns([]),
                        _recent_columns(clusterer, None), _df_columns(clusterer.online_idf.df, None))


def state_changes(clusterer: LanguageClusterer) -> StateColumns:
    """What changed since :func:`mark_committed` (a delta); the whole state if never marked.

    Stories are listed in the clusterer's order (new ones last, as they were added), so folding
    the delta onto its base keeps that order.
    """
    journal = clusterer.journal
    if journal is None:
        return state_columns(clusterer)
    committed = journal.stories
    entries: list[tuple[Story, bool, Sequence[Member]]] = []
    norms_only: list[Story] = []
    for sid, story in clusterer.stories.items():
        before = committed.get(sid)
        if before is None:
            entries.append((story, True, story.members))
            continue
        fingerprint, norms = before
        # The centroid by identity: one rebuilt with the same weights in another order is a change
        # (its norms are summed in that order); the rest by value, identity first.
        if story.centroid is not fingerprint[0] or _fingerprint(story)[1:] != fingerprint[1:]:
            old_members: tuple[Member, ...] = fingerprint[1]  # type: ignore[assignment]
            members = story.members
            if len(members) >= len(old_members) and all(map(is_, old_members, members)):
                entries.append((story, False, members[len(old_members):]))
            else:
                entries.append((story, True, members))
        elif story.norms != norms:
            norms_only.append(story)
    stories, members = _story_columns(entries)
    idf, copies = clusterer.online_idf, clusterer.copies
    changed_recent = sorted(a for a in copies.changed if a in copies.recent)
    return StateColumns(
        _meta(clusterer, df_replaced=idf.rescaled), stories, members, _norm_columns(norms_only),
        _recent_columns(clusterer, changed_recent),
        _df_columns(idf.df, None if idf.rescaled else sorted(idf.changed)),
        dropped_stories=sorted(sid for sid in committed if sid not in clusterer.stories),
        dropped_recent=sorted(copies.removed),
    )


def _offsets(lengths: npt.NDArray[np.int64] | Sequence[int]) -> list[int]:
    return [0, *accumulate(int(n) for n in lengths)]


def clusterer_from_columns(columns: StateColumns, cls: type[C]) -> C:
    """Build a clusterer of class ``cls`` from a whole state's columns (a base, or a base with its
    deltas folded in by ``warehouse.state_blobs.fold_states``), indexes included, marked as committed.

    Raises:
        ValueError: If the columns were written by another format or signature version.
    """
    meta = columns.meta
    if meta.get("version") != COLUMNS_VERSION:
        raise ValueError(f"state columns version {meta.get('version')!r} is not {COLUMNS_VERSION}")
    if meta.get("signature_version") != SIGNATURE_VERSION:
        raise ValueError(f"state signature version {meta.get('signature_version')!r} is not {SIGNATURE_VERSION!r}")
    out = cls(str(meta["language"]), params_from_state(meta["params"]))
    out.clock_ms = None if meta["clock_ms"] is None else int(meta["clock_ms"])
    out.decayed_ms = None if meta["decayed_ms"] is None else int(meta["decayed_ms"])
    out.online_idf.n_docs = float(meta["n_docs"])
    out.online_idf.scale = float(meta["df_scale"])
    out.online_idf.df = dict(zip(columns.df["term"], np.asarray(columns.df["count"], dtype=np.float64).tolist(),
                                 strict=True))
    _build_stories(out, columns.stories, columns.members)
    out.term_index.add_all([(sid, story.centroid) for sid, story in out.stories.items()])
    recent = columns.recent
    if len(recent["article_id"]):
        rows = list(zip(recent["article_id"], recent["story_id"], recent["root_id"],
                        np.asarray(recent["seen_ms"]).tolist(), strict=True))
        out.copies.add_all(rows, np.asarray(recent["minhash"], dtype=np.uint32))
    mark_committed(out)
    if stored_embedding_model(meta) != out.embedding_model:
        # Another model's vectors are never compared (issue 33): forgotten, and the next commit
        # restates everything as a base, so no stored chain holds them under this model's name.
        drop_embeddings(out.stories)
        out.journal = None
    return out


def _build_stories(out: LanguageClusterer, st: Columns, mb: Columns) -> None:
    def floats(values: Any) -> list[float]:
        return np.asarray(values, dtype=np.float64).tolist()  # type: ignore[no-any-return]

    def ints(values: Any) -> list[int]:
        return np.asarray(values, dtype=np.int64).tolist()  # type: ignore[no-any-return]

    years, years_at = st["years"], _offsets(st["years_len"])
    terms, weights, centroid_at = st["centroid_terms"], floats(st["centroid_weights"]), _offsets(st["centroid_terms_len"])
    words, counts, entity_at = st["entity_words"], floats(st["entity_counts"]), _offsets(st["entity_words_len"])
    member_at = _offsets(st["member_rows"])
    # A loaded member's weights are an array of doubles: 320 bytes for 40 where a tuple of floats
    # takes 1,300 (750,000 members at 300,000 stories; issue 15). Read only by iteration.
    m_terms, m_terms_at = mb["terms"], _offsets(mb["terms_len"])
    m_weights = np.ascontiguousarray(np.asarray(mb["weights"], dtype="<f8")).tobytes()
    m_entities, m_entities_at = mb["entities"], _offsets(mb["entities_len"])
    m_ids, m_seen, m_publishers, m_copies = mb["article_id"], ints(mb["seen_ms"]), mb["publisher_id"], mb["copy_of"]
    m_bodies = np.asarray(mb["has_body"], dtype=bool).tolist()
    m_embeddings = list(mb["embedding"])
    members: list[Member] = [
        Member(m_ids[i], m_seen[i], m_publishers[i], m_copies[i],
               tuple(m_terms[m_terms_at[i]:m_terms_at[i + 1]]), array("d", m_weights[8 * m_terms_at[i]:8 * m_terms_at[i + 1]]),
               tuple(m_entities[m_entities_at[i]:m_entities_at[i + 1]]), m_bodies[i], m_embeddings[i])
        for i in range(len(m_ids))
    ]
    first_ms, last_ms, sizes, trimmed = (ints(st[c]) for c in ("first_seen_ms", "last_seen_ms", "size", "trimmed"))
    norm_c, norm_e, norm_n = st["norm_centroid"], st["norm_entities"], st["norm_docs"]
    stories, story_of_member = out.stories, out.story_of_member
    for i, sid in enumerate(st["story_id"]):
        story_members = members[member_at[i]:member_at[i + 1]]
        repaired = st["repaired_ms"][i]
        story = Story(
            story_id=sid, first_article_id=st["first_article_id"][i], first_seen_ms=first_ms[i],
            last_seen_ms=last_ms[i], size=sizes[i],
            centroid=dict(zip(terms[centroid_at[i]:centroid_at[i + 1]], weights[centroid_at[i]:centroid_at[i + 1]],
                              strict=True)),
            entities=dict(zip(words[entity_at[i]:entity_at[i + 1]], counts[entity_at[i]:entity_at[i + 1]], strict=True)),
            years=list(years[years_at[i]:years_at[i + 1]]), members=story_members,
            repaired_ms=None if repaired is None else int(repaired),
            norms=None if norm_c[i] is None else (float(norm_c[i]), float(norm_e[i]), float(norm_n[i])),
            trimmed=trimmed[i],
        )
        count_embeddings(story)  # derived from the members, never stored
        stories[sid] = story
        for member in story_members:
            story_of_member[member.article_id] = sid
