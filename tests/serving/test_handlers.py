"""Error answers (serving/handlers.py): a 4xx never echoes input that JSON cannot render or that
names what a client asked for (the serving review's D6 and D10, #16).
"""

from __future__ import annotations

import json

import pytest
from conftest import (
    sign_in,
)
from fastapi.testclient import TestClient

# -- D6 and D10: errors never echo input they cannot render --------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/session", b'{"reader":"\\ud800"}'),
        ("/v1/click-token", b'{"article_id":"a","surface":"\\ud800"}'),
        ("/v1/click-token", b'{"article_id":"a","position":1e400}'),
        ("/v1/click-token", b'{"article_id":"a","position":NaN}'),
        ("/v1/click-token", b'{"article_id":"a","position":-Infinity}'),
        ("/v1/me/hide", b'{"source":"a","\\udc00":1}'),
        ("/v1/click-token", b'{"article_id":'),
    ],
    ids=["session-surrogate", "surface-surrogate", "position-inf", "position-nan", "position-minus-inf",
         "surrogate-key", "truncated-json"],
)
def test_validation_errors_are_422_without_echoing_input(client: TestClient, path: str, body: bytes) -> None:
    headers = {"content-type": "application/json", **sign_in(client, "alice")}
    response = client.post(path, content=body, headers=headers)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail
    assert all(set(error) == {"type", "loc", "msg"} for error in detail)
    response.content.decode("utf-8")  # valid UTF-8, no lone surrogates


def test_validation_errors_keep_fastapis_shape(client: TestClient) -> None:
    response = client.post("/v1/click-token", json={"article_id": "a", "position": -1})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "position"] and error["type"] == "greater_than_equal"


@pytest.mark.parametrize("article_id", ["\ud800", "<script>", "no-such-article"], ids=["surrogate", "markup", "plain"])
def test_unknown_article_is_404_without_echoing_the_id(client: TestClient, article_id: str) -> None:
    body = json.dumps({"article_id": article_id}).encode()  # ASCII-escaped, as a client would send it
    response = client.post("/v1/click-token", content=body, headers={"content-type": "application/json"})
    assert response.status_code in (404, 422)
    assert article_id not in response.text
    if response.status_code == 404:
        assert response.json() == {"detail": "no live story lists this article"}


@pytest.mark.parametrize(
    ("path", "echo"),
    [
        ("/v1/editions/zz-ZZ/top", "zz-ZZ"),
        ("/v1/editions/en-US/no-such-section-xyz", "no-such-section-xyz"),
        ("/v1/stories/no-such-story-xyz", "no-such-story-xyz"),
        ("/v1/topics/no-such-topic-xyz?edition=en-US", "no-such-topic-xyz"),
    ],
    ids=["edition", "section", "story", "topic"],
)
def test_a_404_does_not_echo_the_id(client: TestClient, path: str, echo: str) -> None:
    """docs/readers.md: "404s do not echo ids" (#16)."""
    response = client.get(path)
    assert response.status_code == 404, response.text
    assert echo not in response.text and echo.lower() not in response.text.lower()
    assert response.json()["detail"]
