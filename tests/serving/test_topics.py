"""Topic pages (serving/topics.py): the same bytes whichever spelling of a topic is asked first (the
serving review's D5).
"""

from __future__ import annotations

from pathlib import Path

from conftest import (
    settings_for,
)
from fastapi.testclient import TestClient

from serving.app import create_app
from warehouse.store import ObjectStore

# -- D5: a topic's bytes do not depend on which spelling was asked first -------------------------


def test_topic_pages_are_built_from_the_normalised_topic(local_store: ObjectStore, tmp_path: Path) -> None:
    with TestClient(create_app(local_store, settings_for(tmp_path))) as warm:
        assert warm.get("/v1/topics/TECHNOLOGY").status_code == 200
        after_upper = warm.get("/v1/topics/technology")
    with TestClient(create_app(local_store, settings_for(tmp_path / "fresh"))) as fresh:
        lower_first = fresh.get("/v1/topics/technology")
        upper_later = fresh.get("/v1/topics/Technology")
    assert after_upper.json()["topic_id"] == lower_first.json()["topic_id"] == "technology"
    assert after_upper.json()["label"] == "Technology"
    assert after_upper.headers["etag"] == lower_first.headers["etag"] == upper_later.headers["etag"]
    assert after_upper.content == lower_first.content == upper_later.content
