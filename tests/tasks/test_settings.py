"""Settings passed in, never written to the environment (issue 17): what ``use_settings`` puts in
effect is what every getter, the configured store and the tasks Prefect runs on its thread pool
read, and the environment is the same before, during and after."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tasks.settings import (
    PipelineSettings,
    current_settings,
    get_ingest_settings,
    get_profiles_settings,
    get_rank_settings,
    get_scale_settings,
    get_websub_settings,
    use_settings,
)
from tasks.storage import configured_store
from warehouse.store import LocalStore


def _demo_like(root: Path) -> PipelineSettings:
    return PipelineSettings.from_environment().with_store(str(root)).with_private_addresses()


def test_settings_in_effect_answer_every_getter_and_open_their_own_store(tmp_path: Path) -> None:
    environment = dict(os.environ)
    settings = _demo_like(tmp_path / "demo-store")
    with use_settings(settings):
        assert get_ingest_settings() is settings.ingest and settings.ingest.allow_private_addresses
        assert get_rank_settings() is settings.rank
        assert get_scale_settings() is settings.scale
        assert get_websub_settings() is settings.websub
        assert get_profiles_settings() is settings.profiles
        assert current_settings() is settings
        store = configured_store()
        assert isinstance(store, LocalStore) and store.root == (tmp_path / "demo-store").resolve()
        assert configured_store() is store  # opened once
        assert dict(os.environ) == environment
    assert dict(os.environ) == environment


def test_outside_the_block_the_environment_answers_again(tmp_path: Path) -> None:
    before = get_ingest_settings()
    with use_settings(_demo_like(tmp_path / "a")):
        with use_settings(_demo_like(tmp_path / "b")):
            assert configured_store().root == (tmp_path / "b").resolve()  # type: ignore[attr-defined]
        assert configured_store().root == (tmp_path / "a").resolve()  # type: ignore[attr-defined]
    assert get_ingest_settings() is before


def test_a_store_root_that_names_no_store_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="NEWSROOM_WAREHOUSE_ROOT"):
        PipelineSettings.from_environment().with_store("  ")


@pytest.mark.integration
def test_tasks_on_prefects_thread_pool_read_the_settings_in_effect(prefect_harness: None, tmp_path: Path) -> None:
    from prefect import flow, task

    @task
    def root_seen(_: int) -> str:
        return str(configured_store().root)  # type: ignore[attr-defined]

    @task
    def private_allowed(_: int) -> bool:
        return get_ingest_settings().allow_private_addresses

    @flow
    def probe() -> tuple[list[str], list[bool]]:
        roots = root_seen.map(range(4))
        allowed = private_allowed.map(range(4))
        return [r.result() for r in roots], [a.result() for a in allowed]

    with use_settings(_demo_like(tmp_path / "flow-store")):
        roots, allowed = probe()
    assert roots == [str((tmp_path / "flow-store").resolve())] * 4
    assert allowed == [True] * 4
