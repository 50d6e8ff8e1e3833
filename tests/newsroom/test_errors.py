"""One error root: every exception newsroom raises on purpose is a NewsroomError, defined in its
package's ``errors.py`` (STYLE.md section 11, issue 17).

``replay`` stands outside: it is the publishers' side of the wire, imports nothing of newsroom's,
and its errors never reach a newsroom caller. Private exceptions (a leading ``_``) are a module's
own control flow and never leave it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from newsroom.errors import NewsroomError

PACKAGES = ("newsroom", "transforms", "warehouse", "tasks", "flows", "serving")


def _modules(package: str) -> list[str]:
    root = importlib.import_module(package)
    return [package] + sorted(
        info.name for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}.")
        if not info.name.endswith("__main__")
    )


def _exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for package in PACKAGES:
        for name in _modules(package):
            module = importlib.import_module(name)
            for _, value in inspect.getmembers(module, inspect.isclass):
                if (issubclass(value, BaseException) and value.__module__ == name
                        and not value.__name__.startswith("_")):
                    found[f"{name}.{value.__name__}"] = value
    return [found[k] for k in sorted(found)]


EXCEPTIONS = _exception_classes()


def test_every_package_raises_through_the_root() -> None:
    """Each package that raises on purpose has its own base on the root."""
    packages = {cls.__module__.split(".")[0] for cls in EXCEPTIONS}
    assert packages == {"newsroom", "transforms", "warehouse", "tasks", "flows", "serving"}


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_exception_is_on_the_one_root(cls: type[BaseException]) -> None:
    assert issubclass(cls, NewsroomError)


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_exception_lives_in_its_package_errors_module(cls: type[BaseException]) -> None:
    assert cls.__module__.endswith(".errors")


def test_the_old_roots_are_one() -> None:
    from transforms.errors import TransformError
    from warehouse.errors import NewsroomError as WarehouseRoot

    assert WarehouseRoot is NewsroomError
    assert issubclass(TransformError, NewsroomError)
