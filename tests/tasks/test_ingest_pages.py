"""One ingest cycle against a real loopback publisher: page charset from HTTP, capped titles, and
items without a link recorded instead of dropped silently."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from loopback import serve

from tasks.http import fetch_url, make_client
from tasks.ingest.article import PageError, build_article_row
from tasks.ingest.commit import commit_ingest
from tasks.ingest.plan import FeedJob, plan_due_feeds
from tasks.ingest.poll import poll_shard
from tasks.registry import import_publishers
from tasks.settings import IngestSettings
from transforms.feeds import TITLE_MAX_CHARS, FeedItem, parse_feed
from transforms.records import FeedState
from warehouse.store import LocalStore
from warehouse.tables import parquet_bytes_to_table

pytestmark = pytest.mark.integration

NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
RU_TITLE = "Новости дня: правительство объявило новый бюджет"
RU_LEDE = "Правительство объявило сегодня новый бюджет на следующий год."
BODY_TEXT = "The minister said the budget would rise. " * 500  # 20,500 characters


def _feed(base: str) -> bytes:
    return (
        '<?xml version="1.0"?><rss version="2.0"><channel><title>Herald</title>'
        f"<item><guid>ru</guid><title>ru</title><link>{base}/ru</link></item>"
        f"<item><guid>long</guid><title>long</title><link>{base}/long</link></item>"
        '<item><guid isPermaLink="false">no-link</guid><title>No link at all</title></item>'
        '<item><guid isPermaLink="false">js-link</guid><title>Script link</title>'
        "<link>javascript:alert(1)</link></item>"
        "</channel></rss>"
    ).encode()


PAGES: dict[str, tuple[str, bytes]] = {
    # Charset only in the Content-Type header, as many servers send it.
    "/ru": ("text/html; charset=windows-1251",
            f"<html><head><title>{RU_TITLE}</title></head><body><article><h1>{RU_TITLE}</h1>"
            f"<p>{RU_LEDE * 8}</p><p>{RU_LEDE * 8}</p></article></body></html>".encode("cp1251")),
    "/long": ("text/html; charset=utf-8",
              f'<html><head><meta property="og:title" content="{BODY_TEXT}"></head>'
              f"<body><article><p>{BODY_TEXT}</p></article></body></html>".encode()),
}


class _Publisher(BaseHTTPRequestHandler):
    base: ClassVar[str] = ""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        if self.path == "/feed":
            content_type, body = "application/rss+xml", _feed(_Publisher.base)
        elif self.path in PAGES:
            content_type, body = PAGES[self.path]
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def base_url() -> Iterator[str]:
    with serve(_Publisher) as base:
        _Publisher.base = base
        yield base


def _settings() -> IngestSettings:
    return IngestSettings(  # type: ignore[call-arg]
        allow_private_addresses=True, connect_timeout_seconds=2, read_timeout_seconds=2, total_timeout_seconds=5,
        embeddings=False, host_rate_per_second=50.0, host_burst=50.0,
    )


def _cycle(tmp_path: Path, base: str) -> tuple[dict[str, Any], list[dict[str, Any]], list[PageError]]:
    store = LocalStore(tmp_path / "store")
    csv = tmp_path / "p.csv"
    csv.write_text("publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section\n"
                   f"herald,Herald,herald.test,US,en,2,0.5,false,false,{base}/feed,world\n")
    import_publishers(store, csv)
    shards = [poll_shard(jobs, _settings(), NOW) for jobs in plan_due_feeds(store, NOW, shards=1)]
    summary = commit_ingest(store, shards, NOW)
    rows = [row for key in store.list("log/articles/")
            for row in parquet_bytes_to_table(store.get(key).data).to_pylist()]
    return summary, rows, [e for s in shards for e in s.page_errors]


def test_one_cycle(tmp_path: Path, base_url: str) -> None:
    summary, rows, page_errors = _cycle(tmp_path, base_url)
    by_url = {row["url"]: row for row in rows}
    assert set(by_url) == {f"{base_url}/ru", f"{base_url}/long"}

    # The HTTP charset decides the decoding (before: cp1252 mojibake, "Íîâîñòè äíÿ").
    ru = by_url[f"{base_url}/ru"]
    assert ru["title"] == RU_TITLE
    assert ru["snippet"].startswith(RU_LEDE)

    # A headline, never a body (licensing): the og:title holding the whole article is cut.
    long = by_url[f"{base_url}/long"]
    assert len(long["title"]) <= TITLE_MAX_CHARS and long["title"].endswith("\u2026")

    # Items without a usable link are recorded, one error per item, and the batch goes on.
    no_link = sorted((e.guid, e.error_kind) for e in page_errors if e.error_kind == "no_link")
    assert no_link == [("js-link", "no_link"), ("no-link", "no_link")]
    assert all("no http(s) link" in e.error for e in page_errors)
    assert summary["errors"] == {"page_no_link": 2}
    assert summary["new_items"] == 4 and summary["new_articles"] == 2


def test_items_without_a_link_are_reported_once(tmp_path: Path, base_url: str) -> None:
    # They are marked seen like any other item, so the next poll does not report them again.
    settings = _settings()
    job = FeedJob("f", f"{base_url}/feed", "herald", "en", "US", "", FeedState("f"))
    first = poll_shard([job], settings, NOW)
    assert sum(e.error_kind == "no_link" for e in first.page_errors) == 2
    again = FeedJob("f", job.url, "herald", "en", "US", "", first.states[0])
    second = poll_shard([again], settings, NOW.replace(hour=7))
    assert second.page_errors == [] and second.articles == []


@pytest.mark.parametrize(
    ("html", "feed_title"),
    [
        (f'<html><head><meta property="og:title" content="{BODY_TEXT}"></head><body><p>x</p></body></html>', ""),
        ("<html><body><p>no title here</p></body></html>", BODY_TEXT),
    ],
    ids=["page-title", "feed-item-title-fallback"],
)
def test_build_article_row_caps_the_title(html: str, feed_title: str) -> None:
    job = FeedJob("f", "https://x.example/feed", "p", "en", "US", "", FeedState("f"))
    item = FeedItem("g", "https://x.example/a", feed_title, "", None, None, (), None, None, None)
    row = build_article_row(job, item, html.encode(), "https://x.example/a", NOW, embed=False)
    assert 0 < len(row.title) <= TITLE_MAX_CHARS


def test_build_article_row_keeps_at_most_max_categories() -> None:
    from tasks.ingest.article import MAX_CATEGORIES

    job = FeedJob("f", "https://x.example/feed", "p", "en", "US", "", FeedState("f"))
    categories = tuple(f"tag {i}" for i in range(10_000))
    item = FeedItem("g", "https://x.example/a", "Budget", "", None, None, categories, None, None, None)
    row = build_article_row(job, item, b"<p>Budget</p>", "https://x.example/a", NOW, embed=False)
    assert row.categories == categories[:MAX_CATEGORIES]


def test_build_article_row_uses_the_http_charset() -> None:
    job = FeedJob("f", "https://x.example/feed", "p", "ru", "RU", "", FeedState("f"))
    item = FeedItem("g", "https://x.example/a", "", "", None, None, (), None, None, None)
    _, html = PAGES["/ru"]
    row = build_article_row(job, item, html, "https://x.example/a", NOW, embed=False,
                            http_charset="windows-1251")
    assert row.title == RU_TITLE


# --- several Content-Type headers ------------------------------------------------------------------
# httpx joins repeated headers with ", ". Browsers (WHATWG Fetch "extract a MIME type") take the last
# parseable value and keep an earlier charset only while the essence stays the same.
RU_PAGE = (f"<html><head><title>{RU_TITLE}</title></head><body><article><h1>{RU_TITLE}</h1>"
           f"<p>{RU_LEDE * 8}</p><p>{RU_LEDE * 8}</p></article></body></html>").encode("cp1251")
RU_FEED = ('<?xml version="1.0"?><rss version="2.0"><channel><title>Herald</title>'
           f"<item><guid>ru</guid><title>{RU_TITLE}</title><link>/ru</link></item></channel></rss>").encode("cp1251")
CONTENT_TYPES = {  # id: (Content-Type headers, as sent in order; is the windows-1251 charset the one used)
    "one-header": (["text/html; charset=windows-1251"], True),
    "plain-then-charset": (["text/html", "text/html; charset=windows-1251"], True),
    "charset-then-plain": (["text/html; charset=windows-1251", "text/html"], True),
    "two-charsets-last-wins": (["text/html; charset=iso-8859-5", "text/html; charset=windows-1251"], True),
    "one-joined-header": (["text/html; charset=windows-1251, text/html"], True),
    "unparseable-last-is-skipped": (["text/html; charset=windows-1251", "nonsense"], True),
    "other-essence-drops-charset": (["text/plain; charset=windows-1251", "text/html"], False),
}


class _RepeatedContentType(BaseHTTPRequestHandler):
    content_types: ClassVar[list[str]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        is_feed = self.path == "/feed"
        body = RU_FEED if is_feed else RU_PAGE
        self.send_response(200)
        for value in self.content_types:
            self.send_header("Content-Type", value.replace("text/html", "application/rss+xml") if is_feed else value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(params=list(CONTENT_TYPES), ids=list(CONTENT_TYPES))
def repeated_content_type(request: pytest.FixtureRequest) -> Iterator[tuple[str, bool]]:
    content_types, is_windows_1251 = CONTENT_TYPES[request.param]
    _RepeatedContentType.content_types = content_types
    with serve(_RepeatedContentType) as base:
        yield base, is_windows_1251


def _as_used(text: str, is_windows_1251: bool) -> str:
    """``text`` as read when the windows-1251 charset is used, else as a browser reads it then (windows-1252)."""
    return text if is_windows_1251 else text.encode("cp1251").decode("cp1252")


def test_page_charset_follows_several_content_type_headers(repeated_content_type: tuple[str, bool]) -> None:
    base, is_windows_1251 = repeated_content_type
    job = FeedJob("f", f"{base}/feed", "herald", "ru", "RU", "", FeedState("f"))
    result = poll_shard([job], _settings(), NOW)
    assert result.page_errors == []
    [row] = result.articles
    assert row.title == _as_used(RU_TITLE, is_windows_1251)
    assert row.snippet.startswith(_as_used(RU_LEDE, is_windows_1251).strip())


def test_feed_charset_follows_several_content_type_headers(repeated_content_type: tuple[str, bool]) -> None:
    base, is_windows_1251 = repeated_content_type
    settings = _settings()
    with make_client(settings) as client:
        fetched = fetch_url(client, f"{base}/feed", settings, max_bytes=settings.max_feed_bytes)
    feed = parse_feed(fetched.body, fetched.final_url, headers=fetched.headers)
    assert [item.title for item in feed.items] == [_as_used(RU_TITLE, is_windows_1251)]
