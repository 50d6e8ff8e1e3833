"""Maintenance and rank's story aggregates (issue 15): segments are compacted only once the
aggregates folded them, and old aggregate objects are pruned without touching what they read."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from aggregates_stream import SETTINGS, Stream

from tasks.aggregates.compare import rebuilt_aggregates, stored_aggregates
from tasks.aggregates.cycle import update_aggregates
from warehouse import layout
from warehouse.aggregates import read_pointer
from warehouse.maintenance import compact_logs, is_compacted, prune_rank_aggregates
from warehouse.store import LocalStore, ObjectStore
from warehouse.tables import list_segments


def _writer_consumed_everything(store: ObjectStore) -> None:
    """A checkpoint of the one language's writer that has consumed every article segment and
    committed every change (maintenance's other condition)."""
    changes = list_segments(store, layout.STORY_CHANGES_PREFIX)
    end = max(int(k.rsplit("/", 1)[-1].removesuffix(".parquet")) for k in changes) + 1000
    checkpoint = {"offset": end, "state_key": None, "consumed": list_segments(store, layout.ARTICLES_PREFIX)}
    store.put(layout.story_checkpoint_key("en"), json.dumps(checkpoint).encode())


def test_segments_wait_for_the_aggregates_then_compact_and_the_aggregates_go_on(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    stream = Stream(store)
    for m in range(10):
        update_aggregates(store, stream.minute(m), SETTINGS)
    unread = [stream.minute(m) for m in range(10, 16)]  # written, not folded yet
    _writer_consumed_everything(store)
    now = unread[-1] + timedelta(days=1)
    compact_logs(store, now)
    articles = list_segments(store, layout.ARTICLES_PREFIX)
    waiting = [k for k in articles if not is_compacted(k)]
    assert len(waiting) == 6 and any(is_compacted(k) for k in articles)
    changes = list_segments(store, layout.STORY_CHANGES_PREFIX)
    assert sum(not is_compacted(k) for k in changes) >= 6 and any(is_compacted(k) for k in changes)
    for at in unread:
        update_aggregates(store, at, SETTINGS)
    stored = stored_aggregates(store, SETTINGS)
    assert stored is not None and stored == rebuilt_aggregates(store, stored.as_of, SETTINGS)
    compact_logs(store, now)
    assert all(is_compacted(k) for k in list_segments(store, layout.ARTICLES_PREFIX))
    view = update_aggregates(store, unread[-1] + timedelta(minutes=1), SETTINGS)
    assert view.summary["mode"] == "folded" and view.counter.objects.get("articles", 0) == 0


def test_old_aggregate_objects_are_pruned_and_what_the_live_ones_name_is_kept(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    stream = Stream(store)
    for m in range(40):
        update_aggregates(store, stream.minute(m), SETTINGS)
    before = len(store.list("state/rank/"))
    report = prune_rank_aggregates(store, keep=3)
    assert report.pruned_rank_aggregates > 0
    assert len(store.list("state/rank/")) == before - report.pruned_rank_aggregates
    pointer, _ = read_pointer(store)
    assert pointer is not None
    stored = stored_aggregates(store, SETTINGS)  # every table the live manifest names still reads
    assert stored is not None and stored == rebuilt_aggregates(store, stored.as_of, SETTINGS)
    view = update_aggregates(store, stream.minute(40), SETTINGS)
    assert view.summary["mode"] == "folded" and view.summary["committed"]
