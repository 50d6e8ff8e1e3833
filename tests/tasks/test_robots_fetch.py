"""Fetching robots.txt: the 500 KiB cap (RFC 9309 §2.5) and percent-normalised matching through RobotsCache."""

from __future__ import annotations

import gzip
from http.server import BaseHTTPRequestHandler

import pytest
from loopback import serve

from tasks.errors import FetchError
from tasks.http import fetch_url, make_client
from tasks.ingest.robots import RobotsCache
from tasks.settings import IngestSettings
from transforms.robots import ROBOTS_MAX_BYTES


def _settings() -> IngestSettings:
    return IngestSettings(  # type: ignore[call-arg]
        allow_private_addresses=True,
        connect_timeout_seconds=2,
        read_timeout_seconds=2,
        total_timeout_seconds=5,
        embeddings=False,
    )


def _handler(body: bytes, headers: dict[str, str] | None = None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

    return Handler


# 600 KB whose only rule is "Disallow: /private"; the rest is comments.
BIG_ROBOTS = b"User-agent: *\nDisallow: /private\n" + b"# padding padding padding padding padding\n" * 15000


def test_oversized_robots_txt_is_parsed_up_to_the_cap() -> None:
    assert len(BIG_ROBOTS) > ROBOTS_MAX_BYTES
    settings = _settings()
    with serve(_handler(BIG_ROBOTS)) as base, make_client(settings) as client:
        robots = RobotsCache(client, settings)
        assert robots.allows(f"{base}/private/x") is False
        assert robots.allows(f"{base}/news/article.html") is True


def test_rules_past_the_cap_are_ignored() -> None:
    settings = _settings()
    body = BIG_ROBOTS + b"Disallow: /news\n"
    with serve(_handler(body)) as base, make_client(settings) as client:
        robots = RobotsCache(client, settings)
        assert robots.allows(f"{base}/news/article.html") is True
        assert robots.allows(f"{base}/private/x") is False


@pytest.mark.parametrize(
    "url_path",
    ["/caf%C3%A9/story", "/caf%c3%a9/story", "/%63af%c3%a9/story"],
    ids=["upper", "lower", "unreserved"],
)
def test_percent_escapes_in_the_url_do_not_bypass_disallow(url_path: str) -> None:
    settings = _settings()
    with (
        serve(_handler("User-agent: *\nDisallow: /café/\n".encode())) as base,
        make_client(settings) as client,
    ):
        robots = RobotsCache(client, settings)
        assert robots.allows(f"{base}{url_path}") is False
        assert robots.allows(f"{base}/cafe/story") is True


@pytest.mark.parametrize("encoding", [None, "gzip"])
def test_fetch_url_truncates_at_the_cap_when_asked(encoding: str | None) -> None:
    text = b"0123456789" * 10_000
    wire = gzip.compress(text) if encoding else text
    headers = {"Content-Encoding": encoding} if encoding else {}
    settings = _settings()
    with serve(_handler(wire, headers)) as base, make_client(settings) as client:
        cut = fetch_url(client, f"{base}/robots.txt", settings, max_bytes=12_345, is_truncating=True)
        whole = fetch_url(client, f"{base}/robots.txt", settings, max_bytes=len(text), is_truncating=True)
        with pytest.raises(FetchError) as err:
            fetch_url(client, f"{base}/robots.txt", settings, max_bytes=12_345)
    assert cut.status == 200
    assert cut.body == text[:12_345]
    assert whole.body == text
    assert err.value.kind == "too_large"
