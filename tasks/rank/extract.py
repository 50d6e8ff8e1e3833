"""Extract: what one rank cycle reads, as of ``now``.

The story aggregates (folded with what the logs gained, and with ``persist`` committed:
``tasks.aggregates.cycle.update_aggregates``), the registry they were folded with, and the page
versions live just before ``now`` (``tasks.rank.history.PageHistory``): the previous version of each
page (stability, and the stories the story snapshot keeps) and each edition's previous pool (the
day's representative impressions). Members and earlier story snapshots are read on demand by the
transform, through the same view and history.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.aggregates.cycle import update_aggregates
from tasks.aggregates.members import AggregateView
from tasks.rank.history import PageHistory
from tasks.settings import RankSettings
from transforms.page_json import PublishedPage
from transforms.pages import POOL_SECTION
from transforms.rank_pages import PageInputs, editions_of
from warehouse.damage import DamagedObject, collect_damage
from warehouse.store import ObjectStore


@dataclass(frozen=True, slots=True)
class RankInputs:
    """One cycle's inputs: the transform's (``pages``) and what load needs besides (the view, to
    record the member cache and build the search index)."""

    now: datetime
    view: AggregateView
    history: PageHistory
    pages: PageInputs
    started: float
    """``time.monotonic()`` when the cycle began: listings are stamped with the moment pages went live."""
    damaged: tuple[DamagedObject, ...] = ()
    """What extract could not read, and what it did instead."""


def read_live_pages(history: PageHistory, now: datetime, editions: set[str]) -> dict[tuple[str, str], PublishedPage]:
    """The version of every page live just before ``now``, and the live pool of each of ``editions``."""
    live: dict[tuple[str, str], PublishedPage] = {}
    for edition, section in history.pages():
        if section == POOL_SECTION and edition not in editions:
            continue
        page = history.live_at(edition, section, now, strict=True)
        if page is not None:
            live[(edition, section)] = page
    return live


def read_rank_inputs(store: ObjectStore, now: datetime, settings: RankSettings, history: PageHistory | None = None,
                     *, persist: bool, view: AggregateView | None = None, rebuild: str | None = None,
                     started: float | None = None) -> RankInputs:
    """Read one cycle's inputs as of ``now``.

    Args:
        persist: Commit the fold of the aggregates (False: compute it only).
        view: The story aggregates as of ``now``, already read (``newsroom rank --as-of`` folds them
            from the whole log); by default the stored ones with what the logs gained since.
        rebuild: Rebuild the aggregates, for this reason (a member layer turned out unreadable).
    """
    started = time.monotonic() if started is None else started
    history = history or PageHistory(store)
    if view is None:
        view = update_aggregates(store, now, settings, persist=persist, rebuild=rebuild)
    editions = set(editions_of(view.registry.publishers)["edition"].to_list())
    pages = PageInputs(stories=view.stories, publishers=view.registry.publishers, aliases=view.aliases,
                       members=view.members, live_pages=read_live_pages(history, now, editions), past=history)
    return RankInputs(now, view, history, pages, started)


def extract_rank_inputs(store: ObjectStore, now: datetime, settings: RankSettings) -> RankInputs:
    """A cycle's inputs, its fold of the aggregates committed; what it could not read is recorded."""
    with collect_damage() as damaged:
        inputs = read_rank_inputs(store, now, settings, persist=True)
    return replace(inputs, damaged=tuple(damaged))


@task(name="extract_rank_inputs", retries=2, retry_delay_seconds=2, timeout_seconds=600, cache_policy=NO_CACHE)
def extract_rank_inputs_task(store: ObjectStore, now: datetime, settings: RankSettings) -> RankInputs:
    return extract_rank_inputs(store, now, settings)
