"""Every Prefect task is named after the plain function it wraps, so the Prefect UI shows the code's words (#17).

The task object is ``<name>_task``, its Prefect name is ``<name>``, and ``<name>`` is the plain
function it calls (defined in the module or imported into it), which the tests call directly.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import FunctionType

import prefect
import pytest

import tasks


def _tasks() -> list[tuple[str, str, prefect.Task]]:  # type: ignore[type-arg]
    found = []
    for info in pkgutil.walk_packages(tasks.__path__, "tasks."):
        module = importlib.import_module(info.name)
        for attribute, value in vars(module).items():
            if isinstance(value, prefect.Task) and value.fn.__module__ == module.__name__:
                found.append((module.__name__, attribute, value))
    return found


TASKS = _tasks()


def test_the_walk_finds_the_pipeline_tasks() -> None:
    names = {task.name for _, _, task in TASKS}
    assert {"plan_due_feeds", "poll_shard", "commit_ingest", "load_robots_cache"} <= names, names


@pytest.mark.parametrize(("module", "attribute", "task"), TASKS, ids=[f"{m}.{a}" for m, a, _ in TASKS])
def test_a_task_has_the_name_of_the_function_it_wraps(module: str, attribute: str, task: prefect.Task) -> None:  # type: ignore[type-arg]
    assert attribute == f"{task.name}_task", f"{module}.{attribute} is named {task.name!r} in the Prefect UI"
    wrapped = getattr(importlib.import_module(module), task.name, None)
    assert isinstance(wrapped, FunctionType), f"{module} has no plain function {task.name!r} for the task to wrap"
    assert task.name in task.fn.__code__.co_names, f"{attribute} does not call {task.name}"
