"""Story ids: 64-bit, time-ordered, deterministic, and never shared by two stories a writer holds
(nor reborn from an id a merge turned into an alias)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

from repair_corpus import _BERN, _MANNHEIM, T0, changes_of, final_story, mannheim, write_articles

from tasks.repair import repair_language
from tasks.writer.checkpoint import open_writer
from tasks.writer.run import cluster_language
from tasks.writer.session import load_writer_state
from transforms.clustering import LanguageClusterer, RepairParams, make_story_id
from transforms.features import ArticleFeatures, features_from_text
from transforms.pages import resolve_aliases
from warehouse.duck import connect, load_sql
from warehouse.store import LocalStore

UNRELATED = ("The central bank raised interest rates by a quarter point on Wednesday, citing stubborn "
             "inflation in housing and services, and signalled that further increases were possible.")


def _f(aid: str, text: str, minutes: float, publisher: str | None = None) -> ArticleFeatures:
    return features_from_text(aid, text.split(". ")[0][:80], text, "en", T0 + timedelta(minutes=minutes),
                              publisher or f"pub-{aid}")


def _old_format_id(when: datetime, article_id: str) -> str:
    """A story id as written before the 32/32 format: ms << 16 | a 16-bit blake2b of the article id."""
    ms = (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    low = int.from_bytes(hashlib.blake2b(article_id.encode(), digest_size=2).digest(), "big")
    return f"{(ms << 16) | low:016x}"


def _colliding_article_ids(language: str) -> tuple[str, str]:
    """Two article ids whose story id candidates are equal when first seen in the same second."""
    seen: dict[bytes, str] = {}
    for i in range(1_000_000):
        aid = f"article-{i}"
        low = hashlib.blake2b(f"{language}\x1f\x1f{aid}".encode(), digest_size=4).digest()
        if low in seen:
            return seen[low], aid
        seen[low] = aid
    raise AssertionError("no collision found")


def test_story_id_is_the_first_seen_second_and_a_hash_of_language_and_article() -> None:
    sid = make_story_id(T0 + timedelta(milliseconds=999), "a", "en")
    assert len(sid) == 16 and int(sid, 16) >> 32 == int(T0.timestamp())
    assert sid == make_story_id(T0, "a", "en")  # whole seconds, deterministic
    assert sid != make_story_id(T0, "b", "en")
    assert sid != make_story_id(T0, "a", "de")  # writers of other languages hash apart
    assert sid != make_story_id(T0, "a", "en", salt="split")
    ids = [make_story_id(T0 + timedelta(seconds=s), f"article-{s}", "en") for s in (0, 1, 60, 86_400)]
    assert ids == sorted(ids)


def test_new_ids_sort_after_every_old_format_id_made_earlier() -> None:
    for when in (datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), T0, datetime(2099, 12, 31, tzinfo=UTC)):
        old_max = _old_format_id(when + timedelta(milliseconds=999), "x")[:12] + "ffff"
        new_min = f"{int(when.timestamp()) << 32:016x}"
        assert make_story_id(when, "x", "en") >= new_min > old_max


def test_articles_first_seen_together_with_one_candidate_id_start_two_stories() -> None:
    a, b = _colliding_article_ids("en")
    assert make_story_id(T0, a, "en") == make_story_id(T0, b, "en")
    clusterer = LanguageClusterer("en")
    first = clusterer.assign(_f(a, mannheim(0), 0))
    second = clusterer.assign(_f(b, UNRELATED, 0))
    assert first.is_new_story and second.is_new_story
    assert int(second.story_id, 16) == int(first.story_id, 16) + 1  # bumped past the active id
    assert [m.article_id for s in clusterer.story_ids() for m in clusterer.story_members(s)] == [a, b]
    # A rerun from the same state makes the same ids.
    again = LanguageClusterer("en")
    assert [again.assign(_f(a, mannheim(0), 0)), again.assign(_f(b, UNRELATED, 0))] == [first, second]


def test_writer_keeps_apart_two_stories_of_one_ingest_run_whose_ids_would_collide(tmp_path: Path) -> None:
    a, b = _colliding_article_ids("en")
    store = LocalStore(tmp_path / "store")
    write_articles(store, [(a, mannheim(0), 0, "pub0"), (b, UNRELATED, 0, "pub1")])
    cluster_language(store, "en", T0 + timedelta(minutes=1))
    story = final_story(changes_of(store))
    assert story[a] != story[b]
    checkpoint, _ = open_writer(store, "en")
    clusterer, _ = load_writer_state(store, "en", checkpoint)
    assert {m.article_id: sid for sid in clusterer.story_ids() for m in clusterer.story_members(sid)} == story


def test_a_split_half_never_takes_the_id_its_first_article_had_before_a_merge() -> None:
    clusterer = LanguageClusterer("en")
    stream = [_f(f"m{i}", _MANNHEIM[i].format(d="last night"), i, f"pm{i}") for i in range(6)]
    stream += [_f(f"b{i}", _BERN[i].format(d="last night"), 10 + i, f"pb{i}") for i in range(6)]
    decisions = {f.article_id: clusterer.assign(f).story_id for f in stream}
    story_a, story_b = decisions["m0"], decisions["b0"]
    assert story_a != story_b
    assert clusterer.story_first_article(story_b) == "b0"
    clusterer.apply_merge(story_a, story_b, T0 + timedelta(minutes=20))  # story_b is now an alias
    new_id, moved = clusterer.apply_split(story_a, [f"b{i}" for i in range(6)], T0 + timedelta(minutes=60))
    assert {m.article_id for m in moved} == {f"b{i}" for i in range(6)}
    assert new_id not in (story_a, story_b)
    assert int(new_id, 16) >> 32 == int((T0 + timedelta(minutes=10)).timestamp())  # b0's first-seen second


def test_an_alias_resolves_to_the_story_that_holds_its_articles_after_a_split(tmp_path: Path) -> None:
    """B merges into A, a split takes B's articles out again, and C merges into that half: C's
    alias must lead to the half, not through a stale B -> A to a story without C's articles."""
    store = LocalStore(tmp_path / "store")
    stream = [(f"m{i}", _MANNHEIM[i].format(d="last night"), i, f"pm{i}") for i in range(6)]
    stream += [(f"b{i}", _BERN[i].format(d="last night"), 10 + i, f"pb{i}") for i in range(6)]
    write_articles(store, stream)
    cluster_language(store, "en", T0 + timedelta(minutes=16))
    before = final_story(changes_of(store))
    story_a, story_b = before["m0"], before["b0"]
    # A merge the split rule would undo is refused; with halves of 6 sources held to 7, none is.
    forced = RepairParams(merge_threshold=0.0, split_min_sources=7)
    assert repair_language(store, "en", T0 + timedelta(minutes=20), forced)["merge"] == 1
    assert repair_language(store, "en", T0 + timedelta(minutes=60))["split"] == 1
    half = final_story(changes_of(store))["b0"]
    assert half not in (story_a, story_b)
    write_articles(store, [("b6", _BERN[2].format(d="last night") + " Thompson said he will fight again.", 360, "pb6"),
                           ("c0", "The Thompson family opened a bakery in Washington on Monday, selling bread "
                                  "and cakes.", 362, "pc0")])
    cluster_language(store, "en", T0 + timedelta(minutes=363))
    story_c = final_story(changes_of(store))["c0"]
    assert repair_language(store, "en", T0 + timedelta(minutes=370), RepairParams(merge_threshold=0.0))["merge"] == 1
    after = final_story(changes_of(store))
    assert after["c0"] == after["b0"] == half
    con = connect(store)
    try:
        aliases = dict(con.sql(load_sql("story_aliases"), params={"now": T0 + timedelta(minutes=371)}).fetchall())
    finally:
        con.close()
    live = {sid: {} for sid in set(after.values())}
    assert resolve_aliases(aliases, live)[story_c] == half
