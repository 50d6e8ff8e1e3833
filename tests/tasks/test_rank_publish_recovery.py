"""Rank & publish after a crash: an orphan version is never live, a page never freezes, every
non-published page is reported, and a rollback's event survives a crash."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tasks.rank.history import PageHistory
from tasks.rank.publish import publish_computed
from tasks.rank.rebuild import rollback_pointer
from tasks.settings import RankSettings
from transforms.rank_pages import RankOutput
from transforms.records import EditionPage, PageSource, PageStory
from warehouse import layout
from warehouse.snapshots import publish_page, read_pointer, rollback_page
from warehouse.store import LocalStore, ObjectStore

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SETTINGS = RankSettings()


def _iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _story(story_id: str) -> dict[str, Any]:
    return {"story_id": story_id, "title": f"story {story_id}", "sources": [{"article_id": f"a-{story_id}"}]}


def _page_story(story_id: str, rank: int) -> PageStory:
    source = PageSource(f"a-{story_id}", "p1", "Publisher", f"story {story_id}", f"https://example.com/{story_id}",
                        None, False, False, False, None)
    return PageStory(story_id, f"story {story_id}", "", None, "en", (), None, None, 1, 1, f"a-{story_id}",
                     (source,), rank, 1.0, {}, False, None, {})


def _output(at: datetime, ids: str) -> RankOutput:
    page = EditionPage("en-US", "top", _iso(at), tuple(_page_story(i, n) for n, i in enumerate(ids, start=1)))
    stories = {"schema": "newsroom.stories/1", "as_of": _iso(at), "aliases": {},
               "stories": {i: _story(i) for i in ids}}
    return RankOutput({("en-US", "top"): page}, stories, [])  # type: ignore[arg-type]


def _publish_killed_before_pointer(root: Path, at: datetime, ids: str) -> int:
    """Run publish_computed in a child process that SIGKILLs itself at ``rank.before_pointer``."""
    script = (
        "import sys; from datetime import datetime; from pathlib import Path\n"
        "from tasks.rank.publish import publish_computed\nfrom tasks.settings import RankSettings\n"
        "from warehouse.store import LocalStore\n"
        "sys.path.insert(0, sys.argv[4])\nfrom test_rank_publish_recovery import _output\n"
        "at = datetime.fromisoformat(sys.argv[2])\n"
        "publish_computed(LocalStore(Path(sys.argv[1])), _output(at, sys.argv[3]), at, RankSettings())\n"
    )
    env = {**os.environ, "NEWSROOM_DEBUG_CRASH_POINT": "rank.before_pointer", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", script, str(root), at.isoformat(), ids, str(Path(__file__).parent)],
                            env=env, capture_output=True, text=True, timeout=120)
    return result.returncode


def test_a_crash_before_the_pointer_then_a_later_run(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    first = publish_computed(store, _output(T0, "abcd"), T0, SETTINGS)
    assert first["published"] == ["en-US/top"] and first["not_published"] == {}
    t1 = T0 + timedelta(minutes=1)
    assert _publish_killed_before_pointer(tmp_path / "store", t1, "bacd") == -9
    assert store.head(layout.page_version_key("en-US", "top", 2)) is not None  # the orphan
    assert read_pointer(store, "en-US", "top").version == 1  # type: ignore[union-attr]
    # Before any recovery, the orphan is not what readers saw.
    assert PageHistory(store).live_version_at("en-US", "top", t1 + timedelta(seconds=30), strict=True)[0] == 1  # type: ignore[index]

    t2 = T0 + timedelta(minutes=2)  # the next cycle, at a LATER now
    summary = publish_computed(store, _output(t2, "cdab"), t2, SETTINGS)
    assert summary["published"] == ["en-US/top"] and summary["not_published"] == {}
    assert read_pointer(store, "en-US", "top").version == 3  # type: ignore[union-attr]
    history = PageHistory(store)
    assert history.live_version_at("en-US", "top", t1 + timedelta(seconds=30), strict=True)[0] == 1  # type: ignore[index]
    assert history.live_version_at("en-US", "top", t2, strict=False)[0] == 3  # type: ignore[index]
    t3 = T0 + timedelta(minutes=3)
    assert publish_computed(store, _output(t3, "dcab"), t3, SETTINGS)["published"] == ["en-US/top"]


def test_a_stale_run_is_counted_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = LocalStore(tmp_path / "store")
    t2 = T0 + timedelta(minutes=2)
    publish_computed(store, _output(t2, "abcd"), t2, SETTINGS)
    with caplog.at_level(logging.WARNING, logger="tasks.rank"):
        summary = publish_computed(store, _output(T0, "dcbe"), T0, SETTINGS)
    assert summary["published"] == [] and summary["refused"] == {}
    assert set(summary["not_published"]) == {"stories", "en-US/top"}
    assert all(r.startswith("stale:") for r in summary["not_published"].values())
    assert "page_not_published page=en-US/top reason=stale" in caplog.text
    assert json.loads(store.get(layout.page_pointer_key("en-US", "top")).data)["published_at"] == _iso(t2)


def _page(at: datetime, ids: str) -> dict[str, Any]:
    return {"schema": "newsroom.page/1", "edition": "en-US", "section": "top", "as_of": _iso(at),
            "stories": [_story(i) for i in ids]}


def test_a_rollback_whose_event_was_lost_is_repaired_by_the_rerun(store: ObjectStore) -> None:
    for minute, ids in ((0, "abcd"), (1, "dcba")):
        at = T0 + timedelta(minutes=minute)
        assert publish_page(store, "en-US", "top", _page(at, ids), now=at, validate=lambda n, p: None).published
    rolled_at = T0 + timedelta(minutes=2)
    rollback_page(store, "en-US", "top", 1, now=rolled_at)  # what rollback_pointer did before it died
    after = rolled_at + timedelta(minutes=1)
    # The pointer itself says it was rolled back, so history agrees with readers even now.
    assert PageHistory(store).live_version_at("en-US", "top", after, strict=True)[0] == 1  # type: ignore[index]

    result = rollback_pointer(store, "en-US", "top", 1, rolled_at + timedelta(seconds=5))  # the rerun
    assert not result.published and result.reason == "already the live version"
    events = store.list(f"{layout.EVENTS_PREFIX}page.rollback/")
    assert events == [layout.event_key("page.rollback", "en-US.top.20260101T120200")]
    event = json.loads(store.get(events[0]).data)
    assert (event["at"], event["from"], event["to"]) == ("2026-01-01T12:02:00Z", 2, 1)

    # A later publish moves the pointer on; the event keeps the rollback in history.
    t4 = T0 + timedelta(minutes=4)
    assert publish_page(store, "en-US", "top", _page(t4, "bcda"), now=t4, validate=lambda n, p: None).version == 3
    history = PageHistory(store)
    assert history.live_version_at("en-US", "top", after, strict=True)[0] == 1  # type: ignore[index]
    assert history.live_version_at("en-US", "top", t4, strict=False)[0] == 3  # type: ignore[index]
    assert rollback_pointer(store, "en-US", "top", 1, t4 + timedelta(minutes=1)).published
    assert len(store.list(f"{layout.EVENTS_PREFIX}page.rollback/")) == 2


def test_a_rollback_writes_one_event_and_a_rerun_no_second(store: ObjectStore) -> None:
    for minute, ids in ((0, "abcd"), (1, "dcba")):
        at = T0 + timedelta(minutes=minute)
        publish_page(store, "en-US", "top", _page(at, ids), now=at, validate=lambda n, p: None)
    rolled_at = T0 + timedelta(minutes=2)
    assert rollback_pointer(store, "en-US", "top", 1, rolled_at).published
    assert not rollback_pointer(store, "en-US", "top", 1, rolled_at + timedelta(minutes=1)).published
    events = store.list(f"{layout.EVENTS_PREFIX}page.rollback/")
    assert len(events) == 1
    assert json.loads(store.get(events[0]).data) == {"kind": "page.rollback", "edition": "en-US", "section": "top",
                                                     "at": "2026-01-01T12:02:00Z", "from": 2, "to": 1}
