"""Every setting is checked when a command starts: a bad one is one line naming its variable, exit 2 (#16)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

import serving.settings
import tasks.crashpoints
import tasks.settings
import warehouse.settings
from tasks.settings import SETTINGS_CLASSES, check_all_settings
from warehouse.settings import check_settings

REPO = Path(__file__).resolve().parents[1]
CLASSES = [*SETTINGS_CLASSES, serving.settings.ServingSettings, tasks.crashpoints.DebugSettings]


def _variable(cls: type[BaseSettings], name: str) -> str:
    alias = cls.model_fields[name].validation_alias
    return alias if isinstance(alias, str) else f"{cls.model_config.get('env_prefix', '')}{name}".upper()


def _numeric_fields() -> list[tuple[type[BaseSettings], str]]:
    return [(cls, name) for cls in CLASSES for name, field in cls.model_fields.items()
            if field.annotation in (int, float)]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for variable in list(os.environ):
        if variable.startswith("NEWSROOM_"):
            monkeypatch.delenv(variable)
    monkeypatch.chdir(tmp_path)  # no .env


def test_the_defaults_are_valid() -> None:
    check_all_settings()
    for cls in CLASSES:
        check_settings(cls)


@pytest.mark.parametrize(("cls", "name"), _numeric_fields(), ids=lambda v: v if isinstance(v, str) else v.__name__)
@pytest.mark.parametrize("value", ["-1", "nan", "inf", "", "ten"])
def test_no_number_setting_takes_a_negative_or_non_finite_value(monkeypatch: pytest.MonkeyPatch, cls: type[BaseSettings],
                                                                 name: str, value: str) -> None:
    variable = _variable(cls, name)
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError) as err:
        check_settings(cls)
    message = str(err.value)
    assert message.startswith(f"invalid setting {variable}: ") and "\n" not in message, message


ZERO_IS_WRONG = [
    "NEWSROOM_RANK_FRESHNESS_HALF_LIFE_HOURS", "NEWSROOM_PROFILES_HALF_LIFE_HOURS", "NEWSROOM_RANK_CYCLE_SECONDS",
    "NEWSROOM_RANK_COVERAGE_WINDOW_HOURS", "NEWSROOM_RANK_ACTIVE_HOURS", "NEWSROOM_RANK_SMOOTHING_CYCLES",
    "NEWSROOM_RANK_TOP_STORIES", "NEWSROOM_INGEST_MIN_INTERVAL_SECONDS", "NEWSROOM_INGEST_TIER1_MIN_INTERVAL_SECONDS",
    "NEWSROOM_INGEST_MAX_INTERVAL_SECONDS", "NEWSROOM_INGEST_TOTAL_TIMEOUT_SECONDS", "NEWSROOM_INGEST_MAX_WORKERS",
    "NEWSROOM_INGEST_HOST_RATE_PER_SECOND", "NEWSROOM_INGEST_MAX_FEED_BYTES", "NEWSROOM_SERVING_REFRESH_SECONDS",
    "NEWSROOM_SERVING_CLICK_TOKEN_TTL_SECONDS", "NEWSROOM_WEBSUB_LEASE_SECONDS", "NEWSROOM_WEBSUB_RENEW_FRACTION",
    "NEWSROOM_SCALE_INGEST_THREADS", "NEWSROOM_RANK_PUBLISHER_DAILY_SHARE_CAP",
]
OTHER_BAD = [
    ("NEWSROOM_WAREHOUSE_ROOT", ""),
    ("NEWSROOM_WAREHOUSE_ROOT", "   "),
    ("NEWSROOM_WAREHOUSE_ROOT", "s3://"),
    ("NEWSROOM_WAREHOUSE_ROOT", "gs://bucket/x"),
    ("NEWSROOM_WAREHOUSE_S3_ENDPOINT_URL", "localhost:8333"),
    ("NEWSROOM_WAREHOUSE_S3_REGION", ""),
    ("NEWSROOM_RANK_MAX_STORY_LOSS", "1.5"),
    ("NEWSROOM_RANK_BURST_AUTHORITY_FLOOR", "2"),
    ("NEWSROOM_RANK_MAX_CENTROID_COSINE", "0"),
    ("NEWSROOM_INGEST_MAX_INTERVAL_SECONDS", "60"),  # below the 300 s floor
    ("NEWSROOM_SCALE_INGEST_PROCESSES", "-1"),
    ("NEWSROOM_INGEST_ALLOWED_PRIVATE_NETWORKS", "10.0.0.0/33"),
    ("NEWSROOM_INGEST_CONTACT_URL", "mailto:ops@example.org"),
    ("NEWSROOM_INGEST_USER_AGENT", "news\u00e9room"),
    ("NEWSROOM_INGEST_MAX_REDIRECTS", "100"),
    ("NEWSROOM_WEBSUB_CALLBACK_BASE_URL", "newsroom.example"),
    ("NEWSROOM_WEBSUB_ENABLED", "maybe"),
    ("NEWSROOM_SCALE_DASK_SCHEDULER_ADDRESS", ""),
    ("NEWSROOM_SERVING_HOST", ""),
    ("NEWSROOM_SERVING_HMAC_KEY", "short"),
    ("NEWSROOM_SERVING_PORT", "70000"),
    ("NEWSROOM_SERVING_PROFILES_PATH", ""),
    ("NEWSROOM_DEBUG_CRASH_POINT", "rank.nowhere"),
]


@pytest.mark.parametrize(("variable", "value"), [(v, "0") for v in ZERO_IS_WRONG] + OTHER_BAD,
                         ids=[f"{v}={x}" for v, x in [(v, "0") for v in ZERO_IS_WRONG] + OTHER_BAD])
def test_a_bad_setting_is_one_line_naming_its_variable(monkeypatch: pytest.MonkeyPatch, variable: str,
                                                        value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError) as err:
        for cls in CLASSES:
            check_settings(cls)
    message = str(err.value)
    assert message.startswith(f"invalid setting {variable}: ") and "\n" not in message, message
    if "KEY" in variable or "SECRET" in variable:
        assert value not in message  # a secret's value is never echoed


def test_every_settings_class_is_checked_at_start() -> None:
    modules = [warehouse.settings, tasks.settings, serving.settings, tasks.crashpoints]
    found = {v for m in modules for v in vars(m).values()
             if isinstance(v, type) and issubclass(v, BaseSettings) and v.__module__ == m.__name__}
    assert found == set(CLASSES)


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NEWSROOM_")}
    return subprocess.run([sys.executable, *args], cwd=cwd, env={**clean, **env, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("command", "variable", "value"),
    [(["-m", "flows.cli", "health"], "NEWSROOM_WAREHOUSE_ROOT", ""),
     (["-m", "flows.cli", "sql", "select 1"], "NEWSROOM_RANK_FRESHNESS_HALF_LIFE_HOURS", "0"),
     (["-m", "flows.cli", "publishers", "export"], "NEWSROOM_INGEST_MIN_INTERVAL_SECONDS", "-5"),
     (["-m", "serving"], "NEWSROOM_SERVING_REFRESH_SECONDS", "0"),
     (["-m", "serving"], "NEWSROOM_WAREHOUSE_ROOT", "")],
    ids=["health-empty-root", "sql-zero-half-life", "export-negative-interval", "serve-zero-refresh",
         "serve-empty-root"],
)
def test_commands_stop_with_one_line_and_exit_2(tmp_path: Path, command: list[str], variable: str, value: str) -> None:
    done = _run(command, {variable: value}, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and variable in done.stderr, done.stderr
    assert not (tmp_path / "var").exists()  # nothing was created in the working directory


# No AWS credential source at all: no variables, no shared files, no instance metadata (which would also
# be an outbound request).
_NO_AWS = {"AWS_SHARED_CREDENTIALS_FILE": "missing/credentials", "AWS_CONFIG_FILE": "missing/config",
           "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.mark.parametrize(
    ("command", "env", "variable", "why"),
    [(["-m", "flows.cli", "publishers", "export"], {"NEWSROOM_WAREHOUSE_ROOT": "a-file"},
      "NEWSROOM_WAREHOUSE_ROOT", "is a file"),
     (["-m", "flows.cli", "health"], {"NEWSROOM_WAREHOUSE_ROOT": "a-file/store"},
      "NEWSROOM_WAREHOUSE_ROOT", "lies under"),
     (["-m", "flows.cli", "sql", "select 1"], {"NEWSROOM_WAREHOUSE_ROOT": "file://{tmp}/a-file"},
      "NEWSROOM_WAREHOUSE_ROOT", "is a file"),
     (["-m", "serving"], {"NEWSROOM_WAREHOUSE_ROOT": "a-file"}, "NEWSROOM_WAREHOUSE_ROOT", "is a file"),
     (["-m", "flows.cli", "publishers", "export"],
      {"NEWSROOM_WAREHOUSE_ROOT": "s3://news/x", "NEWSROOM_WAREHOUSE_S3_ENDPOINT_URL": "http://127.0.0.1:9", **_NO_AWS},
      "NEWSROOM_WAREHOUSE_ROOT", "needs credentials"),
     (["-m", "serving"], {"NEWSROOM_WAREHOUSE_ROOT": "s3://news/x", **_NO_AWS},
      "NEWSROOM_WAREHOUSE_ROOT", "needs credentials"),
     (["-m", "flows.cli", "health"],
      {"NEWSROOM_WAREHOUSE_ROOT": "s3://news/x", "NEWSROOM_WAREHOUSE_S3_ACCESS_KEY_ID": "AKIDONLY", **_NO_AWS},
      "NEWSROOM_WAREHOUSE_S3_SECRET_ACCESS_KEY", "unset while NEWSROOM_WAREHOUSE_S3_ACCESS_KEY_ID is set")],
    ids=["root-is-a-file", "root-under-a-file", "file-uri-is-a-file", "serve-root-is-a-file", "s3-no-credentials",
         "serve-s3-no-credentials", "s3-key-id-without-secret"],
)
def test_a_store_the_settings_cannot_open_is_one_line_and_exit_2(tmp_path: Path, command: list[str],
                                                                  env: dict[str, str], variable: str, why: str) -> None:
    (tmp_path / "a-file").write_text("not a folder\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env = {k: v.format(tmp=tmp_path) for k, v in env.items()}
    done = subprocess.run([sys.executable, *command], cwd=tmp_path, timeout=120, capture_output=True, text=True,
                          env={**{k: v for k, v in clean.items() if not k.startswith("NEWSROOM_")}, **env,
                               "PYTHONPATH": str(REPO)})
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and f"invalid setting {variable}: " in done.stderr and why in done.stderr, \
        done.stderr
    assert "AKIDONLY" not in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing was created
