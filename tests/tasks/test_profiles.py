"""The profiles fold: a click on a story raises its topic, and the next For you reflects it."""

from __future__ import annotations

import importlib.util
import os
import re
import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest
from fastapi.testclient import TestClient

from serving.app import create_app
from serving.profiles import SCHEMA_SQL
from serving.settings import ServingSettings
from tasks.profiles import fold_clicks
from warehouse.profiles import PROFILE_TABLES_SQL, title_terms
from warehouse.store import LocalStore

TECH_STORY = "0196f1c2a3b40005"
HALF_LIFE = 72.0


def _fixtures() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "serving" / "conftest.py"
    spec = importlib.util.spec_from_file_location("serving_fixtures", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


FIX = _fixtures()


def _tables(sql: str) -> dict[str, str]:
    return {m.group(1): " ".join(m.group(0).split()) for m in re.finditer(r"create table if not exists (\w+) \(.*?\);",
                                                                          sql, re.S)}


def test_the_flow_and_serving_agree_on_the_profile_tables() -> None:
    ours, theirs = _tables(PROFILE_TABLES_SQL), _tables(SCHEMA_SQL)
    assert {"weights", "clicks_consumed"} <= set(ours)
    assert {k: theirs[k] for k in ours} == ours


@pytest.mark.parametrize(("title", "terms"), [
    ("Rail operator orders 40 battery trains", ("rail", "operator", "orders", "battery", "trains")),
    ("Über große Städte — naïve café, über", ("über", "große", "städte", "naïve", "café")),
    ("", ()),
])
def test_titles_split_into_profile_terms(title: str, terms: tuple[str, ...]) -> None:
    # One function for the profiles flow (which learns term weights) and For you (which matches them).
    assert title_terms(title) == terms


def _click_as(client: TestClient, headers: dict[str, str], article_id: str, surface: str = "for_you") -> None:
    """Follow a link as the signed-in reader page does: mint with the session, then go."""
    minted = client.post("/v1/click-token", json={"article_id": article_id, "surface": surface, "position": 0},
                         headers=headers)
    assert client.get(minted.json()["click_url"], follow_redirects=False).status_code == 302
    FIX.flush_clicks(client)  # as the replica's next interval would


def _feed_order(client: TestClient, headers: dict[str, str]) -> list[tuple[str, str]]:
    body = client.get("/v1/feed", headers=headers).json()
    return [(s["story_id"], s["reason"]) for s in body["stories"]]


def test_a_click_raises_its_topic_and_the_next_for_you_reflects_it(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    FIX.publish_fixture(store)
    profiles_path = str(tmp_path / "profiles.sqlite3")
    settings = ServingSettings(refresh_seconds=3600, profiles_path=profiles_path, hmac_key=FIX.HMAC_KEY)
    with TestClient(create_app(store, settings)) as client:
        token = client.post("/v1/session", json={"reader": "dana"}).json()["token"]
        dana = {"Authorization": f"Bearer {token}"}
        # A second reader clicks the same story: dana's profile must stay dana's.
        erin = {"Authorization": f"Bearer {client.post('/v1/session', json={'reader': 'erin'}).json()['token']}"}
        before = _feed_order(client, dana)
        assert before[-1][0] == TECH_STORY  # lowest importance: last
        # Dana read another story (the business one) earlier, so only the tech click moves weights.
        page = client.get("/v1/editions/en-US/top").json()
        tech = next(s for s in page["stories"] if s["story_id"] == TECH_STORY)
        minted = client.post(
            "/v1/click-token", json={"article_id": tech["sources"][0]["article_id"], "surface": "top", "position": 4},
            headers=dana,
        ).json()
        assert client.get(minted["click_url"], follow_redirects=False).status_code == 302
        _click_as(client, erin, client.get("/v1/feed", headers=erin).json()["stories"][0]["sources"][0]["article_id"])

        summary = fold_clicks(store, profiles_path, datetime.now(UTC), HALF_LIFE)
        assert summary == {"segments": 1, "clicks": 2, "readers": 2}  # both clicks in one interval's segment
        assert fold_clicks(store, profiles_path, datetime.now(UTC), HALF_LIFE)["segments"] == 0  # once only

        me = client.get("/v1/me", headers=dana).json()
        assert me["topic_weights"] == {"technology": pytest.approx(1.0, abs=1e-3)}
        assert me["source_weights"] == {"tech-dispatch": pytest.approx(1.0, abs=1e-3)}

        # The clicked story itself is read (and so gone); the other technology reader pick rises.
        # Publish a second technology story to show the re-rank, via a story the reader has not read.
        after = _feed_order(client, dana)
        assert TECH_STORY not in [s for s, _ in after]  # read, not developed since
        # The business story carries a Tech Dispatch article: the source weight lifts it to the top.
        assert [s for s, _ in before].index("0196f1c2a3b40002") == 1
        assert after[0] == ("0196f1c2a3b40002", "Because you read Tech Dispatch")
        print("before:", before)
        print("after: ", after)


def test_a_developed_story_comes_back_ranked_by_the_new_weights(tmp_path: Path) -> None:
    """Read, then updated: the story returns, ranked up, 'Because you read about Technology'."""
    store = LocalStore(tmp_path / "store")
    now = datetime.now(UTC).replace(microsecond=0)
    FIX.publish_fixture(store, now=now - timedelta(hours=1))
    profiles_path = str(tmp_path / "profiles.sqlite3")
    settings = ServingSettings(refresh_seconds=3600, profiles_path=profiles_path, hmac_key=FIX.HMAC_KEY)
    with TestClient(create_app(store, settings)) as client:
        dana = {"Authorization": f"Bearer {client.post('/v1/session', json={'reader': 'dana'}).json()['token']}"}
        before = _feed_order(client, dana)
        card = next(s for s in client.get("/v1/feed", headers=dana).json()["stories"] if s["story_id"] == TECH_STORY)
        _click_as(client, dana, card["sources"][0]["article_id"])
        fold_clicks(store, profiles_path, now, HALF_LIFE)
        FIX.publish_fixture(store, now=now + timedelta(hours=5))  # every story develops after the read
        client.app.state.cache.refresh()  # type: ignore[attr-defined]
        after = _feed_order(client, dana)
        print("before:", before)
        print("after: ", after)
        assert before[-1] == (TECH_STORY, "Top story in your edition")
        ranked = [s for s, _ in after]
        assert ranked.index(TECH_STORY) < 4  # last of five before, ahead of two top stories now
        assert after[ranked.index(TECH_STORY)][1] == "Because you read about Technology"


def test_fold_is_atomic_with_its_offsets(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    path = str(tmp_path / "p.sqlite3")
    assert fold_clicks(store, path, datetime.now(UTC), HALF_LIFE) == {"segments": 0, "clicks": 0, "readers": 0}
    with sqlite3.connect(path) as db:
        assert db.execute("select count(*) from clicks_consumed").fetchone() == (0,)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_fold_profiles_flow_runs_under_prefect(tmp_path: Path, prefect_harness: None,
                                               monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest,
                                               backend: str) -> None:
    """The flow and serving find the same profile store from the same variables (the URL wins)."""
    from flows.profiles import fold_profiles
    from tasks.storage import reset_configured_store

    store = LocalStore(tmp_path / "store")
    FIX.publish_fixture(store)
    profiles_path = str(tmp_path / "profiles.sqlite3")
    monkeypatch.setenv("NEWSROOM_WAREHOUSE_ROOT", str(tmp_path / "store"))
    monkeypatch.setenv("NEWSROOM_SERVING_PROFILES_PATH", profiles_path)
    extra: dict[str, str] = {}
    if backend == "postgres":
        extra["profiles_url"] = request.getfixturevalue("postgres_url")
        monkeypatch.setenv("NEWSROOM_SERVING_PROFILES_URL", extra["profiles_url"])
    else:
        monkeypatch.delenv("NEWSROOM_SERVING_PROFILES_URL", raising=False)
    reset_configured_store()
    settings = ServingSettings(refresh_seconds=3600, profiles_path=profiles_path, hmac_key=FIX.HMAC_KEY,
                               **extra)  # type: ignore[arg-type]
    try:
        with TestClient(create_app(store, settings)) as client:
            dana = {"Authorization": f"Bearer {client.post('/v1/session', json={'reader': 'dana'}).json()['token']}"}
            feed = client.get("/v1/feed", headers=dana).json()
            tech = next(s for s in feed["stories"] if s["story_id"] == TECH_STORY)
            _click_as(client, dana, tech["sources"][0]["article_id"])
            summary = fold_profiles()
            assert summary == {"segments": 1, "clicks": 1, "readers": 1}
            assert client.get("/v1/me", headers=dana).json()["topic_weights"] == {"technology": pytest.approx(1.0, abs=1e-3)}
    finally:
        os.environ.pop("NEWSROOM_WAREHOUSE_ROOT", None)
        reset_configured_store()
    assert Path(profiles_path).exists() == (backend == "sqlite")  # with the URL set, nobody opens the file
