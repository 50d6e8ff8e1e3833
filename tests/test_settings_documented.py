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


@pytest.mark.parametrize("cls", _settings_classes(), ids=lambda c: c.__name__)
def test_every_settings_class_reads_the_env_file(cls: type[BaseSettings]) -> None:
    assert cls.model_config.get("env_file") == ".env", f"{cls.__name__} ignores .env"


def test_serving_and_profile_settings_come_from_the_env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("NEWSROOM_SERVING_HMAC_KEY", "NEWSROOM_SERVING_PORT", "NEWSROOM_PROFILES_HALF_LIFE_HOURS",
                     "NEWSROOM_SERVING_PROFILES_PATH"):
        monkeypatch.delenv(variable, raising=False)
    (tmp_path / ".env").write_text("NEWSROOM_SERVING_HMAC_KEY=k" + "0" * 40 + "\nNEWSROOM_SERVING_PORT=18099\n"
                                   "NEWSROOM_SERVING_PROFILES_PATH=p/readers.sqlite3\n"
                                   "NEWSROOM_PROFILES_HALF_LIFE_HOURS=12\n")
    monkeypatch.chdir(tmp_path)
    serving_settings = serving.settings.ServingSettings()
    assert serving_settings.hmac_key is not None and serving_settings.hmac_key.get_secret_value() == "k" + "0" * 40
    assert serving_settings.port == 18099
    profiles = tasks.settings.ProfilesSettings()
    assert (profiles.half_life_hours, profiles.profiles_path) == (12.0, "p/readers.sqlite3")
