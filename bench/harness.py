"""What every bench shares: the same-run baseline, the machine line, the last-line JSON object.

A bench's figure is a ratio against a baseline doing the same work in the same run, because on a
shared machine two runs of the same code minutes apart can differ by 20% or more. This module holds
the pieces the benches used to repeat:

- timing: :func:`timed` (wall and CPU seconds of one call), :func:`best_of` (the best of a few
  repeats), :func:`interleaved_rounds` (candidate and baseline alternately, round after round, so a
  slow spell of the machine hits both alike) and :func:`ratio_spread` (the median of the per-round
  ratios, with the lowest and highest);
- the machine: :func:`load_average` and :func:`machine_line`, printed beside every figure so a
  reader can tell a loaded run from an idle one;
- the output: :func:`print_json_line`, the one JSON object a bench prints last (bench/headline.py
  reads it), and :func:`bench_command`, the command line of a bench run as a child process;
- the code under test: :func:`export_revision` and :func:`import_checkout`, which make another
  revision's packages the ones imported, for the A/B benches that time two revisions of the code,
  and :func:`checkout_revision`, the commit a result names;
- the rest they all need: :func:`run_clients` (a load bench's client threads), :func:`percentile`
  (nearest rank) and :data:`CORPUS_DIR` (the shared corpus the benches read by default).

Run every bench from the repository root as ``python -m bench.<name>``.
"""

from __future__ import annotations

import gc
import importlib.abc
import importlib.machinery
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Generic, TypeVar

REPO = Path(__file__).resolve().parents[1]
"""The checkout the benches belong to (the folder ``python -m bench.<name>`` runs from)."""
CORPUS_DIR = REPO.parent / "shared" / "corpus"
"""The shared corpus beside the checkout, the benches' default input."""
PROJECT_PACKAGES = ("newsroom", "flows", "tasks", "transforms", "warehouse", "serving", "replay")
"""The top-level packages of a checkout (pyproject's ``root_packages``)."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Timing(Generic[T]):
    """Wall and CPU (``process_time``) seconds of one call, and what it returned.

    CPU time is the figure to compare on a shared machine: wall time there measures the share of a
    core the run was given.
    """

    wall: float
    cpu: float
    result: T


def timed(work: Callable[[], T]) -> Timing[T]:
    """Run ``work`` once; its wall and CPU seconds and its result."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return Timing(time.perf_counter() - wall, time.process_time() - cpu, result)


def best_of(work: Callable[[], T], repeats: int, *, cpu: bool = False,
            collect: bool = True) -> tuple[float, T]:
    """The fewest seconds ``work`` took over ``repeats`` runs (wall, or CPU with ``cpu``), and
    what its last run returned.

    The best run is the one the machine disturbed least. ``collect`` runs the garbage collector
    before each run, so one run's garbage is not charged to the next.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")
    clock = time.process_time if cpu else time.perf_counter
    best = float("inf")
    for _ in range(repeats):
        if collect:
            gc.collect()
        start = clock()
        result = work()
        best = min(best, clock() - start)
    return best, result


def interleaved_rounds(sides: Mapping[str, Callable[[int], T]], rounds: int) -> dict[str, list[T]]:
    """Each side's measurement per round, the sides run alternately within every round.

    ``sides`` maps a name to a callable taking the round's index and returning that round's figure
    (seconds spent, requests served...). In even rounds the sides run in the order given, in odd
    rounds in the reverse order, so neither side always runs first (warm caches, a CPU that has
    just been given back).
    """
    names = list(sides)
    out: dict[str, list[T]] = {name: [] for name in names}
    for index in range(rounds):
        for name in names if index % 2 == 0 else reversed(names):
            out[name].append(sides[name](index))
    return out


@dataclass(frozen=True, slots=True)
class RatioSpread:
    """The per-round ratios of a candidate to its baseline, read as their median and range."""

    ratios: tuple[float, ...]

    def describe(self, unit: str = "rounds", digits: int = 3) -> str:
        """``median [low..high] over N rounds`` (or other units), the way every bench prints a ratio.

        The median is the figure to read; the range says how much the machine moved it.
        """
        median, low, high = statistics.median(self.ratios), min(self.ratios), max(self.ratios)
        return f"{median:.{digits}f} [{low:.{digits}f}..{high:.{digits}f}] over {len(self.ratios)} {unit}"


def ratio_spread(numerators: Sequence[float], denominators: Sequence[float]) -> RatioSpread:
    """The ratios ``numerators[i] / denominators[i]`` of the rounds of one run."""
    ratios = tuple(n / d for n, d in zip(numerators, denominators, strict=True))
    if not ratios:
        raise ValueError("no rounds to compare")
    return RatioSpread(ratios)


def run_clients(client: Callable[[int], None], clients: int) -> float:
    """Run ``client(k)`` for ``k`` in ``range(clients)``, each in a thread of its own, all at
    once; the wall seconds from the first start to the last end (the load benches' clients)."""
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` by nearest rank (NaN when there are none).

    Nearest rank, not interpolated: every figure is one that was measured.
    """
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages, rounded to two places."""
    return [round(value, 2) for value in os.getloadavg()]


def machine_line() -> str:
    """``N cores, load average a b c``: printed with every result, as the machine is shared.

    The cores are the ones this process may run on (fewer than the machine's under ``taskset``).
    """
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    return f"{len(os.sched_getaffinity(0))} cores, load average {load}"


def print_json_line(figures: object, **dumps: object) -> None:
    """Print the bench's figures as one JSON object on one line, the last of its output.

    bench/headline.py and the tests read that line (the last line starting with ``{``), so a
    bench prints nothing after it. ``dumps`` goes to :func:`json.dumps` (``default=str`` for
    values JSON has no type for).
    """
    print(json.dumps(figures, **dumps), flush=True)  # type: ignore[arg-type]


def bench_command(name: str, *args: str) -> list[str]:
    """The command running bench ``name`` in a child process (from :data:`REPO` as its folder)."""
    return [sys.executable, "-m", f"bench.{name}", *args]


def checkout_revision() -> tuple[str, bool]:
    """This checkout's commit (``unknown`` outside git) and whether tracked files have changes.

    Printed with the figures, so a result names the code it measured.
    """
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()
    status = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True, check=False).stdout
    return commit or "unknown", bool(status.strip())


def export_revision(rev: str, into: Path) -> str:
    """The files of git revision ``rev`` of this checkout, written under ``into``; returns its commit.

    The baseline of an A/B bench: ``into`` is then given to :func:`import_checkout`.
    """
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                            check=True, capture_output=True, text=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit],
                             check=True, capture_output=True).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return commit


class _CheckoutFinder(importlib.abc.MetaPathFinder):
    """Finds the named top-level packages under one folder, before anywhere else."""

    def __init__(self, root: Path, names: Iterable[str]) -> None:
        self.root = str(root)
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None  # submodules are found through their package's own __path__
        return importlib.machinery.PathFinder.find_spec(fullname, [self.root])


def import_checkout(root: Path, names: Iterable[str] = PROJECT_PACKAGES) -> None:
    """From now on, import the top-level packages or modules ``names`` from the folder ``root``.

    The A/B benches time two revisions of the code (``--code-root``, ``--baseline-rev``): the one
    under ``root`` (a checkout, or a ``git archive`` of one) must be the one imported, while the
    bench itself stays this checkout's. A name ``root`` does not hold is imported as usual. The
    same serves a bench that drives the pipeline through a test harness of ``tests/``, whose
    helpers import each other by their bare names. Nothing else is looked up in ``root``: not
    ``bench``, and not the folders of ``tests/`` that are named like the packages.

    Raises:
        RuntimeError: one of the packages was imported already, from wherever it was found.
    """
    names = tuple(names)
    loaded = sorted(name for name in names if name in sys.modules)
    if loaded:
        raise RuntimeError(f"{', '.join(loaded)} imported before choosing the checkout {root}")
    sys.meta_path.insert(0, _CheckoutFinder(root.resolve(), names))
