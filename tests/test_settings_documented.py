"""Every setting is documented in .env.example, so a newcomer can see the whole surface in one file."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

import serving.settings
import tasks.crashpoints
import tasks.profiles
import tasks.settings
import warehouse.settings

REPO = Path(__file__).resolve().parents[1]
MODULES = [warehouse.settings, tasks.settings, serving.settings, tasks.profiles]


def _settings_classes() -> list[type[BaseSettings]]:
    found = []
    for module in MODULES:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseSettings) and value is not BaseSettings \
                    and value.__module__ == module.__name__:
                found.append(value)
    return found


@pytest.mark.parametrize("cls", _settings_classes(), ids=lambda c: c.__name__)
def test_every_setting_is_in_env_example(cls: type[BaseSettings]) -> None:
    example = (REPO / ".env.example").read_text()
    prefix = cls.model_config.get("env_prefix", "")
    for name, field in cls.model_fields.items():
        variable = field.validation_alias if isinstance(field.validation_alias, str) else f"{prefix}{name}".upper()
        assert variable in example, f"{variable} is not documented in .env.example"
        assert field.description, f"{cls.__name__}.{name} has no description"


def test_debug_settings_stay_out_of_the_example() -> None:
    assert "NEWSROOM_DEBUG_" not in (REPO / ".env.example").read_text()
    assert tasks.crashpoints.DebugSettings.model_fields["crash_point"].default is None
