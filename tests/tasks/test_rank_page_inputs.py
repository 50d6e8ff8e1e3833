"""What a rank cycle makes of awkward inputs: publishers of authority 0, opted-out publishers,
untitled articles, a second burst, and bad authority values in the registry.

Real LocalStore and DuckDB over a synthetic world (tests/rank_world.py), no mocks.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rank_world import World, quiet_world

from tasks.rank.compute import compute_pages
from tasks.rank.publish import publish_all
from tasks.registry import parse_publishers_csv
from tasks.settings import RankSettings
from warehouse import layout
from warehouse.schemas import PUBLISHERS_SCHEMA
from warehouse.snapshots import dump_snapshot, read_live_page
from warehouse.store import LocalStore
from warehouse.tables import read_table, rows_to_table, write_table

SETTINGS = RankSettings()


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


def _add_publishers(store: LocalStore, extra: list[dict[str, Any]]) -> None:
    rows = read_table(store, layout.PUBLISHERS_KEY, PUBLISHERS_SCHEMA)[0].to_pylist()
    base = {"region": "US", "language": "en", "tier": 1, "authority": 0.5, "is_paywalled": False,
            "is_opted_out": False}
    rows += [{**base, "name": p["publisher_id"], "domain": f"{p['publisher_id']}.example", **p} for p in extra]
    write_table(store, layout.PUBLISHERS_KEY, rows_to_table(rows, PUBLISHERS_SCHEMA), PUBLISHERS_SCHEMA)


def _add_titled(world: World, story_id: str, items: list[tuple[str, datetime, str]]) -> None:
    """``World.add`` with each article's title given: ``(publisher_id, first_seen_at, title)``."""
    world.add([(story_id, publisher_id, seen, title) for publisher_id, seen, title in items])


def _headline(story_id: str) -> str:
    return f"{story_id} parliament votes on the budget"


def test_a_story_of_authority_zero_publishers_scores_finite_and_low(store: LocalStore) -> None:
    world, _ids, now = quiet_world(store, stories=12)
    _add_publishers(store, [{"publisher_id": "zero1", "authority": 0.0}, {"publisher_id": "zero2", "authority": 0.0}])
    _add_titled(world, "zeroauth", [(p, now - timedelta(minutes=20 + i), _headline("zeroauth"))
                                    for i, p in enumerate(["zero1", "zero2"])])
    out = compute_pages(store, now, SETTINGS)
    top = out.pages[("en-US", "top")].to_json()
    row = next(s for s in top["stories"] if s["story_id"] == "zeroauth")
    assert math.isfinite(row["score"]) and row["score_parts"]["regional_share"] == 0.0
    assert top["stories"][0]["story_id"] != "zeroauth"
    assert json.loads(dump_snapshot(top)) == top  # strict JSON: dump_snapshot refuses NaN


def test_an_opted_out_publisher_is_never_listed_nor_counted(store: LocalStore) -> None:
    world, _ids, now = quiet_world(store, stories=12)
    _add_publishers(store, [{"publisher_id": "gone", "authority": 0.99, "is_opted_out": True}])
    _add_titled(world, "optout", [("gone", now - timedelta(minutes=10), _headline("optout")),
                                  ("pub01", now - timedelta(minutes=9), _headline("optout"))])
    _add_titled(world, "onlygone", [("gone", now - timedelta(minutes=8), _headline("onlygone"))])
    out = compute_pages(store, now, SETTINGS)
    published = {key: page.to_json() for key, page in out.pages.items()}
    pages = {key: page for key, page in published.items() if key[1] != "pool"}
    listed = [src["publisher_id"] for page in pages.values() for s in page["stories"] for src in s["sources"]]
    pool = [s for key, page in published.items() if key[1] == "pool" for s in page["stories"]]
    assert "gone" not in listed and all(s["representative"]["publisher_id"] != "gone" for s in pool)
    story = next(s for s in pages[("en-US", "top")]["stories"] if s["story_id"] == "optout")
    assert story["source_count"] == 1 and story["article_count"] == 1
    pub01 = next(r for r in read_table(store, layout.PUBLISHERS_KEY, PUBLISHERS_SCHEMA)[0].to_pylist()
                 if r["publisher_id"] == "pub01")
    assert story["score_parts"]["coverage"] == pytest.approx(math.log(1 + pub01["authority"]), abs=1e-4)
    assert all(s.story_id != "onlygone" for page in out.pages.values() for s in page.stories)


def test_an_untitled_story_is_skipped_and_the_page_published(store: LocalStore) -> None:
    world, _ids, now = quiet_world(store, stories=12)
    _add_titled(world, "notitle", [("pub01", now - timedelta(minutes=5), ""),
                                   ("pub02", now - timedelta(minutes=4), "   ")])
    _add_titled(world, "halftitle", [("pub03", now - timedelta(minutes=5), ""),
                                     ("pub04", now - timedelta(minutes=4), _headline("halftitle"))])
    summary = publish_all(store, now, SETTINGS)
    assert "en-US/top" in summary["published"] and "en-US/top" not in summary["refused"]
    top = json.loads(read_live_page(store, "en-US", "top").data)["stories"]
    assert "notitle" not in {s["story_id"] for s in top}
    half = next(s for s in top if s["story_id"] == "halftitle")
    assert half["title"] == _headline("halftitle") and half["sources"][0]["publisher_id"] == "pub04"


def _pool_row(store: LocalStore, now: datetime, story_id: str) -> dict[str, Any]:
    pool = compute_pages(store, now, SETTINGS).pages[("en-US", "pool")].to_json()["stories"]
    return next(s for s in pool if s["story_id"] == story_id)


def test_breaking_lasts_from_the_first_burst_not_a_later_one(store: LocalStore) -> None:
    world, _ids, now = quiet_world(store, stories=12)
    pubs = world.publisher_ids()
    first = now + timedelta(minutes=5)
    later = first + timedelta(minutes=50)
    world.add([("burst", pubs[k], first + timedelta(seconds=4 * k)) for k in range(12)], topic="world")
    world.add([("burst", pubs[12 + k], later + timedelta(seconds=4 * k)) for k in range(12)], topic="world")
    seen = _pool_row(store, later + timedelta(minutes=5), "burst")
    assert seen["is_breaking"]
    since = datetime.fromisoformat(seen["breaking_since"].replace("Z", "+00:00"))
    assert first <= since < first + timedelta(minutes=1)  # the first burst, not the later one
    assert not _pool_row(store, first + timedelta(hours=2, minutes=10), "burst")["is_breaking"]


@pytest.mark.parametrize("authority", ["1.5", "-0.1", "nan", "inf", "high"])
def test_the_registry_refuses_an_authority_outside_0_to_1(authority: str) -> None:
    header = "publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section\n"
    with pytest.raises(ValueError, match=r"publisher bad\b.*authority.*\[0, 1\]"):
        parse_publishers_csv(header + f"good,G,g.example,US,en,1,0.4,,,,\nbad,B,b.example,US,en,1,{authority},,,,\n")


def test_the_registry_keeps_authority_0_to_1_and_defaults_a_blank_one() -> None:
    header = "publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section\n"
    registry = parse_publishers_csv(header + "a,A,a.example,US,en,1,0,,,,\nb,B,b.example,US,en,1,1,,,,\n"
                                    "c,C,c.example,US,en,1,,,,,\n")
    assert {p: r["authority"] for p, r in registry.publishers.items()} == {"a": 0.0, "b": 1.0, "c": 0.5}
