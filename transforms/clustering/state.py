"""The clusterer's checkpoint codec: one JSON-serialisable mapping per language writer.

Everything a writer needs to resume exactly is here, in one place: the parameters, the clocks,
the online IDF, the stories with their members and cached norms, and the recent articles'
signatures. The indexes (postings, LSH buckets, the member map) are derived and rebuilt on
load, in bulk. A new state format replaces this module; :data:`READABLE_STATE_VERSIONS` says
which older checkpoints still load.

Floats round-trip exactly through JSON, so a resumed writer makes the same decisions as an
uninterrupted one.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields, replace
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from transforms.clustering.params import ClusterParams
from transforms.clustering.parts import ClustererParts
from transforms.clustering.story import Member, Story, count_embeddings
from transforms.embedding import LEGACY_EMBEDDING_MODEL_ID
from transforms.signatures import SIGNATURE_VERSION

STATE_VERSION = 4
READABLE_STATE_VERSIONS = (2, 3, 4)
"""Version 4 adds to each member whether it has a body and its embedding codes (base64); version 3
stores MinHash signatures as base64, version 2 as lists of ints. Both still load: their members
have a body and no embedding (issue 14)."""

C = TypeVar("C", bound=ClustererParts)


def encode_minhash(minhash: npt.NDArray[np.uint32]) -> str:
    """A signature in a checkpoint: base64 of little-endian uint32 (a tenth of the JSON ints' parse time).

    >>> encode_minhash(np.array([1, 2], dtype=np.uint32))
    'AQAAAAIAAAA='
    """
    return base64.b64encode(np.asarray(minhash, dtype="<u4").tobytes()).decode("ascii")


def decode_minhash(raw: object) -> npt.NDArray[np.uint32]:
    """A signature from a checkpoint: base64 (version 3) or a list of ints (version 2).

    >>> decode_minhash("AQAAAAIAAAA=").tolist(), decode_minhash([1, 2]).tolist()
    ([1, 2], [1, 2])
    """
    if isinstance(raw, str):
        return np.frombuffer(base64.b64decode(raw), dtype="<u4").astype(np.uint32)
    return np.asarray(raw, dtype=np.uint32)  # a version 2 checkpoint: a list of ints


def member_to_json(member: Member) -> list[object]:
    """``[article_id, seen_ms, publisher_id, copy_of, terms, weights, entities, has_body, embedding]``,
    the embedding codes as base64 (or None)."""
    embedding = None if member.embedding is None else base64.b64encode(member.embedding).decode("ascii")
    return [member.article_id, member.seen_ms, member.publisher_id, member.copy_of, list(member.terms),
            list(member.weights), list(member.entities), member.has_body, embedding]


def member_from_json(raw: Sequence[object]) -> Member:
    """The inverse of :func:`member_to_json`; a member of a version 2 or 3 state (seven fields)
    has a body and no embedding."""
    aid, seen, publisher, copy_of, terms, weights, entities = raw[:7]
    body, embedding = (raw[7], raw[8]) if len(raw) > 7 else (True, None)
    return Member(
        article_id=str(aid),
        seen_ms=int(seen),  # type: ignore[call-overload]
        publisher_id=None if publisher is None else str(publisher),
        copy_of=None if copy_of is None else str(copy_of),
        terms=tuple(map(str, terms)),  # type: ignore[call-overload]
        weights=tuple(map(float, weights)),  # type: ignore[call-overload]
        entities=tuple(map(str, entities)),  # type: ignore[call-overload]
        has_body=bool(body),
        embedding=None if embedding is None else base64.b64decode(str(embedding)),
    )


def story_to_json(story: Story) -> list[object]:
    """A story as a positional list (the checkpoint's bulk, so no repeated keys)."""
    return [
        story.story_id,
        story.first_article_id,
        story.first_seen_ms,
        story.last_seen_ms,
        story.size,
        [[t, w] for t, w in story.centroid.items()],
        [[e, c] for e, c in story.entities.items()],
        story.years,
        [member_to_json(m) for m in story.members],
        story.repaired_ms,
        None if story.norms is None else list(story.norms),
        *([story.trimmed] if story.trimmed else []),  # written only when members were trimmed
    ]


def story_from_json(raw: Sequence[object]) -> Story:
    """The inverse of :func:`story_to_json`; a story written before the norm cache has none."""
    sid, first_id, first_ms, last_ms, size, centroid, entities, years, members, repaired = raw[:10]
    norms = raw[10] if len(raw) > 10 else None  # states written before the norm cache lack it
    trimmed = raw[11] if len(raw) > 11 else 0
    story = Story(
        story_id=str(sid),
        first_article_id=str(first_id),
        first_seen_ms=int(first_ms),  # type: ignore[call-overload]
        last_seen_ms=int(last_ms),  # type: ignore[call-overload]
        size=int(size),  # type: ignore[call-overload]
        centroid={str(t): float(w) for t, w in centroid},  # type: ignore[attr-defined]
        entities={str(e): float(c) for e, c in entities},  # type: ignore[attr-defined]
        years=[str(y) for y in years],  # type: ignore[attr-defined]
        members=[member_from_json(m) for m in members],  # type: ignore[attr-defined]
        repaired_ms=None if repaired is None else int(repaired),  # type: ignore[call-overload]
        norms=None if norms is None else (float(norms[0]), float(norms[1]), float(norms[2])),  # type: ignore[index]
        trimmed=int(trimmed),  # type: ignore[call-overload]
    )
    count_embeddings(story)
    return story


def clusterer_to_state(clusterer: ClustererParts) -> dict[str, object]:
    """A JSON-serialisable checkpoint of ``clusterer``; :func:`clusterer_from_state` resumes from it exactly."""
    return {
        "version": STATE_VERSION,
        "signature_version": SIGNATURE_VERSION,
        "embedding_model": clusterer.embedding_model,
        "language": clusterer.language,
        "params": asdict(clusterer.params),
        "clock_ms": clusterer.clock_ms,
        "decayed_ms": clusterer.decayed_ms,
        "n_docs": clusterer.online_idf.n_docs,
        "df": [[t, c] for t, c in clusterer.online_idf.df.items()],
        # The IDF's decay as one scale (issue 15); absent, as in states written before, it is 1.
        **({"df_scale": clusterer.online_idf.scale} if clusterer.online_idf.scale != 1.0 else {}),
        "stories": [story_to_json(s) for s in clusterer.stories.values()],
        "recent": [[r.article_id, r.story_id, r.root_id, r.seen_ms, encode_minhash(r.minhash)]
                   for r in clusterer.copies.recent.values()],
    }


def stored_embedding_model(raw: Mapping[str, object]) -> str:
    """The model of the member embeddings a state holds (a state written before it was stored
    names none: the legacy model's, see :data:`transforms.embedding.LEGACY_EMBEDDING_MODEL_ID`)."""
    return str(raw.get("embedding_model") or LEGACY_EMBEDDING_MODEL_ID)


def drop_embeddings(stories: Mapping[str, Story]) -> int:
    """Forget every member's embedding (they are another model's than the writer compares with);
    returns how many were dropped. The stories' embedding sums are recounted (to none)."""
    dropped = 0
    for story in stories.values():
        if any(m.embedding is not None for m in story.members):
            dropped += sum(m.embedding is not None for m in story.members)
            story.members = [m if m.embedding is None else replace(m, embedding=None) for m in story.members]
            count_embeddings(story)
    return dropped


def params_from_state(raw: Mapping[str, object]) -> ClusterParams:
    """The parameters a checkpoint was written with (keys this version does not know are ignored)."""
    known = {f.name for f in fields(ClusterParams)}
    return ClusterParams(**{k: v for k, v in raw.items() if k in known})  # type: ignore[arg-type]


def clusterer_from_state(state: Mapping[str, object], cls: type[C]) -> C:
    """Rebuild a clusterer of class ``cls`` from :func:`clusterer_to_state` output (indexes are
    rebuilt, not stored).

    Raises:
        ValueError: If the state was written by another state or signature version.
    """
    if state.get("version") not in READABLE_STATE_VERSIONS:
        raise ValueError(f"clusterer state version {state.get('version')!r} is not one of {READABLE_STATE_VERSIONS}")
    if state.get("signature_version") != SIGNATURE_VERSION:
        raise ValueError(f"state signature version {state.get('signature_version')!r} is not {SIGNATURE_VERSION!r}")
    raw_params = state["params"]
    assert isinstance(raw_params, Mapping)
    out = cls(str(state["language"]), params_from_state(raw_params))
    clock = state["clock_ms"]
    decayed = state["decayed_ms"]
    out.clock_ms = None if clock is None else int(clock)  # type: ignore[call-overload]
    out.decayed_ms = None if decayed is None else int(decayed)  # type: ignore[call-overload]
    out.online_idf.n_docs = float(state["n_docs"])  # type: ignore[arg-type]
    out.online_idf.df = {str(t): float(c) for t, c in state["df"]}  # type: ignore[attr-defined]
    out.online_idf.scale = float(state.get("df_scale", 1.0))  # type: ignore[arg-type]
    for raw in state["stories"]:  # type: ignore[attr-defined]
        story = story_from_json(raw)
        out.stories[story.story_id] = story
        for member in story.members:
            out.story_of_member[member.article_id] = story.story_id
    # Norms stay as saved: None ones are computed when first scored.
    out.term_index.add_all([(sid, story.centroid) for sid, story in out.stories.items()])
    rows = list(state["recent"])  # type: ignore[call-overload]
    if rows:
        signatures = np.vstack([decode_minhash(row[4]) for row in rows])
        out.copies.add_all([(str(aid), str(sid), str(root), int(seen)) for aid, sid, root, seen, _ in rows], signatures)
    if stored_embedding_model(state) != out.embedding_model:
        drop_embeddings(out.stories)  # another model's vectors are never compared (issue 33)
    return out
