"""Load: publish a cycle's pages and story snapshot, its listings, Breaking events and feed boosts,
the live stream and the search index (the side effects are listed in ``tasks.rank``)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import TypedDict

from prefect import task
from prefect.cache_policies import NO_CACHE

from newsroom.times import parse_iso
from tasks import events
from tasks.aggregates.cycle import (
    record_member_cache,
)
from tasks.crashpoints import crash_point
from tasks.live import record_live_breaking
from tasks.rank.compute import RankedCycle, compute_rank_pages
from tasks.rank.extract import extract_rank_inputs
from tasks.search import publish_search
from tasks.settings import RankSettings
from transforms.pages import (
    POOL_SECTION,
    iso,
    validate_page,
    validate_pool,
)
from transforms.rank_pages import BreakingStory, RankOutput
from warehouse import layout
from warehouse.damage import collect_damage, describe_error, record_damage
from warehouse.errors import ObjectNotFoundError, PreconditionFailedError
from warehouse.pointers import PublishResult
from warehouse.schemas import LISTINGS_SCHEMA
from warehouse.snapshots import (
    dump_snapshot,
    publish_page,
    publish_stories,
)
from warehouse.store import ObjectStore
from warehouse.tables import content_segment_id, rows_to_table, write_segment

log = logging.getLogger(__name__)

def publish_computed(store: ObjectStore, output: RankOutput, now: datetime, settings: RankSettings,
                     elapsed: Callable[[], float] = lambda: 0.0) -> RankSummary:
    """Publish every page whose content changed; a refused version leaves the live one in place and
    its reason is recorded (the summary, a warning, and ``log/events/page.refused/``).

    A page (or the story snapshot) that is neither published, unchanged nor refused by validation
    (``stale: ...`` from a run older than the live version, or a lost pointer race) is counted in
    ``not_published`` with its reason and logged as a warning.

    The articles the story snapshot lists for the first time go to ``log/listings/`` once the page
    pointers moved, stamped ``now`` plus ``elapsed()`` (seconds since the cycle's ``now``): on the
    real clock, the moment they went live, which the freshness dashboard measures to (issue 31);
    a cycle at a replayed instant stays within seconds of it. Published pages are then announced
    as a ``newsroom.pages.published`` event.
    """

    def check(validator: Callable[..., str | None]
              ) -> Callable[[Mapping[str, object], Mapping[str, object] | None], str | None]:
        return lambda new, prev: validator(new, prev, min_stories=settings.min_page_stories,
                                           max_loss=settings.max_story_loss)

    results = {}
    # The story snapshot goes first, so every story a new page lists can already be opened; it also
    # holds every story of the pages live before (compute_pages), so a page that keeps its live
    # version below still opens. Pages go live only over a live story snapshot that holds them: when
    # it was refused (stale) or lost its race, this cycle's pages wait for a later one.
    story_result = publish_stories(store, dict(output.stories), now=now, validate=lambda new, prev: None)
    stories_live = story_result.published or story_result.reason == "unchanged"
    crash_point("rank.after_stories")
    for i, ((edition, section), page) in enumerate(sorted(output.pages.items())):
        if i == len(output.pages) // 2:
            crash_point("rank.mid_pages")
        if not stories_live:
            results[f"{edition}/{section}"] = PublishResult(layout.page_pointer_key(edition, section), 0, False,
                                                            f"{story_result.reason} (story snapshot)")
            continue
        validator = validate_pool if section == POOL_SECTION else validate_page
        result = publish_page(store, edition, section, page.to_json(), now=now, validate=check(validator),
                              before_pointer=lambda: crash_point("rank.before_pointer"))
        results[f"{edition}/{section}"] = result
        if result.reason.startswith("invalid"):
            log.warning("page_refused edition=%s section=%s reason=%s", edition, section, result.reason)
            write_event(store, "page.refused", f"{edition}.{section}.{now:%Y%m%dT%H%M%S}",
                         {"kind": "page.refused", "edition": edition, "section": section, "at": iso(now),
                          "version": result.version, "reason": result.reason})
    if story_result.published and output.listings:
        live_at = now + timedelta(seconds=max(0.0, elapsed()))
        rows = [dict(row, listed_at=live_at) for row in output.listings]
        table = rows_to_table(rows, LISTINGS_SCHEMA)
        write_segment(store, layout.listing_segment_key(now, content_segment_id(table)), table, LISTINGS_SCHEMA)
    published = sorted(k for k, r in results.items() if r.published)
    if published or story_result.published:
        events.emit(events.PAGES_PUBLISHED, events.resource_id("pages"),
                    {"as_of": iso(now), "published": published[:200], "pages": len(published),
                     "stories_version": story_result.version if story_result.published else None})
    not_published = {k: r.reason for k, r in [(layout.STORIES_PAGE, story_result), *sorted(results.items())]
                     if not r.published and r.reason != "unchanged" and not r.reason.startswith("invalid")}
    for page, reason in not_published.items():
        log.warning("page_not_published page=%s reason=%s", page, reason)
    return RankSummary(
        pages=len(output.pages),
        published=published,
        refused={k: r.reason for k, r in results.items() if r.reason.startswith("invalid")},
        not_published=not_published,
        stories=len(output.stories["stories"]),
        stories_version=story_result.version,
        breaking=[b["story_id"] for b in output.breaking],
    )


def write_event(store: ObjectStore, kind: str, event_id: str, payload: Mapping[str, object]) -> bool:
    """Write an event once (If-None-Match); False when it was written before."""
    try:
        store.put(layout.event_key(kind, event_id), dump_snapshot(payload), if_none_match=True,
                  content_type="application/json")
    except PreconditionFailedError:
        return False
    return True


class BreakingRecord(TypedDict):
    events: list[str]
    """The stories whose ``story.breaking`` event this cycle wrote (newly Breaking)."""
    boosted: list[str]
    boosts_stored: bool


def record_breaking(store: ObjectStore, breaking: Sequence[BreakingStory], now: datetime,
                    settings: RankSettings) -> BreakingRecord:
    """Write one ``story.breaking`` event per newly Breaking story and extend the feed boosts."""
    new_events = [b["story_id"] for b in breaking
                  if write_event(store, "story.breaking", b["story_id"],
                                  {"kind": "story.breaking", "detected_at": iso(now), **b})]
    wanted: dict[str, str] = {}
    for b in breaking:
        until = iso(parse_iso(b["breaking_since"]) + timedelta(hours=settings.boost_hours))
        assert until is not None
        for p in b["publisher_ids"]:
            wanted[p] = max(wanted.get(p, ""), until)
    now_s = iso(now)
    assert now_s is not None
    boosts_stored = False
    for _ in range(3):
        try:
            obj = store.get(layout.FEED_BOOSTS_KEY)
        except ObjectNotFoundError:
            current, etag = {}, None
        else:
            etag = obj.etag
            try:
                current = {str(p): str(u) for p, u in dict(json.loads(obj.data)).items()}
            except (ValueError, TypeError, RecursionError) as e:
                record_damage(layout.FEED_BOOSTS_KEY, f"corrupt: {describe_error(e)}",
                              "read as empty; replaced by this cycle's boosts")
                current = {}
        merged = {p: u for p, u in current.items() if u > now_s}
        for p, u in wanted.items():
            if u > now_s:
                merged[p] = max(merged.get(p, ""), u)
        if merged == current:
            boosts_stored = True
            break
        try:
            store.put(layout.FEED_BOOSTS_KEY, dump_snapshot(merged), if_match=etag, if_none_match=etag is None,
                      content_type="application/json")
            boosts_stored = True
            break
        except PreconditionFailedError:
            continue
    if not boosts_stored:  # the next cycle finds the stories Breaking still and tries again
        log.warning("feed_boosts_not_stored: lost 3 conditional puts; publishers %s", sorted(wanted))
    return BreakingRecord(events=new_events, boosted=sorted(wanted) if boosts_stored else [],
                          boosts_stored=boosts_stored)


class RankSummary(TypedDict, total=False):
    """What a rank cycle did (the flow's result, its log line and the run's artifact)."""

    standby: bool
    """The long-running rank publishes; this run did nothing."""
    pages: int
    published: list[str]
    refused: dict[str, str]
    not_published: dict[str, str]
    stories: int
    stories_version: int
    breaking: list[str]
    aggregates: dict[str, object]
    live_events: list[str]
    breaking_events: list[str]
    search: Mapping[str, object]
    damaged: list[dict[str, object]]


def publish_rank_pages(store: ObjectStore, cycle: RankedCycle, settings: RankSettings) -> RankSummary:
    """Publish what a cycle computed, record its member cache and Breaking stories, and build the
    search index.

    ``damaged`` in the summary names every object the cycle could not read and what it did
    instead (docs/store-faults.md): a corrupt segment left out, a damaged pointer or live version
    replaced by a new version, and so on; the rest of the cycle goes on (issue 16).
    """
    inputs, output, now, view = cycle.inputs, cycle.output, cycle.inputs.now, cycle.inputs.view
    with collect_damage() as damaged:
        record_member_cache(store, view)
        summary = publish_computed(store, output, now, settings, elapsed=lambda: time.monotonic() - inputs.started)
        summary["aggregates"] = {**view.summary, "bytes_read": view.counter.total}
        summary["live_events"] = record_live_breaking(store, output.breaking, now, output.stories["stories"])
        summary["breaking_events"] = record_breaking(store, output.breaking, now, settings)["events"]
        if layout.STORIES_PAGE not in summary["not_published"]:  # results may open only live stories
            summary["search"] = publish_search(store, view, output.stories, now, settings,
                                               summary["stories_version"])
    summary["damaged"] = [asdict(d) for d in (*inputs.damaged, *cycle.damaged, *damaged)]
    return summary


def publish_all(store: ObjectStore, now: datetime, settings: RankSettings) -> RankSummary:
    """One rank & publish cycle, extract → transform → load, without Prefect (``flows/rank.py``
    runs the same three steps as tasks)."""
    inputs = extract_rank_inputs(store, now, settings)
    return publish_rank_pages(store, compute_rank_pages(store, inputs, settings), settings)


@task(name="publish_rank_pages", retries=2, retry_delay_seconds=2, timeout_seconds=600, cache_policy=NO_CACHE)
def publish_rank_pages_task(store: ObjectStore, cycle: RankedCycle, settings: RankSettings) -> RankSummary:
    return publish_rank_pages(store, cycle, settings)
