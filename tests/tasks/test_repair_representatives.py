"""The repair task gives a split story's id to the half holding the published representative."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from repair_corpus import T0, changes_of, final_story, two_event_stream, write_articles

from tasks.registry import import_publishers
from tasks.repair import RepairInputsOnce, published_representatives, repair_language
from tasks.writer.run import cluster_language
from transforms.clustering import ClusterParams
from warehouse.duck import connect, load_sql
from warehouse.snapshots import publish_stories
from warehouse.store import LocalStore, ObjectStore

# An online pass that joins everything: one story fed the Mannheim (m*) and Bern (b*) events.
MIXING = ClusterParams(join_threshold=0.0, date_conflict_penalty=0.0, year_conflict_penalty=0.0)
SPLIT_AT = T0 + timedelta(minutes=20)


def _register(store: ObjectStore, tmp_path: Path, authority: dict[str, float]) -> None:
    csv = tmp_path / "publishers.csv"
    csv.write_text("publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section\n"
                   + "".join(f"{p},{p.upper()},{p}.test,US,en,1,{a:.2f},false,false,http://{p}.test/feed,sport\n"
                             for p, a in authority.items()), encoding="utf-8")
    import_publishers(store, csv)


def _mixed_story(tmp_path: Path, authority: dict[str, float] | None = None) -> tuple[LocalStore, str]:
    """A store whose one story holds both events; b0 (pub3) has the highest authority if registered."""
    store = LocalStore(tmp_path / "store")
    if authority is not None:
        _register(store, tmp_path, authority)
    write_articles(store, two_event_stream())
    cluster_language(store, "en", T0 + timedelta(minutes=15), params=MIXING)
    (story_id,) = set(final_story(changes_of(store)).values())
    return store, story_id


def _publish(store: ObjectStore, as_of: datetime, representatives: dict[str, str]) -> None:
    stories: dict[str, Any] = {sid: {"story_id": sid, "representative_id": rep} for sid, rep in representatives.items()}
    payload = {"schema": "newsroom.stories/1", "as_of": as_of.strftime("%Y-%m-%dT%H:%M:%SZ"),
               "stories": stories, "aliases": {}}
    assert publish_stories(store, payload, now=as_of, validate=lambda new, prev: None).published


AUTHORITY = {f"pub{i}": (0.95 if i == 3 else 0.3) for i in range(8)}


def test_without_a_published_story_the_half_of_the_highest_authority_keeps_the_id(tmp_path: Path) -> None:
    store, story_id = _mixed_story(tmp_path, AUTHORITY)
    # The representative the story snapshot would show is the pages' own choice over the members.
    con = connect(store)
    try:
        members = con.sql(load_sql("story_members"), params={"now": SPLIT_AT}).to_arrow_table().to_pylist()
    finally:
        con.close()
    assert min(members, key=lambda m: (-m["authority"], m["first_seen_at"]))["article_id"] == "b0"
    assert repair_language(store, "en", SPLIT_AT)["split"] == 1
    after = final_story(changes_of(store))
    assert after["b0"] == story_id and after["m0"] != story_id
    assert {after[f"b{i}"] for i in range(6)} == {story_id}


def test_without_registry_or_snapshot_the_first_article_keeps_the_id(tmp_path: Path) -> None:
    store, story_id = _mixed_story(tmp_path)
    assert repair_language(store, "en", SPLIT_AT)["split"] == 1
    after = final_story(changes_of(store))
    assert after["m0"] == story_id and after["b0"] != story_id


def test_the_published_representative_outranks_authority(tmp_path: Path) -> None:
    store, story_id = _mixed_story(tmp_path, AUTHORITY)
    _publish(store, T0 + timedelta(minutes=16), {story_id: "m2"})
    assert repair_language(store, "en", SPLIT_AT)["split"] == 1
    after = final_story(changes_of(store))
    assert after["m2"] == after["m0"] == story_id and after["b0"] != story_id


def test_a_published_representative_that_left_the_story_falls_back(tmp_path: Path) -> None:
    store, story_id = _mixed_story(tmp_path, AUTHORITY)
    _publish(store, T0 + timedelta(minutes=16), {story_id: "gone"})
    repair_language(store, "en", SPLIT_AT)
    assert final_story(changes_of(store))["b0"] == story_id


def test_the_snapshot_read_is_the_one_live_at_now(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    assert published_representatives(store, SPLIT_AT) == {}
    _publish(store, T0 + timedelta(minutes=16), {"s1": "m2", "s2": "x"})
    _publish(store, T0 + timedelta(minutes=21), {"s1": "b0"})  # after the repair's now
    # A rerun at the same now, after a later publish, reads what the first run read.
    assert published_representatives(store, SPLIT_AT) == {"s1": "m2", "s2": "x"}
    assert published_representatives(store, T0 + timedelta(minutes=21)) == {"s1": "b0"}
    assert published_representatives(store, T0 + timedelta(minutes=10)) == {}


def test_a_rerun_at_the_same_now_makes_the_same_decisions(tmp_path: Path) -> None:
    runs = []
    for name in ("first", "rerun"):
        store, story_id = _mixed_story(tmp_path / name, AUTHORITY)
        _publish(store, T0 + timedelta(minutes=16), {story_id: "m2"})
        if name == "rerun":  # a rank cycle published again between the two runs
            _publish(store, T0 + timedelta(minutes=25), {story_id: "b0"})
        repair_language(store, "en", SPLIT_AT)
        runs.append([(c["kind"], c["story_id"], c["article_id"], c["other_story_id"]) for c in changes_of(store)
                     if c["kind"] == "split"])
    assert runs[0] == runs[1] and runs[0]


class _CountingStore:
    """A store that counts the reads of each key (the ObjectStore protocol, over a real LocalStore)."""

    def __init__(self, inner: LocalStore) -> None:
        self.inner, self.reads = inner, Counter()

    @property
    def uri(self) -> str:
        return self.inner.uri

    def get(self, key: str) -> Any:
        self.reads[key] += 1
        return self.inner.get(key)

    def head(self, key: str) -> str | None:
        return self.inner.head(key)

    def put(self, key: str, data: bytes, **kwargs: Any) -> str:
        return self.inner.put(key, data, **kwargs)

    def list(self, prefix: str) -> list[str]:
        return self.inner.list(prefix)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


@pytest.mark.parametrize("shared", [True, False], ids=["one reader per run", "one per language"])
def test_a_repair_run_reads_the_story_snapshot_and_registry_once_for_every_language(tmp_path: Path,
                                                                                     shared: bool) -> None:
    store, story_id = _mixed_story(tmp_path, AUTHORITY)
    stream = [(f"de-{article_id}", text, minute, publisher) for article_id, text, minute, publisher in two_event_stream()]
    write_articles(store, stream, language="de")
    cluster_language(store, "de", T0 + timedelta(minutes=15), params=MIXING)
    _publish(store, T0 + timedelta(minutes=16), {story_id: "m2"})
    counting = _CountingStore(store)
    inputs = RepairInputsOnce() if shared else None
    for language in ("en", "de"):
        assert repair_language(counting, language, SPLIT_AT, inputs=inputs)["split"] == 1  # type: ignore[arg-type]
    snapshot_reads = sum(n for k, n in counting.reads.items() if k.startswith("pages/stories/v"))
    registry_reads = counting.reads["registry/publishers.parquet"]
    assert (snapshot_reads, registry_reads) == ((1, 1) if shared else (2, 2))
