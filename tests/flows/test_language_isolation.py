"""The cluster and repair flows under Prefect: one language failing never stops the others, and the
flow run still fails, naming each language that failed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pipeline_harness import pipeline_env
from repair_corpus import (
    T0,
    break_writer_state,
    changes_of,
    final_story,
    mannheim,
    two_event_stream,
    write_articles,
)

from flows.cluster import cluster_stories
from flows.errors import CycleStepsFailedError, LanguagesFailedError
from flows.repair import repair_stories
from tasks.writer.run import cluster_language
from transforms.clustering import ClusterParams
from warehouse import layout

pytestmark = [pytest.mark.integration, pytest.mark.slow]

UNRELATED_TEXT = ("The central bank raised interest rates by a quarter point on Wednesday, citing stubborn "
                  "inflation in housing and services, and signalled that further increases were possible.")


def test_an_odd_language_in_the_log_does_not_stop_the_other_writers(prefect_harness: None,
                                                                   store_vars: dict[str, str]) -> None:
    with pipeline_env(store_vars) as store:
        write_articles(store, [("a0", UNRELATED_TEXT, 0, "pub0")], language="aa")
        write_articles(store, [("m0", mannheim(0), 0, "pub1")], language="en us")  # as ingested before
        write_articles(store, [("z0", UNRELATED_TEXT, 1, "pub2")], language="zh")
        with pytest.raises(LanguagesFailedError, match=r"cluster failed for 1 of 3 languages: 'en us': ValueError"):
            cluster_stories(now=(T0 + timedelta(minutes=5)).isoformat())
        assert sorted(c["article_id"] for c in changes_of(store)) == ["a0", "z0"]


def test_a_failing_writer_does_not_stop_the_languages_after_it(prefect_harness: None,
                                                               store_vars: dict[str, str]) -> None:
    stream = two_event_stream()
    with pipeline_env(store_vars) as store:
        write_articles(store, stream)
        # German's writer state is unreadable: its run fails.
        break_writer_state(store, "de")
        with pytest.raises(LanguagesFailedError, match=r"cluster failed for 1 of 2 languages: 'de': "
                           r"CorruptObjectError: unreadable writer state: StateBlobError"):
            cluster_stories(now=(T0 + timedelta(minutes=30)).isoformat(), languages=["de", "en"])
        assert sorted(final_story(changes_of(store))) == sorted(a for a, *_ in stream)


def test_two_language_groups_write_every_language_once(prefect_harness: None, store_vars: dict[str, str]) -> None:
    # The writers-en and writers-rest deployments (#19): English alone, then every language but English.
    with pipeline_env(store_vars) as store:
        write_articles(store, [("m0", mannheim(0), 0, "pub1")])
        write_articles(store, [("a0", UNRELATED_TEXT, 0, "pub0")], language="de")
        write_articles(store, [("z0", UNRELATED_TEXT, 1, "pub2")], language="zh")
        now = (T0 + timedelta(minutes=5)).isoformat()
        english = cluster_stories(now=now, languages=["en"])
        rest = cluster_stories(now=now, except_languages=["en"])
        assert [s["language"] for s in english] == ["en"]
        assert sorted(s["language"] for s in rest) == ["de", "zh"]
        assert sorted(c["article_id"] for c in changes_of(store)) == ["a0", "m0", "z0"]
        assert [s["language"] for s in repair_stories(now=now, except_languages=["en"])] == ["de", "zh"]


def test_the_repair_flow_repairs_the_languages_after_a_failing_one(prefect_harness: None,
                                                                    store_vars: dict[str, str]) -> None:
    with pipeline_env(store_vars) as store:
        write_articles(store, [("x0", mannheim(0), 0, "pub0")], language="en us")  # sorts before "en"
        write_articles(store, two_event_stream())
        mixing = ClusterParams(join_threshold=0.0, date_conflict_penalty=0.0, year_conflict_penalty=0.0)
        cluster_language(store, "en", T0 + timedelta(minutes=15), params=mixing)
        with pytest.raises(LanguagesFailedError, match=r"repair failed for 1 of 2 languages: 'en us': ValueError"):
            repair_stories(now=(T0 + timedelta(minutes=20)).isoformat(), languages=["en us", "en"])
        splits = [c for c in changes_of(store) if c["kind"] == "split"]
        assert splits and {c["language"] for c in splits} == {"en"}


def test_a_cycle_goes_on_to_rank_when_one_language_fails(prefect_harness: None, store_vars: dict[str, str],
                                                         tmp_path) -> None:
    from flows.cycle import pipeline_cycle
    from tasks.registry import import_publishers

    stream = two_event_stream()
    with pipeline_env(store_vars) as store:
        csv = tmp_path / "publishers.csv"
        csv.write_text("publisher_id,name,domain,region,language,tier,authority\n" + "".join(  # no feeds to poll
            f"{p},{p},{p}.test,US,en,1,0.5\n" for p in sorted({s[3] for s in stream})))
        import_publishers(store, csv)
        write_articles(store, stream)
        write_articles(store, [("d0", UNRELATED_TEXT, 2, "pub0")], language="de")
        break_writer_state(store, "de")
        with pytest.raises(CycleStepsFailedError, match=r"pipeline cycle steps failed: cluster: .*'de': "
                           r"CorruptObjectError: unreadable writer state: StateBlobError"):
            pipeline_cycle(now=(T0 + timedelta(minutes=30)).isoformat())
        assert sorted(final_story(changes_of(store))) == sorted(a for a, *_ in stream)  # en clustered
        assert store.list(layout.PAGES_PREFIX), "rank never ran after the failing cluster step"
