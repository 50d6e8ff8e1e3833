"""The story aggregates a rank cycle folds minute by minute equal a rebuild from the whole log at the
same instant (issue 15), through joins, copies, versions, late rows and changes, merges, splits,
expiry, an opted-out publisher, a change log ahead of the clock, and a SIGKILL between writing the
aggregates and moving their pointer; and the pages computed from either are the same bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from aggregates_stream import SETTINGS, Stream

from tasks.aggregates.compare import rebuilt_aggregates, stored_aggregates
from tasks.aggregates.cycle import aggregates_from_logs, update_aggregates
from tasks.rank.compute import compute_pages
from tasks.rank.publish import publish_all
from warehouse.aggregates import POINTER_KEY, read_pointer
from warehouse.snapshots import dump_snapshot
from warehouse.store import LocalStore, ObjectStore

REPO = Path(__file__).resolve().parents[2]


def _pages(store: ObjectStore, now: datetime, *, incremental: bool) -> dict[str, bytes]:
    view = (update_aggregates(store, now, SETTINGS, persist=False) if incremental
            else aggregates_from_logs(store, now, SETTINGS))
    out = compute_pages(store, now, SETTINGS, view=view)
    pages = {f"{e}/{s}": dump_snapshot(p.to_json()) for (e, s), p in sorted(out.pages.items())}
    pages["stories"] = dump_snapshot(out.stories)
    pages["breaking"] = json.dumps(out.breaking).encode()
    return pages


def _assert_equal_to_rebuild(store: ObjectStore) -> None:
    stored = stored_aggregates(store, SETTINGS)
    assert stored is not None
    rebuilt = rebuilt_aggregates(store, stored.as_of, SETTINGS)
    assert stored.stories == rebuilt.stories
    assert stored.members == rebuilt.members
    assert stored.pending == rebuilt.pending
    assert stored.ledger == rebuilt.ledger
    assert stored.aliases == rebuilt.aliases


def _fold_killed(store: LocalStore, now: datetime) -> int:
    """Fold in a child process that SIGKILLs itself between the aggregates and their pointer."""
    code = ("import sys; from datetime import datetime; from pathlib import Path; sys.path.insert(0, 'tests');"
            "from aggregates_stream import SETTINGS; from tasks.aggregates.cycle import update_aggregates;"
            "from warehouse.store import LocalStore;"
            f"update_aggregates(LocalStore(Path({str(store.root)!r})), datetime.fromisoformat({now.isoformat()!r}), SETTINGS)")
    env = {**os.environ, "NEWSROOM_DEBUG_CRASH_POINT": "rank.before_aggregates_pointer", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, timeout=120).returncode


@pytest.mark.slow
def test_folded_aggregates_equal_a_rebuild_through_every_kind_of_change(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    stream = Stream(store)
    crashed, later = False, 0
    for m in range(100):
        now = stream.minute(m)
        if m == 47:
            before, _ = read_pointer(store)
            assert before is not None
            assert _fold_killed(store, now) == -9
            assert read_pointer(store)[0] == before, "the pointer moved before the kill"
            # The killed fold wrote its tables and manifest: the rerun writes the same keys.
            assert any(k.startswith(f"state/rank/manifest-{before['seq'] + 1:010d}-") for k in store.list("state/rank/"))
            crashed = True
        if m % 10 == 9:
            summary = publish_all(store, now, SETTINGS)["aggregates"]
        else:
            summary = update_aggregates(store, now, SETTINGS).summary
        assert summary["mode"] == ("rebuilt" if m == 0 else "folded") and summary["committed"], summary
        later += summary.get("later_changes", 0)
        if m in (20, 31, 47, 64, 99):
            _assert_equal_to_rebuild(store)
            assert _pages(store, now, incremental=True) == _pages(store, now, incremental=False)
        if m == 47:
            waiting = stored_aggregates(store, SETTINGS)
            assert waiting is not None and waiting.pending, "the row no change acknowledges should wait"
    assert crashed
    assert later, "no change ahead of the clock was held for a later cycle"
    assert stream.splits, "no split"
    stored = stored_aggregates(store, SETTINGS)
    assert stored is not None
    # The stream went through what it promises: merged-away stories, expired ones, versions, listings.
    assert stored.aliases, "no merge reached the aggregates"
    assert any(m["version"] > 1 for m in stored.members), "no new version reached a member"
    assert any(m["listed_at"] is not None for m in stored.members), "no listing reached a member"
    assert stream.expired > 10, "no story expired"
    assert not stored.pending, "a row no change acknowledges waits an hour (pending_hours), then is dropped"


def test_a_cycle_reads_only_what_is_new(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    stream = Stream(store)
    for m in range(30):
        now = stream.minute(m)
        view = update_aggregates(store, now, SETTINGS)
    assert view.summary["mode"] == "folded"
    # One minute's article and change segments, never the 29 before them.
    assert view.counter.objects["articles"] == 1
    assert view.counter.objects["changes"] <= 2
    rebuilt = aggregates_from_logs(store, now, SETTINGS)
    assert rebuilt.counter.objects["articles"] >= 29


def test_a_past_minute_is_answered_by_a_rebuild_written_nowhere(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    stream = Stream(store)
    times = [stream.minute(m) for m in range(12)]
    for now in times:
        update_aggregates(store, now, SETTINGS)
    pointer, _ = read_pointer(store)
    view = update_aggregates(store, times[5], SETTINGS)
    assert view.summary["mode"] == "rebuilt" and "committed" not in view.summary
    assert read_pointer(store)[0] == pointer
    assert _pages(store, times[5], incremental=True) == _pages(store, times[5], incremental=False)


def test_a_fold_that_lost_the_pointer_race_commits_nothing(tmp_path: Path) -> None:
    from tasks.aggregates.cycle import _fold_cycle, aggregate_rules
    from tasks.aggregates.members import read_registry
    from warehouse.aggregates import ReadCounter, read_manifest

    store = LocalStore(tmp_path / "store")
    stream = Stream(store)
    for m in range(6):
        update_aggregates(store, stream.minute(m), SETTINGS)
    now = stream.minute(6)
    pointer, etag = read_pointer(store)  # what a slow cycle read...
    assert pointer is not None
    update_aggregates(store, now, SETTINGS)  # ...before a rival cycle committed
    winner = store.get(POINTER_KEY).data
    view = _fold_cycle(store, now, aggregate_rules(SETTINGS), read_registry(store),
                       read_manifest(store, pointer["manifest"]), etag, True, ReadCounter())
    assert view.summary["committed"] is False
    assert store.get(POINTER_KEY).data == winner
    _assert_equal_to_rebuild(store)


@pytest.mark.parametrize("fault", ["corrupt pointer", "missing manifest", "corrupt stories", "missing members",
                                   "corrupt pending"])
def test_a_damaged_object_is_named_and_the_aggregates_rebuilt(tmp_path: Path, fault: str) -> None:
    store = LocalStore(tmp_path / "store")
    stream = Stream(store)
    for m in range(15):
        update_aggregates(store, stream.minute(m), SETTINGS)
    pointer, _ = read_pointer(store)
    assert pointer is not None
    manifest = json.loads(store.get(pointer["manifest"]).data)
    damaged = {"corrupt pointer": POINTER_KEY, "missing manifest": pointer["manifest"],
               "corrupt stories": manifest["stories"][-1], "missing members": manifest["members"][0],
               "corrupt pending": manifest["pending"]}[fault]
    if fault.startswith("missing"):
        store.delete(damaged)
    else:
        store.put(damaged, b"PAR1 not really")
    now = stream.minute(15)
    summary = publish_all(store, now, SETTINGS)
    assert [d["key"] for d in summary["damaged"]] == [damaged]
    assert summary["aggregates"]["mode"] == "rebuilt" and summary["aggregates"]["committed"] is True
    _assert_equal_to_rebuild(store)
    assert _pages(store, now, incremental=True) == _pages(store, now, incremental=False)


def test_a_requested_rebuild_happens_next_cycle_past_every_sequence_number(tmp_path: Path) -> None:
    from warehouse.aggregates import request_rebuild

    store = LocalStore(tmp_path / "store")
    stream = Stream(store)
    for m in range(5):
        update_aggregates(store, stream.minute(m), SETTINGS)
    before, _ = read_pointer(store)
    assert before is not None
    assert request_rebuild(store, "writer of en rewound")
    view = update_aggregates(store, stream.minute(5), SETTINGS)
    assert view.summary["mode"] == "rebuilt" and view.summary["reason"] == "writer of en rewound"
    after, _ = read_pointer(store)
    assert after is not None and after["seq"] == before["seq"] + 1 and "rebuild" not in after
    _assert_equal_to_rebuild(store)


def test_the_doctor_names_a_damaged_aggregates_table_and_quarantines_it(tmp_path: Path) -> None:
    from tasks.doctor import run_doctor

    store = LocalStore(tmp_path / "store")
    stream = Stream(store)
    for m in range(5):
        update_aggregates(store, stream.minute(m), SETTINGS)
    pointer, _ = read_pointer(store)
    assert pointer is not None
    manifest = json.loads(store.get(pointer["manifest"]).data)
    store.put(manifest["stories"][0], b"PAR1 not really")
    listed = [e for e in run_doctor(store, stream.minute(5)) if e.key == manifest["stories"][0]]
    assert [(e.kind, e.action) for e in listed] == [("rank_aggregates", "--repair would: quarantine")]
    run_doctor(store, stream.minute(5), repair=True)
    view = update_aggregates(store, stream.minute(6), SETTINGS)
    assert view.summary["mode"] == "rebuilt"
    _assert_equal_to_rebuild(store)


def test_an_idle_minute_writes_nothing(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    stream = Stream(store)
    for m in range(4):
        now = stream.minute(m)
        update_aggregates(store, now, SETTINGS)
    before = store.list("state/rank/")
    view = update_aggregates(store, now + timedelta(seconds=30), SETTINGS)
    assert view.summary["unchanged"] is True and store.list("state/rank/") == before


def test_pages_read_their_members_from_the_cache_the_cycle_before_left(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    stream = Stream(store)
    for m in range(25):
        now = stream.minute(m)
        summary = publish_all(store, now, SETTINGS) if m >= 20 else update_aggregates(store, now, SETTINGS).summary
        assert summary.get("committed", True) is not False
    pointer, _ = read_pointer(store)
    assert pointer is not None
    manifest = json.loads(store.get(pointer["manifest"]).data)
    assert manifest["member_cache"]["layers"] == len(manifest["members"])
    rebuilt = aggregates_from_logs(store, now, SETTINGS)  # the same pages with no cache at all
    incremental = update_aggregates(store, now, SETTINGS, persist=False)
    assert incremental.members._member_cache is not None
    with_cache = compute_pages(store, now, SETTINGS, view=incremental)
    without = compute_pages(store, now, SETTINGS, view=rebuilt)
    assert dump_snapshot(with_cache.stories) == dump_snapshot(without.stories)
    assert incremental.counter.objects.get("member cache") == 1


def test_folds_and_member_reads_work_on_both_backends(store: ObjectStore) -> None:
    """On S3 the members are read a row group at a time through byte ranges (pyarrow's S3 filesystem)."""
    stream = Stream(store)
    for m in range(14):
        now = stream.minute(m)
        if m in (9, 13):
            publish_all(store, now, SETTINGS)
        else:
            update_aggregates(store, now, SETTINGS)
    _assert_equal_to_rebuild(store)
    view = update_aggregates(store, now, SETTINGS, persist=False)
    assert view.members._member_cache is not None
    assert _pages(store, now, incremental=True) == _pages(store, now, incremental=False)
