"""HEAD on every GET route (RFC 9110 section 9.3.2), and the favicon (issue 18)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import flush_clicks
from fastapi.testclient import TestClient

HIDDEN_GET_PATHS = ["/", "/favicon.ico", "/static/app.js", "/static/favicon.svg"]
"""GET routes the OpenAPI document leaves out (the reader page and its assets)."""

STORY = "0196f1c2a3b40001"
CONCRETE = {
    "/v1/editions/{edition}/{section}": "/v1/editions/en-US/top",
    "/v1/editions/{edition}/{section}/version": "/v1/editions/en-US/world/version",
    "/v1/topics/{topic_id}": "/v1/topics/world",
    "/v1/stories/{story_id}": f"/v1/stories/{STORY}",
    "/v1/top": "/v1/top?locale=en-GB",
    "/v1/feed": "/v1/feed?edition=en-US",
    "/v1/editions/{edition}/{section}/feed.atom": "/v1/editions/en-US/top/feed.atom",
    "/v1/topics/{topic_id}/feed.atom": "/v1/topics/world/feed.atom",
}
VARYING = {"date", "x-click-logged"}


@pytest.fixture
def session(client: TestClient) -> Iterator[dict[str, str]]:
    token = client.post("/v1/session", json={"reader": "alice"}).json()["token"]
    yield {"Authorization": f"Bearer {token}"}


def _get_paths(client: TestClient) -> list[str]:
    spec = client.get("/openapi.json").json()
    return sorted(path for path, ops in spec["paths"].items() if "get" in ops)


def test_every_get_route_of_the_openapi_document_is_covered(client: TestClient) -> None:
    documented = set(_get_paths(client)) - {"/r/{token}"}  # below, with a real token
    templated = {p for p in documented if "{" in p}
    assert templated <= CONCRETE.keys(), f"give these a concrete path: {sorted(templated - CONCRETE.keys())}"


@pytest.mark.parametrize("path", [
    "/v1/editions", "/v1/editions/en-US/top", "/v1/editions/en-US/world/version", "/v1/top?locale=en-GB",
    "/v1/topics/world", f"/v1/stories/{STORY}", "/v1/stories/0196f1c2a3b40999", "/v1/stories/no-such-story",
    "/v1/me", "/v1/feed?edition=en-US", "/healthz", "/openapi.json", *HIDDEN_GET_PATHS,
    "/v1/editions/en-US/top/feed.atom", "/v1/topics/world/feed.atom", "/v1/search?q=sea", "/v1/search/feed.atom?q=sea",
    "/v1/subscriptions", "/v1/live/en-US", "/v1/me/live?edition=en-US",
])
def test_head_answers_what_get_answers_without_the_body(client: TestClient, session: dict[str, str],
                                                        path: str) -> None:
    headers = session if path.startswith(("/v1/me", "/v1/feed", "/v1/subscriptions")) else {}
    if path.startswith(("/v1/live", "/v1/me/live")):  # a stream never ends: its HEAD answers at once
        head = client.head(path, headers=headers)
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-type"].startswith("text/event-stream")
        return
    get = client.get(path, headers=headers, follow_redirects=False)
    head = client.head(path, headers=headers, follow_redirects=False)

    assert head.status_code == get.status_code != 405
    assert head.content == b""
    assert {k: v for k, v in head.headers.items() if k not in VARYING} == {
        k: v for k, v in get.headers.items() if k not in VARYING}
    if get.status_code == 200 and "etag" in get.headers and "content-encoding" not in get.headers:
        assert int(head.headers["content-length"]) == len(get.content)


def test_a_conditional_head_revalidates_like_get(client: TestClient) -> None:
    path = "/v1/editions/en-US/top"
    get = client.get(path)
    head = client.head(path, headers={"If-None-Match": get.headers["etag"]})

    assert head.status_code == 304
    assert head.headers["etag"] == get.headers["etag"]
    assert head.headers["cache-control"] == get.headers["cache-control"]


def test_head_on_a_click_link_redirects_but_logs_no_click(client: TestClient) -> None:
    minted = client.post("/v1/click-token", json={"article_id": f"{STORY}-a0"}).json()["click_url"]

    head = client.head(minted, follow_redirects=False)
    assert head.status_code == 302
    assert head.headers["x-click-logged"] == "false"
    assert flush_clicks(client) == 0

    get = client.get(minted, follow_redirects=False)
    assert get.headers["location"] == head.headers["location"]
    assert get.headers["x-click-logged"] == "buffered"
    assert flush_clicks(client) == 1


def test_the_favicon_is_an_icon_the_page_links(client: TestClient) -> None:
    icon = client.get("/favicon.ico")

    assert icon.status_code == 200
    assert icon.headers["content-type"] == "image/vnd.microsoft.icon"
    assert icon.content[:4] == b"\x00\x00\x01\x00"  # an ICO directory (type 1: icon)
    assert icon.headers["cache-control"] == "public, max-age=86400"
    assert icon.content == (Path(__file__).parents[2] / "serving" / "static" / "favicon.ico").read_bytes()
    index = client.get("/").text
    assert 'rel="icon" href="/favicon.ico"' in index
