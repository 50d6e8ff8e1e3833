"""The writer's state as a base and per-run deltas (tasks/writer/state.py, issue 15): a chain folds
to exactly the state that wrote it, and a writer rebuilt from it decides as the one that never
stopped."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from tasks.writer.state import columns_of
from transforms.clustering import ClusterParams, LanguageClusterer, repair_stories
from transforms.clustering.columns import clusterer_from_columns, mark_committed, state_changes, state_columns
from transforms.features import ArticleFeatures
from transforms.signatures import SIGNATURE_VERSION, minhash_from_hashes
from warehouse.state_blobs import (
    STATE_TABLE_SCHEMAS,
    StateObject,
    columns_to_table,
    decode_state_object,
    encode_state_object,
    fold_states,
)

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _stream(n: int, hours: float, seed: int) -> list[ArticleFeatures]:
    """Articles over ``hours``: follow-ups of a few hundred topics, verbatim copies, new versions."""
    rng = np.random.default_rng(seed)
    topics = [rng.choice(3_000, size=25, replace=False) for _ in range(n // 6)]
    out: list[ArticleFeatures] = []
    shingles: list[np.ndarray] = []
    for i in range(n):
        when = T0 + timedelta(hours=hours * i / n)
        r = rng.random()
        if r < 0.1 and out:  # a copy (or, every other time, a new version of an earlier article)
            j = int(rng.integers(max(0, len(out) - 40), len(out)))
            source = out[j]
            aid = f"a{i:05d}" if r < 0.05 else source.article_id
            out.append(ArticleFeatures(aid, "en", when, f"p{i % 40}", "", 0, source.minhash, source.terms,
                                       source.term_weights, source.entities, None, SIGNATURE_VERSION))
            shingles.append(shingles[j])
            continue
        topic = topics[int(rng.integers(len(topics)))] if rng.random() < 0.7 else rng.choice(3_000, 25)
        words = rng.choice(topic, size=12, replace=False)
        weights = rng.random(12) + 0.1
        weights /= np.linalg.norm(weights)
        # One in ten is headline-only (no body to sign); most carry a sentence embedding (issue 14),
        # near their topic's direction, so the members' embedding codes travel through the state too.
        hashes = rng.integers(0, 2**63, 0 if rng.random() < 0.1 else 200, dtype=np.uint64)
        shingles.append(hashes)
        embedding = None
        if rng.random() < 0.85:
            vector = np.random.default_rng(int(topic[0])).normal(size=512) + 0.3 * rng.normal(size=512)
            embedding = tuple(float(x) for x in vector / np.linalg.norm(vector))
        out.append(ArticleFeatures(
            f"a{i:05d}", "en", when, f"p{i % 40}", "", 0, tuple(int(v) for v in minhash_from_hashes(hashes)),
            tuple(f"w{w}" for w in words), tuple(float(w) for w in weights),
            tuple(f"n{w % 50}" for w in words[:3]), embedding, SIGNATURE_VERSION))
    return out


def _object(columns: object, kind: str, seen: list[tuple[str, str]]) -> StateObject:
    """Encode and decode, as the store would hold it."""
    tables = {name: columns_to_table(name, getattr(columns, name)) for name in ("stories", "members", "norms",
                                                                                "recent", "df")}
    tables["dropped_stories"] = columns_to_table("dropped_stories", {"story_id": columns.dropped_stories})
    tables["dropped_recent"] = columns_to_table("dropped_recent", {"article_id": columns.dropped_recent})
    tables["seen"] = columns_to_table("seen", {"article_id": [a for a, _ in seen], "content_hash": [h for _, h in seen]})
    header = {**columns.meta, "kind": kind, "offset": 0, "consumed": [], "updated_at": None}
    return decode_state_object(encode_state_object(header, tables))


def _semantic(clusterer: LanguageClusterer) -> dict[str, object]:
    """The state, order-free where order means nothing (recent articles, IDF counts)."""
    state = json.loads(json.dumps(clusterer.to_state()))
    state["recent"] = sorted(state["recent"])
    state["df"] = sorted(state["df"])
    return state


@pytest.mark.parametrize("every", [1, 7, 40], ids=["delta-each-article", "delta-every-7", "delta-every-40"])
def test_a_chain_of_deltas_folds_to_the_state_that_wrote_it(every: int) -> None:
    # 80 hours: stories expire and long ones are trimmed past the 48-hour window; a 24-hour IDF
    # half-life folds its scale in (a delta that restates every count); repairs merge and split.
    params = ClusterParams(idf_half_life_hours=24.0)
    stream = _stream(900, hours=80.0, seed=5)
    live = LanguageClusterer("en", params)
    base = _object(state_columns(live), "base", [])
    mark_committed(live)
    deltas: list[StateObject] = []
    seen: list[tuple[str, str]] = []
    for i, features in enumerate(stream[:800], start=1):
        live.assign(features)
        seen.append((features.article_id, f"h{i}"))
        if i % 100 == 0:
            repair_stories(live, features.first_seen_at)
        if i % every == 0 or i == 800:
            deltas.append(_object(state_changes(live), "delta", seen))
            seen = []
            mark_committed(live)
    assert any(story.trimmed for story in live.stories.values()) or live.online_idf.scale != 1.0
    folded = fold_states(base, deltas, seen_kept=10_000)
    columns, kept_seen = columns_of(folded)
    rebuilt = clusterer_from_columns(columns, LanguageClusterer)
    assert _semantic(rebuilt) == _semantic(live)
    # The embedding sums are derived from the members kept, live (trims included) and loaded alike.
    assert any(story.embedded for story in live.stories.values())
    for sid, story in live.stories.items():
        assert rebuilt.stories[sid].embedded == story.embedded
        assert np.array_equal(rebuilt.stories[sid].embedding_sum, story.embedding_sum)  # type: ignore[arg-type]
    assert any(not m.has_body for story in rebuilt.stories.values() for m in story.members)
    # Each article once, most recently read last (a new version moves it to the end).
    assert [a for a, _ in kept_seen] == list(dict.fromkeys(f.article_id for f in reversed(stream[:800])))[::-1]
    # Folded again onto itself (a compaction of a compaction) it is the same state.
    assert fold_states(folded, [], 10_000) is folded
    tail = stream[800:]
    assert [rebuilt.assign(f) for f in tail] == [live.assign(f) for f in tail]


def test_a_delta_holds_only_what_changed() -> None:
    stream = _stream(400, hours=2.0, seed=9)
    clusterer = LanguageClusterer("en")
    for features in stream[:399]:
        clusterer.assign(features)
    mark_committed(clusterer)
    clusterer.assign(stream[399])
    delta = state_changes(clusterer)
    counts = delta.counts()
    assert counts["stories"] == 1 and counts["recent"] == 1 and counts["members"] <= 1
    assert counts["df"] <= len(stream[399].terms) + len(stream[399].entities)
    assert counts["dropped_stories"] == counts["dropped_recent"] == 0


def test_every_state_table_round_trips_through_its_schema() -> None:
    clusterer = LanguageClusterer("en")
    for features in _stream(120, hours=1.0, seed=2):
        clusterer.assign(features)
    obj = _object(state_columns(clusterer), "base", [("a", "h")])
    assert set(obj.tables) == set(STATE_TABLE_SCHEMAS)
    columns, seen = columns_of(obj)
    assert _semantic(clusterer_from_columns(columns, LanguageClusterer)) == _semantic(clusterer)
    assert seen == [("a", "h")]
