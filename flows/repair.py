"""Repair flow: every 10 minutes, merge and split the stories active in the last six hours."""

from __future__ import annotations

from prefect import flow

from flows.cluster import run_language_writers
from tasks.repair import RepairInputsOnce, repair_language_task
from tasks.writer.run import WriterSummary


@flow(name="repair_stories")
def repair_stories(now: str | None = None, languages: list[str] | None = None,
                   except_languages: list[str] | None = None) -> list[WriterSummary]:
    """Run the repair of each language (all languages in the log by default, less ``except_languages``),
    through its writer's fence.

    One language's failure does not stop the others: its summary carries the ``error``, and the
    flow run fails once every language has run. The story snapshot and the registry every language
    reads are read once per run.
    """
    inputs = RepairInputsOnce()
    return run_language_writers("repair", lambda store, language, at: repair_language_task(store, language, at, inputs),
                                now, languages, except_languages=except_languages)
