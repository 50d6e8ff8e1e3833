"""Precompressed pages (#20): brotli and gzip made once per page version, chosen by Accept-Encoding,
each coding with its own strong ETag, ``Vary: Accept-Encoding``, and HEAD answering as GET does."""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator

import brotli
import pytest
from conftest import publish_fixture
from fastapi.testclient import TestClient

from serving.app import create_app
from serving.cache import SnapshotCache
from serving.encodings import choose_coding, encode_body
from serving.settings import ServingSettings
from warehouse import layout
from warehouse.store import LocalStore, ObjectStore

QUIET = ServingSettings(refresh_seconds=3600, profiles_path=":memory:", hmac_key="k" * 32)
PAGE = "/v1/editions/en-US/top"
DECODE = {"br": brotli.decompress, "gzip": gzip.decompress, None: lambda data: data}


@pytest.fixture
def store(tmp_path: object) -> ObjectStore:
    local = LocalStore(tmp_path)  # type: ignore[arg-type]
    publish_fixture(local)
    return local


@pytest.fixture
def client(store: ObjectStore) -> Iterator[TestClient]:
    with TestClient(create_app(store, QUIET)) as c:
        yield c


def _raw(client: TestClient, method: str, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and the body exactly as sent (the test client would decode it)."""
    with client.stream(method, path, headers=headers) as response:
        return response.status_code, dict(response.headers), b"".join(response.iter_raw())


@pytest.mark.parametrize(
    ("accept_encoding", "coding"),
    [
        ("gzip, deflate, br", "br"),
        ("br;q=0.5, gzip", "gzip"),
        ("x-gzip", "gzip"),
        ("identity", None),
        ("br;q=0, gzip;q=0", None),
        ("deflate", None),
        ("*", "br"),
        ("br;q=0, *;q=0.3", "gzip"),
    ],
    ids=["browser", "q-values", "x-gzip", "identity", "all-refused", "unknown-only", "wildcard", "wildcard-minus-br"],
)
def test_the_page_comes_in_the_coding_the_client_prefers(client: TestClient, store: ObjectStore,
                                                         accept_encoding: str, coding: str | None) -> None:
    status, headers, raw = _raw(client, "GET", PAGE, {"Accept-Encoding": accept_encoding})
    stored = store.get(layout.page_version_key("en-US", "top", 1)).data

    assert status == 200
    assert headers.get("content-encoding") == coding
    assert DECODE[coding](raw) == stored
    assert headers["etag"] == f'"{hashlib.sha256(raw).hexdigest()}"'  # strong: the bytes sent
    assert int(headers["content-length"]) == len(raw)
    assert headers["vary"] == "Accept-Encoding"
    if coding is not None:
        assert len(raw) * 3 < len(stored)


def test_each_coding_has_its_own_etag_and_revalidates_on_its_own(client: TestClient) -> None:
    etags = {c: _raw(client, "GET", PAGE, {"Accept-Encoding": c})[1]["etag"] for c in ("identity", "gzip", "br")}
    assert len(set(etags.values())) == 3

    status, headers, raw = _raw(client, "GET", PAGE, {"Accept-Encoding": "br", "If-None-Match": etags["br"]})
    assert (status, raw) == (304, b"")
    assert headers["etag"] == etags["br"] and headers["vary"] == "Accept-Encoding"
    assert "content-encoding" not in headers
    # a gzip ETag does not validate the brotli body the client now asks for
    status, headers, _ = _raw(client, "GET", PAGE, {"Accept-Encoding": "br", "If-None-Match": etags["gzip"]})
    assert status == 200 and headers["content-encoding"] == "br"


@pytest.mark.parametrize("accept_encoding", ["br", "gzip", "identity"])
def test_head_answers_as_get_in_every_coding(client: TestClient, accept_encoding: str) -> None:
    _, get_headers, raw = _raw(client, "GET", PAGE, {"Accept-Encoding": accept_encoding})
    status, head_headers, head_raw = _raw(client, "HEAD", PAGE, {"Accept-Encoding": accept_encoding})

    assert status == 200 and head_raw == b""
    assert {k: v for k, v in head_headers.items() if k != "date"} == {
        k: v for k, v in get_headers.items() if k != "date"}
    assert int(head_headers["content-length"]) == len(raw)


def test_stories_are_sent_as_they_are_and_do_not_vary(client: TestClient) -> None:
    status, headers, _ = _raw(client, "GET", "/v1/stories/0196f1c2a3b40001", {"Accept-Encoding": "br"})
    assert status == 200
    assert "content-encoding" not in headers and "vary" not in headers


def test_a_page_version_is_compressed_once(store: ObjectStore) -> None:
    cache = SnapshotCache(store)
    cache.refresh()
    first = cache.page("en-US", "top").body
    cache.refresh()  # the pointer has not moved: the same body, codings and all

    assert cache.page("en-US", "top").body is first
    assert [e.coding for e in first.encoded] == ["br", "gzip"]


@pytest.mark.parametrize(
    ("header", "available", "expected"),
    [
        (None, ["br", "gzip"], "identity"),
        ("", ["br", "gzip"], "identity"),
        ("gzip", ["br", "gzip"], "gzip"),
        ("GZIP;Q=0.8, BR;Q=0.9", ["br", "gzip"], "br"),
        ("br;q=1.5", ["br", "gzip"], "identity"),
        ("br;q=abc, gzip", ["br", "gzip"], "gzip"),
        ("identity;q=0, gzip;q=0", ["br", "gzip"], "identity"),
        ("br", [], "identity"),
        ("gzip;q=0.5, identity", ["gzip"], "identity"),
    ],
    ids=["absent", "empty", "gzip-only", "case-and-q", "q-out-of-range", "q-malformed", "nothing-acceptable",
         "nothing-available", "identity-preferred"],
)
def test_choose_coding(header: str | None, available: list[str], expected: str) -> None:
    assert choose_coding(header, available) == expected


def test_small_bodies_stay_uncompressed_and_codings_are_deterministic() -> None:
    assert encode_body(b'{"x": 1}') == ()
    body = b'{"stories": [' + b'{"title": "a headline", "snippet": "some words"},' * 100 + b"{}]}"
    assert encode_body(body) == encode_body(body)  # the same bytes, so the same ETags, on every replica
