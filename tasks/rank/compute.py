"""Transform: one cycle's pages from its inputs (:func:`transforms.rank_pages.rank_pages`).

The pure function does the work; this module gives it the settings as parameters and answers the
one failure that sends a cycle back to extract: a member layer that turns out unreadable only when
a page reads it (named in the damage record) makes the cycle rebuild the aggregates from the logs
and compute the pages again (issue 16: one bad object is never a reason to stop).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.aggregates.members import AggregateView
from tasks.rank.extract import RankInputs, read_rank_inputs
from tasks.rank.history import PageHistory
from tasks.rank.params import rank_params
from tasks.settings import RankSettings
from transforms.rank_pages import RankOutput, rank_pages
from warehouse.aggregates import AggregatesUnreadableError
from warehouse.damage import DamagedObject, collect_damage
from warehouse.store import ObjectStore


@dataclass(frozen=True, slots=True)
class RankedCycle:
    """A cycle's pages with the inputs they were computed from (load publishes both)."""

    inputs: RankInputs
    output: RankOutput
    damaged: tuple[DamagedObject, ...] = ()
    """What the transform could not read (members), and what it did instead."""


def rank_inputs(store: ObjectStore, inputs: RankInputs, settings: RankSettings, *, persist: bool) -> RankedCycle:
    """The pages of ``inputs``; rebuilt from the logs (and with ``persist`` committed) when a member
    layer they read is unreadable."""
    params = rank_params(settings)
    try:
        return RankedCycle(inputs, rank_pages(inputs.pages, inputs.now, params))
    except AggregatesUnreadableError:
        rebuilt = read_rank_inputs(store, inputs.now, settings, PageHistory(store), persist=persist,
                                   rebuild="aggregates unreadable", started=inputs.started)
        inputs = replace(rebuilt, damaged=inputs.damaged)  # what extract found stays recorded
        return RankedCycle(inputs, rank_pages(inputs.pages, inputs.now, params))


def compute_rank_pages(store: ObjectStore, inputs: RankInputs, settings: RankSettings) -> RankedCycle:
    """A cycle's pages, what it could not read recorded (a rebuild commits, as extract's fold did)."""
    with collect_damage() as damaged:
        cycle = rank_inputs(store, inputs, settings, persist=True)
    return RankedCycle(cycle.inputs, cycle.output, tuple(damaged))


def compute_pages(store: ObjectStore, now: datetime, settings: RankSettings,
                  history: PageHistory | None = None, view: AggregateView | None = None) -> RankOutput:
    """Every edition page, pool and the story snapshot as of ``now``, from the store alone; nothing
    is written.

    Args:
        view: The story aggregates as of ``now``; by default the stored ones with what the logs
            gained since, folded without writing anything (:func:`tasks.aggregates.cycle.update_aggregates`).
    """
    inputs = read_rank_inputs(store, now, settings, history, persist=False, view=view)
    if view is not None:
        return rank_pages(inputs.pages, now, rank_params(settings))
    return rank_inputs(store, inputs, settings, persist=False).output


@task(name="compute_rank_pages", retries=2, retry_delay_seconds=2, timeout_seconds=600, cache_policy=NO_CACHE)
def compute_rank_pages_task(store: ObjectStore, inputs: RankInputs, settings: RankSettings) -> RankedCycle:
    return compute_rank_pages(store, inputs, settings)
